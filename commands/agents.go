package commands

import (
	"context"
	"errors"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
)

// CreateAgentHandler creates agents.
type CreateAgentHandler struct{ d Deps }

// NewCreateAgentHandler refuses missing dependencies.
func NewCreateAgentHandler(d Deps) (*CreateAgentHandler, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &CreateAgentHandler{d: d}, nil
}

// Handle creates the agent c describes, owned by c.OwnerID.
func (h *CreateAgentHandler) Handle(ctx context.Context, c aggregates.CreateAgent) (aggregates.Agent, Result, error) {
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

// UpdateAgentHandler edits agents.
type UpdateAgentHandler struct{ d Deps }

// NewUpdateAgentHandler refuses missing dependencies.
func NewUpdateAgentHandler(d Deps) (*UpdateAgentHandler, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &UpdateAgentHandler{d: d}, nil
}

// Handle applies a merge update by the agent's owner.
func (h *UpdateAgentHandler) Handle(ctx context.Context, c aggregates.UpdateAgent) (aggregates.Agent, Result, error) {
	return execute(ctx, h.d, eventstore.StreamName(events.CategoryAgent, c.AgentID), aggregates.EvolveAgent,
		func(a aggregates.Agent) ([]events.Event, error) { return aggregates.DecideUpdateAgent(a, c) })
}
