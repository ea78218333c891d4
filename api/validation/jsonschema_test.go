package validation

import (
	"encoding/json"
	"testing"
)

func TestSchemaJSONSchema(t *testing.T) {
	s := Schema{Fields: []Field{
		{Name: "query", Kind: String, Required: true, MinLength: 1, MaxLength: 200, Description: "Text to search for."},
		{Name: "model_names", Kind: List, Required: true, Elem: &Field{Kind: String, MaxLength: 50}},
		{Name: "top_k", Kind: Int, Ge: Bound(1), Le: Bound(200), Default: 10},
		{Name: "temperature", Kind: Float, Nullable: true, Ge: Bound(0), Le: Bound(1.5)},
		{Name: "mode", Kind: Enum, Enum: []string{"accurate", "balanced"}, Default: "balanced"},
		{Name: "score_type", Kind: Literal, Enum: []string{"cosine_similarity"}},
		{Name: "sort", Kind: Enum, Nullable: true, Enum: []string{"asc", "desc"}},
		{Name: "price", Kind: Decimal, Ge: Bound(0)},
		{Name: "email", Kind: Email, Required: true},
		{Name: "born_on", Kind: Date},
		{Name: "seen_at", Kind: DateTime, Nullable: true},
		{Name: "meta", Kind: Object},
		{Name: "exact", Kind: Bool},
		{Name: "tags", Kind: List},
	}}
	got, err := json.Marshal(s.JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json sorts object keys.
	want := `{"properties":{` +
		`"born_on":{"format":"date","title":"Born On","type":"string"},` +
		`"email":{"format":"email","title":"Email","type":"string"},` +
		`"exact":{"title":"Exact","type":"boolean"},` +
		`"meta":{"title":"Meta","type":"object"},` +
		`"mode":{"default":"balanced","enum":["accurate","balanced"],"title":"Mode","type":"string"},` +
		`"model_names":{"items":{"maxLength":50,"type":"string"},"title":"Model Names","type":"array"},` +
		`"price":{"anyOf":[{"minimum":0,"type":"number"},{"pattern":"^[+-]?(\\d+\\.?\\d*|\\.\\d+)$","type":"string"}],"title":"Price"},` +
		`"query":{"description":"Text to search for.","maxLength":200,"minLength":1,"title":"Query","type":"string"},` +
		`"score_type":{"const":"cosine_similarity","title":"Score Type","type":"string"},` +
		`"seen_at":{"format":"date-time","title":"Seen At","type":["string","null"]},` +
		`"sort":{"enum":["asc","desc",null],"title":"Sort","type":["string","null"]},` +
		`"tags":{"items":{},"title":"Tags","type":"array"},` +
		`"temperature":{"maximum":1.5,"minimum":0,"title":"Temperature","type":["number","null"]},` +
		`"top_k":{"default":10,"maximum":200,"minimum":1,"title":"Top K","type":"integer"}` +
		`},"required":["query","model_names","email"],"type":"object"}`
	if string(got) != want {
		t.Errorf("\n got: %s\nwant: %s", got, want)
	}

	if _, ok := (Schema{Fields: []Field{{Name: "a", Kind: Int}}}).JSONSchema()["required"]; ok {
		t.Error(`"required" present although no field is required`)
	}
}

func TestFieldTitle(t *testing.T) {
	for name, want := range map[string]string{
		"model_names": "Model Names", "top_k": "Top K", "URL": "Url", "ids2name": "Ids2Name", "_private": "Private",
	} {
		if got := fieldTitle(name); got != want {
			t.Errorf("fieldTitle(%q) = %q, want %q", name, got, want)
		}
	}
}
