package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"lectern/queries"
)

// The hand-written session list encoder writes the bytes encoding/json
// writes for the generic list.
// listJSON is a list's answer as encoding/json writes it: what the session
// list's own encoder must match byte for byte.
type listJSON[T any] struct {
	Items []T `json:"items"`
	Total int `json:"total"`
	Page  int `json:"page"`
	Size  int `json:"size"`
}

func TestSessionListEncodingMatchesEncodingJSON(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	str := func(v string) *string { return &v }
	at := time.Date(2026, 11, 22, 4, 36, 1, 123456000, time.FixedZone("x", 3600))
	titles := []*string{nil, str(""), str("Session 1"), str(`quote " and \ backslash`), str("<b>&amp;</b>"),
		str("tab\tnew\nline\r\x00\x01\x1f\x7f"), str("naïve 日本語 \u2028 \u2029"), str("bad \xff\xfe utf-8"), str("emoji 🙂")}
	var items []queries.PracticeSession
	for i, title := range titles {
		s := queries.PracticeSession{ID: int64(i + 1), UserID: 7, Title: title, Notes: titles[len(titles)-1-i],
			CreatedAt: at.Add(time.Duration(i) * time.Microsecond), UpdatedAt: at.Add(time.Hour), KnowledgeIDs: []int64{}}
		if i%2 == 0 {
			s.ClassID, s.ProjectID, s.AgentID, s.KnowledgeIDs = i64(3), i64(-4), i64(1<<62), []int64{1, 2, 3}
		}
		if i == 3 {
			s.KnowledgeIDs = nil
		}
		items = append(items, s)
	}
	for _, list := range []queries.List[queries.PracticeSession]{
		{Items: items, Total: 10_000, Page: queries.Page{Page: 2, Size: 50}},
		{Items: []queries.PracticeSession{}, Total: 0, Page: queries.Page{Page: 1, Size: 50}},
	} {
		out := listJSON[practiceSessionJSON]{Items: []practiceSessionJSON{}, Total: list.Total, Page: list.Page.Page, Size: list.Page.Size}
		for _, s := range list.Items {
			out.Items = append(out.Items, sessionFromRow(s))
		}
		want, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendSessionList(nil, list); !bytes.Equal(got, want) {
			t.Errorf("encoding differs:\n got %s\nwant %s", got, want)
		}
	}
}
