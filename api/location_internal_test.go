package api

import (
	"net/http"
	"strings"
	"testing"

	"lectern/api/validation"
)

// A Location that does not fit the table is refused when the server is
// built, not discovered by a client.
func TestResolveLocationsRefusesMistakes(t *testing.T) {
	t.Parallel()
	schemas := schema{"Thing": object(schema{"thing_id": integer()}, "thing_id")}
	parent := []validation.Field{idParam("parent_id")}
	get := operation{method: http.MethodGet, path: "/parents/{parent_id}/things/{thing_id}", id: "get_thing"}
	post := operation{method: http.MethodPost, path: "/things", id: "post_thing"}
	create := func(edit func(*operation)) []operation {
		op := operation{method: http.MethodPost, path: "/parents/{parent_id}/things", id: "create_thing", pathParams: parent,
			status: 201, response: "Thing", location: &locatedBy{get: "get_thing", id: "thing_id"}}
		edit(&op)
		return []operation{get, post, op}
	}
	ops := create(func(*operation) {})
	if err := resolveLocations(ops, schemas); err != nil || ops[2].locationPath != get.path {
		t.Fatalf("a sound Location: %v, template %q", err, ops[2].locationPath)
	}
	for want, edit := range map[string]func(*operation){
		"which is no GET operation": func(op *operation) { op.location.get = "post_thing" },
		"no GET operation":          func(op *operation) { op.location.get = "nowhere" },
		"not a 201":                 func(op *operation) { op.status = 200 },
		"has no field":              func(op *operation) { op.location.id = "id" },
		"needs path parameter":      func(op *operation) { op.pathParams = nil },
	} {
		err := resolveLocations(create(edit), schemas)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
}
