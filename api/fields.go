package api

import "lectern/api/validation"

// Field constructors keep the operation table short.

func bound(v float64) *float64 { return validation.Bound(v) }

func reqString(name string, maxLen int) validation.Field {
	return validation.Field{Name: name, Kind: validation.String, Required: true, MaxLength: maxLen}
}

func optString(name string, maxLen int, nullable bool) validation.Field {
	return validation.Field{Name: name, Kind: validation.String, Nullable: nullable, MaxLength: maxLen}
}

func idParam(name string) validation.Field {
	return validation.Field{Name: name, Kind: validation.Int, Required: true, Ge: bound(1)}
}

// pageQuery is the page and size of every list.
var pageQuery = []validation.Field{
	{Name: "page", Kind: validation.Int, Ge: bound(1), Le: bound(maxPage), Default: 1},
	{Name: "size", Kind: validation.Int, Ge: bound(1), Le: bound(200), Default: 50},
}

// Limits not in the seed (DESIGN §4).
const (
	maxName = 200
	maxText = 100_000
	// maxPage keeps a list's OFFSET ((page-1)*size) far inside int64 and
	// PostgreSQL's reach.
	maxPage = 1_000_000
)

// Bounds on the collections a request may hold (security.md): each one far
// above real use, so that no request costs much more than its size.
const (
	maxModelsPerTurn   = 10  // model_names
	maxKnowledgeIDs    = 20  // knowledge_ids
	maxFewShotIDs      = 50  // few_shot_example_ids
	maxAllowedModelIDs = 100 // allowed_model_ids
	maxObjectKeys      = 50  // style_params, generation_params, meta
)
