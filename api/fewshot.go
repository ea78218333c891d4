package api

import (
	"encoding/json"
	"net/http"

	"lectern/aggregates"
	"lectern/api/validation"
	"lectern/projections"
	"lectern/queries"
)

var (
	fewShotPath       = []validation.Field{idParam("example_id")}
	fewShotReadModels = []string{projections.FewShotExamplesProjection}

	createFewShotBody = validation.Schema{Fields: []validation.Field{
		{Name: "input_text", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxText},
		{Name: "output_text", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxText},
		optString("title", maxName, true),
		{Name: "meta", Kind: validation.Object, MaxItems: maxObjectKeys, Default: map[string]any{}},
		{Name: "is_active", Kind: validation.Bool, Nullable: true, Default: true},
	}}
	// Every field is optional (seed 4.6); null resets a field to its default,
	// and the texts, which have none, refuse it (see updateFewShot).
	updateFewShotBody = validation.Schema{Fields: []validation.Field{
		{Name: "title", Kind: validation.String, Nullable: true, MaxLength: maxName, Description: "null clears the title"},
		{Name: "input_text", Kind: validation.String, Nullable: true, MinLength: 1, MaxLength: maxText,
			Description: "null is refused (422): an example's texts cannot be empty"},
		{Name: "output_text", Kind: validation.String, Nullable: true, MinLength: 1, MaxLength: maxText,
			Description: "null is refused (422): an example's texts cannot be empty"},
		{Name: "meta", Kind: validation.Object, MaxItems: maxObjectKeys, Nullable: true, Description: "replaces the whole object; null resets it to {}"},
		{Name: "is_active", Kind: validation.Bool, Nullable: true, Description: "null resets it to true"},
	}}
	listFewShotQuery = append([]validation.Field{
		{Name: "is_active", Kind: validation.Bool, Description: "only the active (true) or inactive (false) examples"},
	}, pageQuery...)
)

// fewShotOperations are the caller's few-shot example library (seed 2.3, 4.6; DESIGN §7).
func (s *Server) fewShotOperations() []operation {
	return []operation{
		{method: http.MethodPost, path: "/user/practice/few-shot-examples", id: "create_few_shot_example", tag: "practice",
			auth: true, idempotent: true, summary: "Add a few-shot example to my library", body: &createFewShotBody,
			status: 201, response: "FewShotExample", errors: []int{401, 409},
			location: &locatedBy{get: "get_few_shot_example", id: "example_id"}, handle: s.createFewShot},
		{method: http.MethodGet, path: "/user/practice/few-shot-examples", id: "list_few_shot_examples", tag: "practice",
			auth: true, summary: "List my few-shot examples, oldest first", query: listFewShotQuery, status: 200,
			response: "FewShotExampleList", errors: []int{401}, handle: s.listFewShots},
		{method: http.MethodGet, path: "/user/practice/few-shot-examples/{example_id}", id: "get_few_shot_example", tag: "practice",
			auth: true, summary: "Read one of my few-shot examples", pathParams: fewShotPath, status: 200,
			response: "FewShotExample", errors: []int{401, 404}, handle: s.getFewShot},
		{method: http.MethodPatch, path: "/user/practice/few-shot-examples/{example_id}", id: "update_few_shot_example", tag: "practice",
			auth: true, summary: "Update my few-shot example (merge; null resets a field to its default)", pathParams: fewShotPath,
			body: &updateFewShotBody, status: 200, response: "FewShotExample", errors: []int{401, 404, 409}, handle: s.updateFewShot},
	}
}

// fewShotComponents are their response schemas.
func fewShotComponents() schema {
	return schema{
		"FewShotExample": object(schema{
			"example_id": integer(), "user_id": integer(), "input_text": str(), "output_text": str(), "is_active": boolean(),
			"created_at": dateTime(), "updated_at": dateTime(), "title": nullable(str()), "meta": schema{"type": "object"},
		}, "example_id", "user_id", "input_text", "output_text", "is_active", "created_at", "updated_at"),
		"FewShotExampleList": listOf("FewShotExample"),
	}
}

