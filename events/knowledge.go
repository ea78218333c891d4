package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Stream category of knowledge documents: a document's stream also holds its
// search settings and its reindex requests.
const CategoryKnowledge = "knowledge"

// registerKnowledge registers the events of knowledge documents.
func registerKnowledge(r *Registry) {
	register[KnowledgeDocumentUploaded](r)
	register[KnowledgeSettingsChanged](r)
	register[KnowledgeReindexRequested](r)
	register[KnowledgeReindexFinished](r)
}

// KnowledgeSearchSettings are a document's search settings, in full.
type KnowledgeSearchSettings struct {
	TopK int `json:"top_k"`
	// MinScore is a decimal in canonical plain form ("0", "0.25").
	MinScore        string  `json:"min_score"`
	ScoreType       string  `json:"score_type"`
	RerankerEnabled bool    `json:"reranker_enabled"`
	RerankerModel   *string `json:"reranker_model"`
	RerankerTopN    int     `json:"reranker_top_n"`
}

// KnowledgeDocumentUploaded: a user uploaded a document. Its text (extracted
// from a PDF) is a blob outside the log, addressed by the owner and
// ContentHash (package blobs), so that its chunks and vectors, which are
// derived data, can be rebuilt; and the default search settings it starts
// with. Size is the size of the upload; ContentSize that of the text.
//
// Schema version 1 held the text itself (content): upcasting keeps it in
// Content and computes its address, and only such events have Content.
type KnowledgeDocumentUploaded struct {
	KnowledgeID int64                   `json:"knowledge_id"`
	UserID      int64                   `json:"user_id"`
	Title       string                  `json:"title"`
	ContentType string                  `json:"content_type"`
	Size        int64                   `json:"size"`
	ContentHash string                  `json:"content_hash"`
	ContentSize int64                   `json:"content_size"`
	Content     string                  `json:"content,omitempty"`
	Settings    KnowledgeSearchSettings `json:"settings"`
}

// addressContent upcasts knowledge.document_uploaded from version 1: the
// inline text gains the blob address it would have.
func addressContent(data json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	var content string
	if raw, ok := m["content"]; ok {
		if err := json.Unmarshal(raw, &content); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256([]byte(content))
	hash, _ := json.Marshal(hex.EncodeToString(sum[:]))
	size, _ := json.Marshal(len(content))
	m["content_hash"], m["content_size"] = hash, size
	return json.Marshal(m)
}

// KnowledgeSettingsChanged: the owner changed a document's search settings.
// It carries the full new settings and which of them changed.
type KnowledgeSettingsChanged struct {
	KnowledgeID int64                   `json:"knowledge_id"`
	Settings    KnowledgeSearchSettings `json:"settings"`
	Changed     []string                `json:"changed"`
}

// KnowledgeReindexRequested: the owner asked for the document's chunks and
// vectors to be built again, as job JobID.
type KnowledgeReindexRequested struct {
	KnowledgeID int64 `json:"knowledge_id"`
	JobID       int64 `json:"job_id"`
}

// KnowledgeReindexFinished: a reindex job ended, completed or failed.
type KnowledgeReindexFinished struct {
	KnowledgeID int64   `json:"knowledge_id"`
	JobID       int64   `json:"job_id"`
	Status      string  `json:"status"`
	ChunksTotal int     `json:"chunks_total"`
	Error       *string `json:"error"`
}

// Passage is a chunk of a knowledge document that a practice turn's prompt
// used, with its similarity to the prompt and its place among the turn's
// passages (1-based).
type Passage struct {
	KnowledgeID int64   `json:"knowledge_id"`
	ChunkID     int64   `json:"chunk_id"`
	Score       float64 `json:"score"`
	Rank        int     `json:"rank"`
}

// EventType implements Event.
func (KnowledgeDocumentUploaded) EventType() string { return "knowledge.document_uploaded" }

// SchemaVersion implements Event.
func (KnowledgeDocumentUploaded) SchemaVersion() int { return 2 }

// EventType implements Event.
func (KnowledgeSettingsChanged) EventType() string { return "knowledge.settings_changed" }

// SchemaVersion implements Event.
func (KnowledgeSettingsChanged) SchemaVersion() int { return 1 }

// EventType implements Event.
func (KnowledgeReindexRequested) EventType() string { return "knowledge.reindex_requested" }

// SchemaVersion implements Event.
func (KnowledgeReindexRequested) SchemaVersion() int { return 1 }

// EventType implements Event.
func (KnowledgeReindexFinished) EventType() string { return "knowledge.reindex_finished" }

// SchemaVersion implements Event.
func (KnowledgeReindexFinished) SchemaVersion() int { return 1 }

var (
	_ Event = KnowledgeDocumentUploaded{}
	_ Event = KnowledgeSettingsChanged{}
	_ Event = KnowledgeReindexRequested{}
	_ Event = KnowledgeReindexFinished{}
)
