package commands

import (
	"context"
	"errors"

	"lectern/aggregates"
	"lectern/events"
	"lectern/eventstore"
)

func fewShotStream(id int64) string { return eventstore.StreamName(events.CategoryFewShot, id) }

// CreateFewShotExample adds the example c describes to c.OwnerID's library.
func (p *Practice) CreateFewShotExample(ctx context.Context, c aggregates.CreateFewShotExample) (aggregates.FewShotExample, Result, error) {
	if c.OwnerID <= 0 {
		return aggregates.FewShotExample{}, Result{}, errors.New("create few-shot example: no owner")
	}
	id, err := nextID(ctx, p.d, "fewshot_ids")
	if err != nil {
		return aggregates.FewShotExample{}, Result{}, err
	}
	c.ExampleID = id
	return create(ctx, p.d, fewShotStream(id), aggregates.EvolveFewShotExample,
		func(x aggregates.FewShotExample) ([]events.Event, error) {
			return aggregates.DecideCreateFewShotExample(x, c)
		})
}

// UpdateFewShotExample applies a merge update by the example's owner.
func (p *Practice) UpdateFewShotExample(ctx context.Context, c aggregates.UpdateFewShotExample) (aggregates.FewShotExample, Result, error) {
	return execute(ctx, p.d, fewShotStream(c.ExampleID), aggregates.EvolveFewShotExample,
		func(x aggregates.FewShotExample) ([]events.Event, error) {
			return aggregates.DecideUpdateFewShotExample(x, c)
		})
}
