package aggregates

import (
	"strings"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Organisation is a school or company whose partners run courses and classes.
type Organisation struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// Exists reports whether the organisation was created.
func (o Organisation) Exists() bool { return o.Version > 0 }

// EvolveOrganisation applies one event.
func EvolveOrganisation(o Organisation, env events.Envelope) Organisation {
	if e, ok := env.Event.(events.OrganisationCreated); ok {
		o = Organisation{ID: e.OrgID, Name: e.Name, CreatedAt: env.RecordedAt}
	}
	o.UpdatedAt, o.Version = env.RecordedAt, env.Version
	return o
}

// DecideCreateOrganisation creates an organisation with a non-blank name.
func DecideCreateOrganisation(o Organisation, id int64, name string, by int64) ([]events.Event, error) {
	if o.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Organization already exists")
	}
	if strings.TrimSpace(name) == "" {
		return nil, derrors.InvalidField("name", name, "name must not be blank")
	}
	return []events.Event{events.OrganisationCreated{OrgID: id, Name: strings.TrimSpace(name), CreatedBy: by}}, nil
}

// Partner roles.
var PartnerRoles = []string{RolePartner, RoleAssistant}

// Partner is an instructor or assistant of one organisation.
type Partner struct {
	ID       int64
	OrgID    int64
	UserID   *int64
	FullName string
	Email    string
	Phone    *string
	Role     string
	IsActive bool
	// Erased: the partner's personal data was erased (partner.erased).
	Erased    bool
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// Exists reports whether the partner was created.
func (p Partner) Exists() bool { return p.Version > 0 }

// EvolvePartner applies one event.
func EvolvePartner(p Partner, env events.Envelope) Partner {
	switch e := env.Event.(type) {
	case events.PartnerCreated:
		p = Partner{ID: e.PartnerID, OrgID: e.OrgID, UserID: e.UserID, FullName: e.FullName, Email: e.Email,
			Phone: e.Phone, Role: e.Role, IsActive: e.IsActive, CreatedAt: env.RecordedAt}
	case events.PartnerErased:
		p.Erased = true
	}
	p.UpdatedAt, p.Version = env.RecordedAt, env.Version
	return p
}

// CreatePartner is the command to create a partner in an existing organisation.
type CreatePartner struct {
	PartnerID int64
	OrgID     int64
	UserID    *int64
	FullName  string
	Email     string
	Phone     *string
	Role      string
	IsActive  bool
}

// DecideCreatePartner creates the partner; role is partner or assistant.
func DecideCreatePartner(p Partner, c CreatePartner) ([]events.Event, error) {
	if p.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Partner already exists")
	}
	if strings.TrimSpace(c.FullName) == "" {
		return nil, derrors.InvalidField("full_name", c.FullName, "full_name must not be blank")
	}
	if c.Role != RolePartner && c.Role != RoleAssistant {
		return nil, derrors.InvalidField("role", c.Role, "role must be 'partner' or 'assistant'")
	}
	return []events.Event{events.PartnerCreated{PartnerID: c.PartnerID, OrgID: c.OrgID, UserID: c.UserID,
		FullName: strings.TrimSpace(c.FullName), Email: c.Email, Phone: c.Phone, Role: c.Role, IsActive: c.IsActive}}, nil
}

// DecideErasePartner erases a partner's personal data on an admin's behalf:
// only a partner without a user account, whose data is a subject of its
// own (a partner with one is erased with the user). Erasing an erased
// partner records nothing.
func DecideErasePartner(p Partner, actor int64) ([]events.Event, error) {
	if !p.Exists() {
		return nil, derrors.New(derrors.ErrNotFound, "Partner not found")
	}
	if p.UserID != nil {
		return nil, derrors.New(derrors.ErrConflict,
			"This partner has a user account (user %d): erase the user, which erases the partner record too", *p.UserID)
	}
	if p.Erased {
		return nil, nil
	}
	return []events.Event{events.PartnerErased{PartnerID: p.ID, Actor: actor}}, nil
}
