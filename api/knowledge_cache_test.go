package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Searches keep vectors in memory; a reindex gives the chunks new ids, and
// the next search must answer from the new index, not a stale copy.
func TestSearchFollowsReindex(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	doc := e.uploadDocument(t, u.Access, "Notes", strings.Repeat("Cells divide by mitosis and meiosis. ", 60)+"Photosynthesis happens in chloroplasts.")
	id := num(t, doc, "knowledge_id")
	search := func() (ids []any, texts []any) {
		t.Helper()
		res := e.do(t, "POST", documentPath(id)+"/search", map[string]any{"query": "chloroplasts photosynthesis"}, u.Access)
		wantStatus(t, res, http.StatusOK)
		for _, r := range field(t, res, "results").([]any) {
			ids = append(ids, r.(map[string]any)["chunk_id"])
			texts = append(texts, r.(map[string]any)["text"])
		}
		return ids, texts
	}
	before, beforeTexts := search()
	if len(before) == 0 {
		t.Fatal("no results before the reindex")
	}
	res := e.do(t, "POST", documentPath(id)+"/reindex", nil, u.Access)
	wantStatus(t, res, http.StatusAccepted)
	done := e.awaitJob(t, u.Access, fmt.Sprintf("%s/reindex/%d", documentPath(id), num(t, res, "job_id")))
	if str(t, done, "status") != "completed" {
		t.Fatalf("%s: reindex did not complete", done)
	}
	after, afterTexts := search()
	if diff := cmp.Diff(beforeTexts, afterTexts); diff != "" {
		t.Errorf("the same text must be found after a reindex (-before +after):\n%s", diff)
	}
	for i := range after {
		if i < len(before) && after[i] == before[i] {
			t.Errorf("result %d still names chunk %v of the replaced index", i, after[i])
		}
	}
}
