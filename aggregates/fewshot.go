package aggregates

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// FewShotExample is one input/output pair of a user's few-shot library, used
// later as a few-shot prompt in practice sessions.
type FewShotExample struct {
	ID         int64
	OwnerID    int64
	Title      *string
	InputText  string
	OutputText string
	// Meta is a JSON object in canonical form: compact, keys sorted.
	Meta      json.RawMessage
	IsActive  bool
	CreatedAt time.Time
	UpdatedAt time.Time
	Version   int64
}

// Exists reports whether the example was created.
func (x FewShotExample) Exists() bool { return x.Version > 0 }

// EvolveFewShotExample applies one event.
func EvolveFewShotExample(x FewShotExample, env events.Envelope) FewShotExample {
	switch e := env.Event.(type) {
	case events.FewShotCreated:
		x = FewShotExample{
			ID: e.ExampleID, OwnerID: e.UserID, Title: e.Title, InputText: e.InputText, OutputText: e.OutputText,
			Meta: e.Meta, IsActive: e.IsActive, CreatedAt: env.RecordedAt,
		}
	case events.FewShotUpdated:
		x.Title, x.InputText, x.OutputText = e.Title, e.InputText, e.OutputText
		x.Meta, x.IsActive = e.Meta, e.IsActive
	}
	x.UpdatedAt = env.RecordedAt
	x.Version = env.Version
	return x
}

// CreateFewShotExample is the command to add an example to a user's library.
type CreateFewShotExample struct {
	ExampleID  int64
	OwnerID    int64
	Title      *string
	InputText  string
	OutputText string
	Meta       map[string]any // nil: {}
	IsActive   *bool          // nil: true
}

// DecideCreateFewShotExample creates the example: meta defaults to {} and
// is_active to true; the texts must not be blank.
func DecideCreateFewShotExample(x FewShotExample, c CreateFewShotExample) ([]events.Event, error) {
	if x.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Few-shot example already exists")
	}
	// Every field error at once, in the body's order.
	if err := errors.Join(checkExampleText("input_text", c.InputText), checkExampleText("output_text", c.OutputText),
		checkNoNUL("title", c.Title)); err != nil {
		return nil, err
	}
	meta, err := canonicalMeta(c.Meta)
	if err != nil {
		return nil, err
	}
	active := true
	if c.IsActive != nil {
		active = *c.IsActive
	}
	return []events.Event{events.FewShotCreated{
		ExampleID: c.ExampleID, UserID: c.OwnerID, Title: c.Title, InputText: c.InputText, OutputText: c.OutputText,
		Meta: meta, IsActive: active,
	}}, nil
}

// UpdateFewShotExample is a merge update of an example by its owner. A field
// set to nil is reset to its default: title to null, meta to {}, is_active to
// true. The texts have no default and cannot be reset.
type UpdateFewShotExample struct {
	ExampleID  int64
	CallerID   int64
	Title      Patch[*string]
	InputText  Patch[string]
	OutputText Patch[string]
	Meta       Patch[map[string]any]
	IsActive   Patch[*bool]
}

// DecideUpdateFewShotExample applies the fields that change; an update that
// changes nothing records nothing. Another user's example does not exist for
// the caller.
func DecideUpdateFewShotExample(x FewShotExample, c UpdateFewShotExample) ([]events.Event, error) {
	if !x.Exists() || x.OwnerID != c.CallerID {
		return nil, derrors.New(derrors.ErrNotFound, "Few-shot example not found")
	}
	// Every field error at once, in the body's order.
	var errs []error
	if c.Title.Set {
		errs = append(errs, checkNoNUL("title", c.Title.Value))
	}
	if c.InputText.Set {
		errs = append(errs, checkExampleText("input_text", c.InputText.Value))
	}
	if c.OutputText.Set {
		errs = append(errs, checkExampleText("output_text", c.OutputText.Value))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	e := events.FewShotUpdated{
		ExampleID: x.ID, Title: x.Title, InputText: x.InputText, OutputText: x.OutputText,
		Meta: x.Meta, IsActive: x.IsActive,
	}
	if c.Title.Set && !equalPtr(c.Title.Value, x.Title) {
		e.Title = c.Title.Value
		e.Changed = append(e.Changed, "title")
	}
	if c.InputText.Set && c.InputText.Value != x.InputText {
		e.InputText = c.InputText.Value
		e.Changed = append(e.Changed, "input_text")
	}
	if c.OutputText.Set && c.OutputText.Value != x.OutputText {
		e.OutputText = c.OutputText.Value
		e.Changed = append(e.Changed, "output_text")
	}
	if c.Meta.Set {
		meta, err := canonicalMeta(c.Meta.Value)
		if err != nil {
			return nil, err
		}
		if !sameJSON(meta, x.Meta) {
			e.Meta = meta
			e.Changed = append(e.Changed, "meta")
		}
	}
	if c.IsActive.Set {
		active := c.IsActive.Value == nil || *c.IsActive.Value
		if active != x.IsActive {
			e.IsActive = active
			e.Changed = append(e.Changed, "is_active")
		}
	}
	if len(e.Changed) == 0 {
		return nil, nil
	}
	return []events.Event{e}, nil
}

// checkExampleText refuses a blank text: an example is a pair of texts.
func checkExampleText(field, s string) error {
	if strings.TrimSpace(s) == "" {
		return derrors.InvalidField(field, s, field+" must not be blank")
	}
	return checkNoNUL(field, &s)
}

// checkNoNUL refuses U+0000, which a PostgreSQL text column cannot hold: an
// event carrying one would stop the read model's projection.
func checkNoNUL(field string, s *string) error {
	if s != nil && strings.ContainsRune(*s, 0) {
		return derrors.InvalidField(field, *s, field+" must not contain NUL characters")
	}
	return nil
}

// canonicalMeta renders a meta object compactly with sorted keys; nil is {}.
func canonicalMeta(m map[string]any) (json.RawMessage, error) {
	if m == nil {
		return json.RawMessage(`{}`), nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("few-shot meta: %w", err)
	}
	return raw, nil
}

// sameJSON reports whether a canonical object equals a stored one, comparing
// the stored one in canonical form too (an empty one is {}).
func sameJSON(canonical, stored json.RawMessage) bool {
	if len(stored) == 0 {
		stored = json.RawMessage(`{}`)
	}
	if bytes.Equal(canonical, stored) {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(stored))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return false
	}
	again, err := json.Marshal(v)
	return err == nil && bytes.Equal(canonical, again)
}
