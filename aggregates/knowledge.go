package aggregates

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"lectern/derrors"
	"lectern/events"
)

// Knowledge search defaults (DESIGN §6).
const (
	DefaultTopK         = 5
	DefaultMinScore     = "0.0"
	ScoreTypeCosine     = "cosine_similarity"
	DefaultRerankerTopN = 3
	// MaxTopK bounds top_k (and so reranker_top_n): each passage goes into
	// a turn's system message, and a hundred chunks (80 000 characters) is
	// already more than a prompt should carry; the read model's columns are
	// INT besides.
	MaxTopK = 100
)

// Reindex job statuses.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobCompleted = "completed"
	JobFailed    = "failed"
)

// DefaultKnowledgeSettings are a new document's search settings.
func DefaultKnowledgeSettings() events.KnowledgeSearchSettings {
	return events.KnowledgeSearchSettings{TopK: DefaultTopK, MinScore: DefaultMinScore, ScoreType: ScoreTypeCosine,
		RerankerTopN: DefaultRerankerTopN}
}

// KnowledgeDocument is a user's uploaded document with its search settings.
// Its search settings live in its stream: they have the same owner and life.
type KnowledgeDocument struct {
	ID          int64
	OwnerID     int64
	Title       string
	ContentType string
	Size        int64
	// ContentHash and ContentSize address the document's text, a blob of
	// its owner's; Content holds the text of a document recorded before
	// blobs (schema version 1 of its upload), and is empty otherwise.
	ContentHash string
	ContentSize int64
	Content     string
	Settings    KnowledgeSettings
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Version     int64
	// Jobs are the statuses of the document's reindex jobs, by id.
	Jobs map[int64]string
}

