package commands

import (
	"context"
	"errors"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
)

// Agents is the agents use cases: create an agent, edit it.
type Agents struct{ d Deps }

// NewAgents refuses missing dependencies.
func NewAgents(d Deps) (*Agents, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &Agents{d: d}, nil
}

// Create creates the agent c describes, owned by c.OwnerID.
func (h *Agents) Create(ctx context.Context, c aggregates.CreateAgent) (aggregates.Agent, Result, error) {
	if c.OwnerID <= 0 {
		return aggregates.Agent{}, Result{}, errors.New("create agent: no owner")
	}
	id, err := nextID(ctx, h.d, "agent_ids")
	if err != nil {
		return aggregates.Agent{}, Result{}, err
	}
	c.AgentID = id
	return create(ctx, h.d, eventstore.StreamName(events.CategoryAgent, id), aggregates.EvolveAgent,
		func(a aggregates.Agent) ([]events.Event, error) { return aggregates.DecideCreateAgent(a, c) })
}

// Update applies a merge update by the agent's owner.
func (h *Agents) Update(ctx context.Context, c aggregates.UpdateAgent) (aggregates.Agent, Result, error) {
	return execute(ctx, h.d, eventstore.StreamName(events.CategoryAgent, c.AgentID), aggregates.EvolveAgent,
		func(a aggregates.Agent) ([]events.Event, error) { return aggregates.DecideUpdateAgent(a, c) })
}