type fewShotJSON struct {
	ExampleID  int64           `json:"example_id"`
	UserID     int64           `json:"user_id"`
	InputText  string          `json:"input_text"`
	OutputText string          `json:"output_text"`
	IsActive   bool            `json:"is_active"`
	CreatedAt  string          `json:"created_at"`
	UpdatedAt  string          `json:"updated_at"`
	Title      *string         `json:"title"`
	Meta       json.RawMessage `json:"meta"`
}

// metaObject is a stored meta, {} when there is none.
func metaObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`{}`)
	}
	return raw
}

func fewShotFromState(x aggregates.FewShotExample) fewShotJSON {
	return fewShotJSON{ExampleID: x.ID, UserID: x.OwnerID, InputText: x.InputText, OutputText: x.OutputText,
		IsActive: x.IsActive, CreatedAt: ts(x.CreatedAt), UpdatedAt: ts(x.UpdatedAt), Title: x.Title, Meta: metaObject(x.Meta)}
}

func fewShotFromRow(x queries.FewShotExample) fewShotJSON {
	return fewShotJSON{ExampleID: x.ID, UserID: x.UserID, InputText: x.InputText, OutputText: x.OutputText,
		IsActive: x.IsActive, CreatedAt: ts(x.CreatedAt), UpdatedAt: ts(x.UpdatedAt), Title: x.Title, Meta: metaObject(x.Meta)}
}

func (s *Server) createFewShot(w http.ResponseWriter, r *http.Request, in input) error {
	c := aggregates.CreateFewShotExample{OwnerID: in.user.UserID}
	c.InputText, _ = in.body.String("input_text")
	c.OutputText, _ = in.body.String("output_text")
	c.Title = optionalString(in.body, "title")
	c.Meta, _ = in.body.Object("meta")
	if b, ok := in.body.Bool("is_active"); ok {
		c.IsActive = &b
	}
	x, res, err := s.deps.Commands.Practice.CreateFewShotExample(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, fewShotReadModels...)
	writeJSON(w, http.StatusCreated, fewShotFromState(x))
	return nil
}

func (s *Server) updateFewShot(w http.ResponseWriter, r *http.Request, in input) error {
	// The seed types the texts string|null, but an example without one is no
	// example: null is refused, both fields at once.
	var nulls validation.Errors
	for _, f := range []string{"input_text", "output_text"} {
		if in.body.IsNull(f) {
			nulls = append(nulls, validation.ValueError([]any{"body", f}, nil, f+" cannot be null"))
		}
	}
	if len(nulls) > 0 {
		return nulls
	}
	id, _ := in.path.Int("example_id")
	c := aggregates.UpdateFewShotExample{ExampleID: id, CallerID: in.user.UserID}
	if in.body.Has("title") {
		c.Title = aggregates.Set(optionalString(in.body, "title"))
	}
	if v, ok := in.body.String("input_text"); ok {
		c.InputText = aggregates.Set(v)
	}
	if v, ok := in.body.String("output_text"); ok {
		c.OutputText = aggregates.Set(v)
	}
	if in.body.Has("meta") {
		m, _ := in.body.Object("meta") // nil for null: reset to {}
		c.Meta = aggregates.Set(m)
	}
	if in.body.Has("is_active") {
		var active *bool // nil for null: reset to true
		if b, ok := in.body.Bool("is_active"); ok {
			active = &b
		}
		c.IsActive = aggregates.Set(active)
	}
	x, res, err := s.deps.Commands.Practice.UpdateFewShotExample(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, fewShotReadModels...)
	writeJSON(w, http.StatusOK, fewShotFromState(x))
	return nil
}

func (s *Server) listFewShots(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, fewShotReadModels...); err != nil {
		return err
	}
	var active *bool
	if b, ok := in.query.Bool("is_active"); ok {
		active = &b
	}
	list, err := s.deps.Queries.ListFewShotExamples(r.Context(), in.user.UserID, active, pageOf(in.query))
	if err != nil {
		return err
	}
	writeList(w, list, fewShotFromRow)
	return nil
}

func (s *Server) getFewShot(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, fewShotReadModels...); err != nil {
		return err
	}
	id, _ := in.path.Int("example_id")
	x, err := s.deps.Queries.FewShotExample(r.Context(), in.user.UserID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, fewShotFromRow(x))
	return nil
}
