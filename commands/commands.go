package commands

import (
	"lectern/eventstore"
)

// Commands are every write use case, built once by New.
//
// One shape throughout the package: a handler is a struct per area (an
// aggregate, or a few that change together: Agents, Organisations,
// Classroom, Practice, Sessions, Knowledge, Identity, Erasure), each of its
// exported methods one use case that loads, decides (package aggregates) and
// appends. Each has one constructor, NewX(d Deps) (*X, error), which refuses
// the fields of d it needs when they are missing, and nothing sets a field of
// a handler after it. A handler may read its own write model (the aggregate
// from its stream: Identity.UserByEmail, Knowledge.DocumentText); reads of
// read models are package queries' (queries.KnowledgeSearch among them).
// Background work that appends is a worker of its own beside the handlers
// (KnowledgeJobs).
type Commands struct {
	Agents        *Agents
	Organisations *Organisations
	Classroom     *Classroom
	Practice      *Practice
	Sessions      *Sessions
	Knowledge     *Knowledge
	Identity      *Identity
	// Erasure erases users' personal data; nil without a data key (d.Keys).
	Erasure *Erasure
	// KnowledgeJobs works the reindex jobs (service.RunBackground runs it).
	KnowledgeJobs *KnowledgeJobs
	// Store is the event store they append to; the event history reads it.
	Store eventstore.Store
}

// New builds every handler from d, or returns the first constructor's error.
func New(d Deps) (*Commands, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	c := &Commands{Store: d.Store}
	var err error
	if c.Agents, err = NewAgents(d); err != nil {
		return nil, err
	}
	if c.Organisations, err = NewOrganisations(d); err != nil {
		return nil, err
	}
	if c.Classroom, err = NewClassroom(d); err != nil {
		return nil, err
	}
	if c.Practice, err = NewPractice(d); err != nil {
		return nil, err
	}
	if c.Sessions, err = NewSessions(d); err != nil {
		return nil, err
	}
	if c.Knowledge, err = NewKnowledge(d); err != nil {
		return nil, err
	}
	if c.Identity, err = NewIdentity(d); err != nil {
		return nil, err
	}
	if d.Keys != nil {
		if c.Erasure, err = NewErasure(d); err != nil {
			return nil, err
		}
	}
	if c.KnowledgeJobs, err = NewKnowledgeJobs(d); err != nil {
		return nil, err
	}
	return c, nil
}
