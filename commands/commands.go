package commands

import (
	"lectern/eventstore"
	"lectern/ratelimit"
)

// Commands are every aggregate write use case, wired once in cmd/.
type Commands struct {
	CreateAgent   *CreateAgentHandler
	UpdateAgent   *UpdateAgentHandler
	Organisations *Organisations
	Classroom     *Classroom
	Practice      *Practice
	Sessions      *Sessions
	Knowledge     *Knowledge
	// Erasure erases users' personal data; nil without a data key.
	Erasure *Erasure
	// Store is the event store they append to; the event history reads it.
	Store eventstore.Store
}

// New builds every handler.
func New(d Deps) (*Commands, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	c := &Commands{Store: d.Store}
	c.CreateAgent, _ = NewCreateAgentHandler(d)
	c.UpdateAgent, _ = NewUpdateAgentHandler(d)
	c.Organisations = &Organisations{d: d}
	c.Classroom = &Classroom{d: d, limiter: ratelimit.New(d.DB, d.Now)}
	c.Practice = &Practice{d: d}
	return c, nil
}
