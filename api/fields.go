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
	{Name: "page", Kind: validation.Int, Ge: bound(1), Default: 1},
	{Name: "size", Kind: validation.Int, Ge: bound(1), Le: bound(200), Default: 50},
}

// Limits not in the seed (DESIGN §4).
const (
	maxName = 200
	maxText = 100_000
)