// KnowledgeSettings are a document's search settings and when they were set.
type KnowledgeSettings struct {
	events.KnowledgeSearchSettings
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Exists reports whether the document was uploaded.
func (d KnowledgeDocument) Exists() bool { return d.Version > 0 }

// EvolveKnowledgeDocument applies one event.
func EvolveKnowledgeDocument(d KnowledgeDocument, env events.Envelope) KnowledgeDocument {
	switch e := env.Event.(type) {
	case events.KnowledgeDocumentUploaded:
		d = KnowledgeDocument{ID: e.KnowledgeID, OwnerID: e.UserID, Title: e.Title, ContentType: e.ContentType,
			Size: e.Size, ContentHash: e.ContentHash, ContentSize: e.ContentSize, Content: e.Content, CreatedAt: env.RecordedAt, UpdatedAt: env.RecordedAt,
			Settings: KnowledgeSettings{KnowledgeSearchSettings: e.Settings, CreatedAt: env.RecordedAt, UpdatedAt: env.RecordedAt}}
	case events.KnowledgeSettingsChanged:
		d.Settings.KnowledgeSearchSettings = e.Settings
		d.Settings.UpdatedAt = env.RecordedAt
	case events.KnowledgeReindexRequested:
		d.Jobs = withJob(d.Jobs, e.JobID, JobQueued)
	case events.KnowledgeReindexFinished:
		d.Jobs = withJob(d.Jobs, e.JobID, e.Status)
	}
	d.Version = env.Version
	return d
}

// withJob sets a job's status in jobs itself, which the evolved state
// shares with the one it came from: a document's history may hold
// thousands of jobs, and a copy of the map at each of their events made
// every load of the document quadratic in them (seconds, and gigabytes,
// at 8 000). States are folded forwards and the earlier one dropped; a
// caller that keeps one while it evolves it further must clone its Jobs.
func withJob(jobs map[int64]string, id int64, status string) map[int64]string {
	if jobs == nil {
		jobs = make(map[int64]string)
	}
	jobs[id] = status
	return jobs
}

var errKnowledgeNotFound = derrors.New(derrors.ErrNotFound, "Knowledge document not found")

// UploadKnowledgeDocument is the command to add a document to a user's
// knowledge.
type UploadKnowledgeDocument struct {
	KnowledgeID int64
	OwnerID     int64
	Title       string
	ContentType string
	Size        int64
	Content     string
	// ContentHash and ContentSize are the address of Content, stored as a
	// blob before the decision (the event carries the address, not the text).
	ContentHash string
	ContentSize int64
}

// DecideUploadKnowledgeDocument records the upload with the default search
// settings; the title and the text must not be blank.
func DecideUploadKnowledgeDocument(d KnowledgeDocument, c UploadKnowledgeDocument) ([]events.Event, error) {
	if d.Exists() {
		return nil, derrors.New(derrors.ErrConflict, "Knowledge document already exists")
	}
	if strings.TrimSpace(c.Title) == "" {
		return nil, derrors.InvalidField("title", c.Title, "title must not be blank")
	}
	if err := checkNoNUL("title", &c.Title); err != nil {
		return nil, err
	}
	if strings.TrimSpace(c.Content) == "" {
		return nil, derrors.InvalidField("content", c.Content, "content must not be blank")
	}
	if err := checkNoNUL("content", &c.Content); err != nil {
		return nil, err
	}
	return []events.Event{events.KnowledgeDocumentUploaded{KnowledgeID: c.KnowledgeID, UserID: c.OwnerID, Title: c.Title,
		ContentType: c.ContentType, Size: c.Size, ContentHash: c.ContentHash, ContentSize: c.ContentSize,
		Settings: DefaultKnowledgeSettings()}}, nil
}

// UpdateKnowledgeSettings is a merge update of a document's search settings
// by its owner; a field set to nil is reset to its default.
type UpdateKnowledgeSettings struct {
	KnowledgeID     int64
	CallerID        int64
	TopK            Patch[*int]
	MinScore        Patch[*string] // a canonical decimal in [0, 1]
	ScoreType       Patch[*string]
	RerankerEnabled Patch[*bool]
	RerankerModel   Patch[*string]
	RerankerTopN    Patch[*int]
}

// DecideUpdateKnowledgeSettings merges the given fields into the settings;
// reranker_top_n must not exceed top_k afterwards. An update that changes
// nothing records nothing.
func DecideUpdateKnowledgeSettings(d KnowledgeDocument, c UpdateKnowledgeSettings) ([]events.Event, error) {
	if !d.Exists() || d.OwnerID != c.CallerID {
		return nil, errKnowledgeNotFound
	}
	def := DefaultKnowledgeSettings()
	cur := d.Settings.KnowledgeSearchSettings
	next := cur
	var changed []string
	if c.TopK.Set {
		next.TopK = valueOr(c.TopK.Value, def.TopK)
		if next.TopK < 1 || next.TopK > MaxTopK {
			return nil, derrors.InvalidField("top_k", next.TopK, fmt.Sprintf("top_k must be between 1 and %d", MaxTopK))
		}
	}
	if c.MinScore.Set {
		next.MinScore = valueOr(c.MinScore.Value, def.MinScore)
		v, ok := new(big.Rat).SetString(next.MinScore)
		if !ok || v.Sign() < 0 || v.Cmp(big.NewRat(1, 1)) > 0 {
			return nil, derrors.InvalidField("min_score", next.MinScore, "min_score must be between 0 and 1")
		}
	}
	if c.ScoreType.Set {
		next.ScoreType = valueOr(c.ScoreType.Value, def.ScoreType)
		if next.ScoreType != ScoreTypeCosine {
			return nil, derrors.InvalidField("score_type", next.ScoreType, "score_type must be cosine_similarity")
		}
	}
	if c.RerankerEnabled.Set {
		next.RerankerEnabled = valueOr(c.RerankerEnabled.Value, def.RerankerEnabled)
	}
	if c.RerankerModel.Set {
		next.RerankerModel = c.RerankerModel.Value
		if err := checkNoNUL("reranker_model", next.RerankerModel); err != nil {
			return nil, err
		}
	}
	if c.RerankerTopN.Set {
		next.RerankerTopN = valueOr(c.RerankerTopN.Value, def.RerankerTopN)
		if next.RerankerTopN < 1 || next.RerankerTopN > MaxTopK {
			return nil, derrors.InvalidField("reranker_top_n", next.RerankerTopN, fmt.Sprintf("reranker_top_n must be between 1 and %d", MaxTopK))
		}
	}
	if next.RerankerTopN > next.TopK {
		field := "reranker_top_n"
		if !c.RerankerTopN.Set {
			field = "top_k"
		}
		return nil, derrors.InvalidField(field, map[string]int{"top_k": next.TopK, "reranker_top_n": next.RerankerTopN},
			fmt.Sprintf("reranker_top_n (%d) must be less than or equal to top_k (%d)", next.RerankerTopN, next.TopK))
	}
	if next.TopK != cur.TopK {
		changed = append(changed, "top_k")
	}
	if !sameDecimal(next.MinScore, cur.MinScore) {
		changed = append(changed, "min_score")
	} else {
		next.MinScore = cur.MinScore // "0" and "0.0" are one value: keep the stored text
	}
	if next.ScoreType != cur.ScoreType {
		changed = append(changed, "score_type")
	}
	if next.RerankerEnabled != cur.RerankerEnabled {
		changed = append(changed, "reranker_enabled")
	}
	if !equalPtr(next.RerankerModel, cur.RerankerModel) {
		changed = append(changed, "reranker_model")
	}
	if next.RerankerTopN != cur.RerankerTopN {
		changed = append(changed, "reranker_top_n")
	}
	if len(changed) == 0 {
		return nil, nil
	}
	return []events.Event{events.KnowledgeSettingsChanged{KnowledgeID: d.ID, Settings: next, Changed: changed}}, nil
}

func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func sameDecimal(a, b string) bool {
	x, okX := new(big.Rat).SetString(a)
	y, okY := new(big.Rat).SetString(b)
	if !okX || !okY {
		return a == b
	}
	return x.Cmp(y) == 0
}

// RequestReindex is the command to rebuild a document's chunks and vectors.
type RequestReindex struct {
	KnowledgeID int64
	CallerID    int64
	JobID       int64
}

// DecideRequestReindex records the request of the owner's job. The job's
// row is queued before its request is appended (commands.RequestReindex), so
// a worker may run it and record its end first: a job the stream knows
// already is requested, and nothing more is recorded.
func DecideRequestReindex(d KnowledgeDocument, c RequestReindex) ([]events.Event, error) {
	if !d.Exists() || d.OwnerID != c.CallerID {
		return nil, errKnowledgeNotFound
	}
	if _, ok := d.Jobs[c.JobID]; ok {
		return nil, nil
	}
	return []events.Event{events.KnowledgeReindexRequested{KnowledgeID: d.ID, JobID: c.JobID}}, nil
}

// FinishReindex is the command that closes a reindex job.
type FinishReindex struct {
	KnowledgeID int64
	JobID       int64
	ChunksTotal int
	Error       *string // nil: completed
}

// ErrJobNotRequested is the end of a reindex job whose request the
// document's history does not hold.
var ErrJobNotRequested = errors.New("the reindex job was never requested")

// DecideFinishReindex records the job's end once; a job finished already
// (a worker that resumed it after a restart) records nothing, and one never
// requested is refused (its worker checks first).
func DecideFinishReindex(d KnowledgeDocument, c FinishReindex) ([]events.Event, error) {
	if !d.Exists() {
		return nil, errKnowledgeNotFound
	}
	switch status, requested := d.Jobs[c.JobID]; {
	case !requested:
		return nil, fmt.Errorf("%w: job %d of document %d", ErrJobNotRequested, c.JobID, d.ID)
	case status == JobCompleted, status == JobFailed:
		return nil, nil
	}
	status := JobCompleted
	if c.Error != nil {
		status = JobFailed
	}
	return []events.Event{events.KnowledgeReindexFinished{KnowledgeID: d.ID, JobID: c.JobID, Status: status,
		ChunksTotal: c.ChunksTotal, Error: c.Error}}, nil
}

// CheckKnowledgeIDs reports, at its index of knowledge_ids, each id that is
// not one of the caller's documents (owned) or repeats an earlier one.
func CheckKnowledgeIDs(ids []int64, owned map[int64]bool) error {
	var errs []error
	seen := map[int64]bool{}
	for i, id := range ids {
		field := derrors.Item("knowledge_ids", i)
		switch {
		case !owned[id]:
			errs = append(errs, derrors.InvalidField(field, id, fmt.Sprintf("knowledge document %d is not one of yours", id)))
		case seen[id]:
			errs = append(errs, derrors.InvalidField(field, id, fmt.Sprintf("knowledge document %d is listed more than once", id)))
		}
		seen[id] = true
	}
	return errors.Join(errs...)
}
