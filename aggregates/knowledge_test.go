package aggregates_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"lectern/aggregates"
	"lectern/derrors"
	"lectern/events"
)

var (
	defaultSettings = events.KnowledgeSearchSettings{TopK: 5, MinScore: "0.0", ScoreType: "cosine_similarity", RerankerTopN: 3}
	docUploaded     = events.KnowledgeDocumentUploaded{KnowledgeID: 4, UserID: 7, Title: "Cells", ContentType: "text/plain",
		Size: 11, ContentHash: "c0ffee", ContentSize: 12, Settings: defaultSettings}
)

func TestKnowledgeDecisions(t *testing.T) {
	upload := func(c aggregates.UploadKnowledgeDocument) func(aggregates.KnowledgeDocument) ([]events.Event, error) {
		return func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideUploadKnowledgeDocument(d, c)
		}
	}
	update := func(c aggregates.UpdateKnowledgeSettings) func(aggregates.KnowledgeDocument) ([]events.Event, error) {
		c.KnowledgeID = 4
		if c.CallerID == 0 {
			c.CallerID = 7
		}
		return func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideUpdateKnowledgeSettings(d, c)
		}
	}
	reindex := func(caller, job int64) func(aggregates.KnowledgeDocument) ([]events.Event, error) {
		return func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideRequestReindex(d, aggregates.RequestReindex{KnowledgeID: 4, CallerID: caller, JobID: job})
		}
	}
	finish := func(c aggregates.FinishReindex) func(aggregates.KnowledgeDocument) ([]events.Event, error) {
		return func(d aggregates.KnowledgeDocument) ([]events.Event, error) {
			return aggregates.DecideFinishReindex(d, c)
		}
	}
	tuned := events.KnowledgeSearchSettings{TopK: 10, MinScore: "0.25", ScoreType: "cosine_similarity", RerankerEnabled: true,
		RerankerModel: ptr("lexical"), RerankerTopN: 4}
	cases := []struct {
		name    string
		given   []events.Event
		when    func(aggregates.KnowledgeDocument) ([]events.Event, error)
		then    []events.Event
		wantErr error
	}{
		{
			name: "an upload starts with the default settings and records the text's address, not the text",
			when: upload(aggregates.UploadKnowledgeDocument{KnowledgeID: 4, OwnerID: 7, Title: "Cells", ContentType: "text/plain", Size: 11,
				Content: "Cells divide", ContentHash: "c0ffee", ContentSize: 12}),
			then: []events.Event{docUploaded},
		},
		{
			name:    "a blank text is invalid",
			when:    upload(aggregates.UploadKnowledgeDocument{KnowledgeID: 4, OwnerID: 7, Title: "Cells", Content: " \n"}),
			wantErr: &derrors.FieldError{Field: "content"},
		},
		{
			name:    "a NUL in the text is invalid",
			when:    upload(aggregates.UploadKnowledgeDocument{KnowledgeID: 4, OwnerID: 7, Title: "Cells", Content: "a\x00"}),
			wantErr: &derrors.FieldError{Field: "content"},
		},
		{
			name:    "a blank title is invalid",
			when:    upload(aggregates.UploadKnowledgeDocument{KnowledgeID: 4, OwnerID: 7, Title: " ", Content: "x"}),
			wantErr: &derrors.FieldError{Field: "title"},
		},
		{
			name:  "settings merge: given fields change, the others stay",
			given: []events.Event{docUploaded},
			when: update(aggregates.UpdateKnowledgeSettings{TopK: aggregates.Set(ptr(10)), MinScore: aggregates.Set(ptr("0.25")),
				RerankerEnabled: aggregates.Set(ptr(true)), RerankerModel: aggregates.Set(ptr("lexical")), RerankerTopN: aggregates.Set(ptr(4))}),
			then: []events.Event{events.KnowledgeSettingsChanged{KnowledgeID: 4, Settings: tuned,
				Changed: []string{"top_k", "min_score", "reranker_enabled", "reranker_model", "reranker_top_n"}}},
		},
		{
			name:  "null resets a field to its default",
			given: []events.Event{docUploaded, events.KnowledgeSettingsChanged{KnowledgeID: 4, Settings: tuned}},
			when: update(aggregates.UpdateKnowledgeSettings{TopK: aggregates.Set[*int](nil), MinScore: aggregates.Set[*string](nil),
				ScoreType: aggregates.Set[*string](nil), RerankerEnabled: aggregates.Set[*bool](nil),
				RerankerModel: aggregates.Set[*string](nil), RerankerTopN: aggregates.Set[*int](nil)}),
			then: []events.Event{events.KnowledgeSettingsChanged{KnowledgeID: 4, Settings: defaultSettings,
				Changed: []string{"top_k", "min_score", "reranker_enabled", "reranker_model", "reranker_top_n"}}},
		},
		{
			name:  "an update that changes nothing records nothing (0 is 0.0)",
			given: []events.Event{docUploaded},
			when:  update(aggregates.UpdateKnowledgeSettings{TopK: aggregates.Set(ptr(5)), MinScore: aggregates.Set(ptr("0"))}),
		},
		{
			name:    "top_k above MaxTopK is invalid",
			given:   []events.Event{docUploaded},
			when:    update(aggregates.UpdateKnowledgeSettings{TopK: aggregates.Set(ptr(aggregates.MaxTopK + 1))}),
			wantErr: &derrors.FieldError{Field: "top_k"},
		},
		{
			name:    "reranker_top_n above MaxTopK is invalid, whatever top_k",
			given:   []events.Event{docUploaded},
			when:    update(aggregates.UpdateKnowledgeSettings{RerankerTopN: aggregates.Set(ptr(1 << 31))}),
			wantErr: &derrors.FieldError{Field: "reranker_top_n"},
		},
		{
			name:    "reranker_top_n above top_k is invalid",
			given:   []events.Event{docUploaded},
			when:    update(aggregates.UpdateKnowledgeSettings{RerankerTopN: aggregates.Set(ptr(6))}),
			wantErr: &derrors.FieldError{Field: "reranker_top_n"},
		},
		{
			name:    "lowering top_k under reranker_top_n is invalid at top_k",
			given:   []events.Event{docUploaded},
			when:    update(aggregates.UpdateKnowledgeSettings{TopK: aggregates.Set(ptr(2))}),
			wantErr: &derrors.FieldError{Field: "top_k"},
		},
		{
			name:    "another user's document is not found",
			given:   []events.Event{docUploaded},
			when:    update(aggregates.UpdateKnowledgeSettings{CallerID: 8, TopK: aggregates.Set(ptr(6))}),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:  "the owner requests a reindex",
			given: []events.Event{docUploaded},
			when:  reindex(7, 12),
			then:  []events.Event{events.KnowledgeReindexRequested{KnowledgeID: 4, JobID: 12}},
		},
		{
			name: "a job a worker finished before its request was recorded is not requested again",
			given: []events.Event{docUploaded,
				events.KnowledgeReindexFinished{KnowledgeID: 4, JobID: 12, Status: "completed", ChunksTotal: 3}},
			when: reindex(7, 12),
		},
		{
			name:    "another user cannot reindex",
			given:   []events.Event{docUploaded},
			when:    reindex(8, 12),
			wantErr: derrors.ErrNotFound,
		},
		{
			name:  "a job finishes",
			given: []events.Event{docUploaded, events.KnowledgeReindexRequested{KnowledgeID: 4, JobID: 12}},
			when:  finish(aggregates.FinishReindex{KnowledgeID: 4, JobID: 12, ChunksTotal: 3}),
			then:  []events.Event{events.KnowledgeReindexFinished{KnowledgeID: 4, JobID: 12, Status: "completed", ChunksTotal: 3}},
		},
		{
			name:  "a job fails",
			given: []events.Event{docUploaded, events.KnowledgeReindexRequested{KnowledgeID: 4, JobID: 12}},
			when:  finish(aggregates.FinishReindex{KnowledgeID: 4, JobID: 12, Error: ptr("embedder down")}),
			then: []events.Event{events.KnowledgeReindexFinished{KnowledgeID: 4, JobID: 12, Status: "failed",
				Error: ptr("embedder down")}},
		},
		{
			name:    "a job never requested does not finish",
			given:   []events.Event{docUploaded},
			when:    finish(aggregates.FinishReindex{KnowledgeID: 4, JobID: 12, ChunksTotal: 3}),
			wantErr: aggregates.ErrJobNotRequested,
		},
		{
			name: "a job finishes once (a resumed job records nothing)",
			given: []events.Event{docUploaded, events.KnowledgeReindexRequested{KnowledgeID: 4, JobID: 12},
				events.KnowledgeReindexFinished{KnowledgeID: 4, JobID: 12, Status: "completed", ChunksTotal: 3}},
			when: finish(aggregates.FinishReindex{KnowledgeID: 4, JobID: 12, ChunksTotal: 3}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.when(given(aggregates.EvolveKnowledgeDocument, tc.given...))
			checkErr(t, err, tc.wantErr)
			var want, field *derrors.FieldError
			if errors.As(tc.wantErr, &want) && errors.As(err, &field) {
				if diff := cmp.Diff(want.Field, field.Field); diff != "" {
					t.Errorf("error field (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tc.then, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvolveKnowledgeDocument(t *testing.T) {
	d := given(aggregates.EvolveKnowledgeDocument, docUploaded,
		events.KnowledgeSettingsChanged{KnowledgeID: 4, Settings: events.KnowledgeSearchSettings{TopK: 9, MinScore: "0.5",
			ScoreType: "cosine_similarity", RerankerTopN: 3}, Changed: []string{"top_k", "min_score"}},
		events.KnowledgeReindexRequested{KnowledgeID: 4, JobID: 1})
	if d.Settings.TopK != 9 || d.Settings.MinScore != "0.5" || d.Version != 3 {
		t.Errorf("settings %+v version %d", d.Settings, d.Version)
	}
	if !d.Settings.CreatedAt.Equal(t0) || !d.Settings.UpdatedAt.Equal(t0.Add(time.Minute)) || !d.UpdatedAt.Equal(t0) {
		t.Errorf("timestamps: settings %s..%s, document updated %s", d.Settings.CreatedAt, d.Settings.UpdatedAt, d.UpdatedAt)
	}
	if d.Jobs[1] != aggregates.JobQueued {
		t.Errorf("job 1 is %q", d.Jobs[1])
	}
}

func TestCheckKnowledgeIDs(t *testing.T) {
	err := aggregates.CheckKnowledgeIDs([]int64{1, 2, 1}, map[int64]bool{1: true})
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var f *derrors.FieldError
		if errors.As(e, &f) {
			fields = append(fields, f.Field)
		}
	}
	if diff := cmp.Diff([]string{"knowledge_ids.1", "knowledge_ids.2"}, fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if err := aggregates.CheckKnowledgeIDs([]int64{1}, map[int64]bool{1: true}); err != nil {
		t.Error(err)
	}
}

// A document's history may hold thousands of reindex jobs, and every
// command on it folds them all: one more job costs the same whatever came
// before (a copy of the jobs at each event made a load of 8 000 jobs take
// seconds and gigabytes).
func TestEvolvingAJobCostsTheSameAfterThousands(t *testing.T) {
	d := given(aggregates.EvolveKnowledgeDocument, docUploaded)
	for j := int64(1); j <= 10_000; j++ {
		d = aggregates.EvolveKnowledgeDocument(d, events.Envelope{Meta: events.Meta{Version: d.Version + 1},
			Event: events.KnowledgeReindexFinished{KnowledgeID: 4, JobID: j, Status: aggregates.JobCompleted}})
	}
	next := int64(10_001)
	allocs := testing.AllocsPerRun(100, func() {
		d = aggregates.EvolveKnowledgeDocument(d, events.Envelope{Meta: events.Meta{Version: d.Version + 1},
			Event: events.KnowledgeReindexRequested{KnowledgeID: 4, JobID: next}})
		next++
	})
	if allocs > 2 {
		t.Errorf("one more job after 10 000 allocates %.0f times; want at most 2 (no copy of the jobs)", allocs)
	}
	if len(d.Jobs) != 10_101 || d.Jobs[10_000] != aggregates.JobCompleted || d.Jobs[10_050] != aggregates.JobQueued {
		t.Errorf("%d jobs, job 10 000 %q, job 10 050 %q", len(d.Jobs), d.Jobs[10_000], d.Jobs[10_050])
	}
}
