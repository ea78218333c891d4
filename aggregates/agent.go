package aggregates

import (
	"strings"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Agent is a user's named system prompt.
type Agent struct {
	ID              int64
	OwnerID         int64
	Name            string
	SystemPrompt    string
	RoleDescription *string
	TemplateSource  *string
	IsActive        bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
	Version         int64
}

// Exists reports whether the agent was created.
func (a Agent) Exists() bool { return a.Version > 0 }

// EvolveAgent applies one event.
func EvolveAgent(a Agent, env events.Envelope) Agent {
	switch e := env.Event.(type) {
	case events.AgentCreated:
		a = Agent{
			ID: e.AgentID, OwnerID: e.OwnerID, Name: e.Name, SystemPrompt: e.SystemPrompt,
			RoleDescription: e.RoleDescription, TemplateSource: e.TemplateSource, IsActive: e.IsActive,
			CreatedAt: env.RecordedAt,
		}
	case events.AgentUpdated:
		a.Name, a.SystemPrompt = e.Name, e.SystemPrompt
		a.RoleDescription, a.TemplateSource, a.IsActive = e.RoleDescription, e.TemplateSource, e.IsActive
	}
	a.UpdatedAt = env.RecordedAt
	a.Version = env.Version
	return a
}

// CreateAgent is the command to create an agent.
type CreateAgent struct {
	AgentID         int64
	OwnerID         int64
	Name            string
	SystemPrompt    string
	RoleDescription *string
	TemplateSource  *string
	IsActive        *bool
}

// DecideCreateAgent creates the agent; is_active defaults to true.
func DecideCreateAgent(a Agent, c CreateAgent) ([]events.Event, error) {
	if a.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Agent already exists")
	}
	if strings.TrimSpace(c.Name) == "" {
		return nil, derrors.InvalidField("name", c.Name, "name must not be blank")
	}
	active := true
	if c.IsActive != nil {
		active = *c.IsActive
	}
	return []events.Event{events.AgentCreated{
		AgentID: c.AgentID, OwnerID: c.OwnerID, Name: c.Name, SystemPrompt: c.SystemPrompt,
		RoleDescription: c.RoleDescription, TemplateSource: c.TemplateSource, IsActive: active,
	}}, nil
}

// UpdateAgent is a merge update of an agent by its owner.
type UpdateAgent struct {
	AgentID         int64
	CallerID        int64
	Name            Patch[string]
	SystemPrompt    Patch[string]
	RoleDescription Patch[*string]
	TemplateSource  Patch[*string]
	IsActive        Patch[bool]
}

// DecideUpdateAgent applies the fields that change; an update that changes
// nothing records nothing. Another user's agent does not exist for the caller.
func DecideUpdateAgent(a Agent, c UpdateAgent) ([]events.Event, error) {
	if !a.Exists() || a.OwnerID != c.CallerID {
		return nil, derrors.New(derrors.ErrNotFound, "Agent not found")
	}
	if c.Name.Set && strings.TrimSpace(c.Name.Value) == "" {
		return nil, derrors.InvalidField("name", c.Name.Value, "name must not be blank")
	}
	e := events.AgentUpdated{
		AgentID: a.ID, Name: a.Name, SystemPrompt: a.SystemPrompt,
		RoleDescription: a.RoleDescription, TemplateSource: a.TemplateSource, IsActive: a.IsActive,
	}
	if c.Name.Set && c.Name.Value != a.Name {
		e.Name = c.Name.Value
		e.Changed = append(e.Changed, "name")
	}
	if c.RoleDescription.Set && !equalPtr(c.RoleDescription.Value, a.RoleDescription) {
		e.RoleDescription = c.RoleDescription.Value
		e.Changed = append(e.Changed, "role_description")
	}
	if c.SystemPrompt.Set && c.SystemPrompt.Value != a.SystemPrompt {
		e.SystemPrompt = c.SystemPrompt.Value
		e.Changed = append(e.Changed, "system_prompt")
	}
	if c.TemplateSource.Set && !equalPtr(c.TemplateSource.Value, a.TemplateSource) {
		e.TemplateSource = c.TemplateSource.Value
		e.Changed = append(e.Changed, "template_source")
	}
	if c.IsActive.Set && c.IsActive.Value != a.IsActive {
		e.IsActive = c.IsActive.Value
		e.Changed = append(e.Changed, "is_active")
	}
	if len(e.Changed) == 0 {
		return nil, nil
	}
	return []events.Event{e}, nil
}
