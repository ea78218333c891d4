package api

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"lectern/aggregates"
	"lectern/api/validation"
	"lectern/derrors"
	"lectern/knowledge"
	"lectern/projections"
	"lectern/queries"
)

var (
	knowledgePath       = []validation.Field{idParam("knowledge_id")}
	reindexJobPath      = []validation.Field{idParam("knowledge_id"), idParam("job_id")}
	knowledgeReadModels = []string{projections.KnowledgeProjection}

	// The JSON form of an upload; a multipart/form-data upload sends a file
	// instead (see createDocument).
	createDocumentBody = validation.Schema{Fields: []validation.Field{
		reqString("title", maxName),
		{Name: "content", Kind: validation.String, Required: true, MaxLength: MaxBodyBytes,
			Description: "the document's text (the 1 MiB body limit applies)"},
	}}
	// Seed 2.11, 4.7: every field optional; null resets a field to its default.
	updateKnowledgeSettingsBody = validation.Schema{Fields: []validation.Field{
		{Name: "top_k", Kind: validation.Int, Nullable: true, Ge: bound(1), Le: bound(aggregates.MaxTopK), Description: "null resets it to 5"},
		{Name: "min_score", Kind: validation.Decimal, Nullable: true, Ge: bound(0), Le: bound(1), Description: "null resets it to 0.0"},
		{Name: "score_type", Kind: validation.Literal, Nullable: true, Enum: []string{aggregates.ScoreTypeCosine},
			Description: "null resets it to cosine_similarity"},
		{Name: "reranker_enabled", Kind: validation.Bool, Nullable: true, Description: "null resets it to false"},
		{Name: "reranker_model", Kind: validation.String, Nullable: true, MaxLength: maxName,
			Description: "informational: the built-in lexical reranker is used"},
		{Name: "reranker_top_n", Kind: validation.Int, Nullable: true, Ge: bound(1), Le: bound(aggregates.MaxTopK),
			Description: "at most top_k; null resets it to 3"},
	}}
	searchBody = validation.Schema{Fields: []validation.Field{
		{Name: "query", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxText},
	}}
)

// knowledgeOperations are the knowledge documents (seed 2.11, 4.7, 4.8; DESIGN §6, §7).
func (s *Server) knowledgeOperations() []operation {
	return []operation{
		{method: http.MethodPost, path: "/user/document", id: "upload_document", tag: "knowledge", auth: true, idempotent: true,
			summary: "Upload a knowledge document: JSON {title, content}, or multipart/form-data with a file (text, Markdown, PDF)",
			ownBody: &createDocumentBody, status: 201, response: "KnowledgeDocument", errors: []int{401, 429},
			location: &locatedBy{get: "get_document", id: "knowledge_id"}, handle: s.createDocument},
		{method: http.MethodGet, path: "/user/document", id: "list_documents", tag: "knowledge", auth: true,
			summary: "List my knowledge documents, oldest first", query: pageQuery, status: 200,
			response: "KnowledgeDocumentList", errors: []int{401}, handle: s.listDocuments},
		{method: http.MethodGet, path: "/user/document/{knowledge_id}", id: "get_document", tag: "knowledge", auth: true,
			summary: "Read one of my knowledge documents", pathParams: knowledgePath, status: 200,
			response: "KnowledgeDocument", errors: []int{401, 404}, handle: s.getDocument},
		{method: http.MethodGet, path: "/user/document/{knowledge_id}/settings/search", id: "get_knowledge_search_settings",
			tag: "knowledge", auth: true, summary: "Read a document's search settings", pathParams: knowledgePath, status: 200,
			response: "KnowledgeSearchSettings", errors: []int{401, 404}, handle: s.getKnowledgeSettings},
		{method: http.MethodPatch, path: "/user/document/{knowledge_id}/settings/search", id: "update_knowledge_search_settings",
			tag: "knowledge", auth: true, summary: "Tune a document's search settings (merge; null resets a field to its default)",
			pathParams: knowledgePath, body: &updateKnowledgeSettingsBody, status: 200, response: "KnowledgeSearchSettings",
			errors: []int{401, 404, 409}, handle: s.updateKnowledgeSettings},
		{method: http.MethodPost, path: "/user/document/{knowledge_id}/search", id: "search_document", tag: "knowledge", auth: true, unmetered: true,
			summary: "Search a document with its search settings", pathParams: knowledgePath, body: &searchBody, status: 200,
			response: "KnowledgeSearchResult", errors: []int{401, 404, 502}, handle: s.searchDocument},
		{method: http.MethodPost, path: "/user/document/{knowledge_id}/reindex", id: "reindex_document", tag: "knowledge", auth: true,
			summary: "Rebuild a document's chunks and vectors in the background", pathParams: knowledgePath, status: 202,
			response: "ReindexJob", errors: []int{401, 404, 409}, handle: s.reindexDocument},
		{method: http.MethodGet, path: "/user/document/{knowledge_id}/reindex/{job_id}", id: "get_reindex_job", tag: "knowledge",
			auth: true, summary: "Read a reindex job", pathParams: reindexJobPath, status: 200, response: "ReindexJob",
			errors: []int{401, 404}, handle: s.getReindexJob},
	}
}

// knowledgeComponents are their response schemas.
func knowledgeComponents() schema {
	return schema{
		"KnowledgeDocument": object(schema{
			"knowledge_id": integer(), "user_id": integer(), "title": str(), "content_type": str(), "size": integer(),
			"chunks": integer(), "created_at": dateTime(), "updated_at": dateTime(),
		}, "knowledge_id", "user_id", "title", "content_type", "size", "chunks", "created_at", "updated_at"),
		"KnowledgeDocumentList": listOf("KnowledgeDocument"),
		"KnowledgeSearchSettings": object(schema{
			"knowledge_id": integer(), "top_k": integer(),
			// Seed 2.11: a decimal string in a response; the request takes a
			// number or such a string (updateKnowledgeSettingsBody), so a
			// client can send back the value it read.
			"min_score":  validation.DecimalString(),
			"score_type": str(), "reranker_enabled": boolean(), "reranker_model": nullable(str()), "reranker_top_n": integer(),
			"created_at": dateTime(), "updated_at": dateTime(),
		}, "knowledge_id", "top_k", "min_score", "score_type", "reranker_enabled", "reranker_top_n", "created_at", "updated_at"),
		"KnowledgeSearchResult": object(schema{
			"query": str(),
			"results": arrayOf(object(schema{"chunk_id": integer(), "text": str(), "score": schema{"type": "number"}, "rank": integer()},
				"chunk_id", "text", "score", "rank")),
		}, "query", "results"),
		"ReindexJob": object(schema{
			"job_id": integer(), "knowledge_id": integer(), "status": schema{"type": "string", "enum": []string{
				aggregates.JobQueued, aggregates.JobRunning, aggregates.JobCompleted, aggregates.JobFailed}},
			"requested_at": dateTime(), "started_at": nullable(dateTime()), "finished_at": nullable(dateTime()),
			"chunks_total": integer(), "chunks_done": integer(), "error": nullable(str()),
		}, "job_id", "knowledge_id", "status", "requested_at", "started_at", "finished_at", "chunks_total", "chunks_done", "error"),
	}
}

type documentJSON struct {
	KnowledgeID int64  `json:"knowledge_id"`
	UserID      int64  `json:"user_id"`
	Title       string `json:"title"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	Chunks      int    `json:"chunks"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
}

func documentFromRow(d queries.KnowledgeDocument) documentJSON {
	return documentJSON{KnowledgeID: d.ID, UserID: d.UserID, Title: d.Title, ContentType: d.ContentType, Size: d.Size,
		Chunks: d.Chunks, CreatedAt: ts(d.CreatedAt), UpdatedAt: ts(d.UpdatedAt)}
}

type knowledgeSettingsJSON struct {
	KnowledgeID     int64   `json:"knowledge_id"`
	TopK            int     `json:"top_k"`
	MinScore        string  `json:"min_score"`
	ScoreType       string  `json:"score_type"`
	RerankerEnabled bool    `json:"reranker_enabled"`
	RerankerModel   *string `json:"reranker_model"`
	RerankerTopN    int     `json:"reranker_top_n"`
	CreatedAt       string  `json:"created_at"`
	UpdatedAt       string  `json:"updated_at"`
}

func knowledgeSettingsFromState(d aggregates.KnowledgeDocument) knowledgeSettingsJSON {
	s := d.Settings
	return knowledgeSettingsJSON{KnowledgeID: d.ID, TopK: s.TopK, MinScore: s.MinScore, ScoreType: s.ScoreType,
		RerankerEnabled: s.RerankerEnabled, RerankerModel: s.RerankerModel, RerankerTopN: s.RerankerTopN,
		CreatedAt: ts(s.CreatedAt), UpdatedAt: ts(s.UpdatedAt)}
}

func knowledgeSettingsFromRow(s queries.KnowledgeSettings) knowledgeSettingsJSON {
	return knowledgeSettingsJSON{KnowledgeID: s.KnowledgeID, TopK: s.TopK, MinScore: s.MinScore, ScoreType: s.ScoreType,
		RerankerEnabled: s.RerankerEnabled, RerankerModel: s.RerankerModel, RerankerTopN: s.RerankerTopN,
		CreatedAt: ts(s.CreatedAt), UpdatedAt: ts(s.UpdatedAt)}
}

type reindexJobJSON struct {
	JobID       int64   `json:"job_id"`
	KnowledgeID int64   `json:"knowledge_id"`
	Status      string  `json:"status"`
	RequestedAt string  `json:"requested_at"`
	StartedAt   *string `json:"started_at"`
	FinishedAt  *string `json:"finished_at"`
	ChunksTotal int     `json:"chunks_total"`
	ChunksDone  int     `json:"chunks_done"`
	Error       *string `json:"error"`
}

func reindexJobFromRow(j queries.ReindexJob) reindexJobJSON {
	out := reindexJobJSON{JobID: j.JobID, KnowledgeID: j.KnowledgeID, Status: j.Status, RequestedAt: ts(j.RequestedAt),
		ChunksTotal: j.ChunksTotal, ChunksDone: j.ChunksDone, Error: j.Error}
	if j.StartedAt != nil {
		t := ts(*j.StartedAt)
		out.StartedAt = &t
	}
	if j.FinishedAt != nil {
		t := ts(*j.FinishedAt)
		out.FinishedAt = &t
	}
	return out
}

// Content types of uploaded files.
const (
	typeText     = "text/plain"
	typeMarkdown = "text/markdown"
	typePDF      = "application/pdf"
)

func (s *Server) createDocument(w http.ResponseWriter, r *http.Request, in input) error {
	c := aggregates.UploadKnowledgeDocument{OwnerID: in.user.UserID}
	// Before the upload is read: extracting a PDF may take seconds.
	if err := s.deps.Commands.Knowledge.LimitUpload(r.Context(), in.user.UserID); err != nil {
		return err
	}
	var err error
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		err = readUploadForm(r, in.user.UserID, &c, s.deps.Extract)
	} else {
		err = readUploadJSON(r, &c)
	}
	if err != nil {
		return err
	}
	// Nothing is stored of a document over the limits.
	if err := s.deps.Extract.CheckText(c.Content); err != nil {
		return err
	}
	doc, chunks, res, err := s.deps.Commands.Knowledge.Upload(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, knowledgeReadModels...)
	writeJSON(w, http.StatusCreated, documentJSON{KnowledgeID: doc.ID, UserID: doc.OwnerID, Title: doc.Title,
		ContentType: doc.ContentType, Size: doc.Size, Chunks: chunks, CreatedAt: ts(doc.CreatedAt), UpdatedAt: ts(doc.UpdatedAt)})
	return nil
}

func readUploadJSON(r *http.Request, c *aggregates.UploadKnowledgeDocument) error {
	body, err := readBody(r.Body)
	if err != nil {
		return err
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || string(trimmed) == "null" {
		return validation.Errors{validation.MissingBody()}
	}
	v, errs := validation.DecodeBody(body, createDocumentBody)
	if len(errs) > 0 {
		return errs
	}
	c.Title, _ = v.String("title")
	c.Content, _ = v.String("content")
	c.ContentType, c.Size = typeText, int64(len(c.Content))
	return nil
}

// readUploadForm reads a multipart upload: a file part "file" and an
// optional "title" (default: the file's name).
func readUploadForm(r *http.Request, reader int64, c *aggregates.UploadKnowledgeDocument, limits knowledge.ExtractLimits) error {
	if err := r.ParseMultipartForm(MaxBodyBytes); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return validation.Errors{validation.ValueError([]any{"body"}, nil, "the form cannot be read: "+err.Error())}
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	fileLoc := []any{"body", "file"}
	files := r.MultipartForm.File["file"]
	if len(files) == 0 {
		return validation.Errors{{Type: "missing", Loc: fileLoc, Msg: "Field required", Input: formInput(r)}}
	}
	fh := files[0]
	f, err := fh.Open()
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	contentType := fileType(fh.Header.Get("Content-Type"), fh.Filename)
	switch contentType {
	case typeText, typeMarkdown:
		if !utf8.Valid(data) {
			return validation.Errors{validation.ValueError(fileLoc, fh.Filename, "the file is not UTF-8 text")}
		}
		// A byte order mark, which some editors write, says how the file is
		// encoded; it is no part of the text (a file of a mark alone is blank).
		c.Content = string(bytes.TrimPrefix(data, []byte("\uFEFF")))
	case typePDF:
		text, err := knowledge.PDFTextFor(r.Context(), reader, data, limits)
		if errors.Is(err, knowledge.ErrBusy) {
			return derrors.New(derrors.ErrUnavailable, "Too many documents are being read at once; retry in a moment")
		}
		if errors.Is(err, knowledge.ErrReaderBusy) {
			return &derrors.RateLimitedError{RetryAfter: knowledge.MaxExtractWait,
				Detail: "Your other documents are still being read (one at a time); send this one again once they are done"}
		}
		if errors.Is(err, knowledge.ErrTooLarge) || r.Context().Err() != nil {
			return err // a 413, or the client gone (499)
		}
		if err != nil {
			return validation.Errors{validation.ValueError(fileLoc, fh.Filename, err.Error())}
		}
		c.Content = text
	default:
		return validation.Errors{validation.ValueError(fileLoc, fh.Filename,
			"unsupported file type "+contentType+"; send text/plain, text/markdown or application/pdf")}
	}
	c.ContentType, c.Size = contentType, int64(len(data))
	c.Title = fh.Filename
	if titles := r.MultipartForm.Value["title"]; len(titles) > 0 && strings.TrimSpace(titles[0]) != "" {
		c.Title = strings.TrimSpace(titles[0])
	}
	if !utf8.ValidString(c.Title) { // the form's title or the file's name, which a JSON body could not send
		return validation.Errors{validation.UnicodeError([]any{"body", "title"}, c.Title)}
	}
	if utf8.RuneCountInString(c.Title) > maxName {
		return validation.Errors{{Type: "string_too_long", Loc: []any{"body", "title"},
			Msg: "String should have at most 200 characters", Input: c.Title, Ctx: map[string]any{"max_length": maxName}}}
	}
	return nil
}

// formInput is the form's text fields, the input of a missing file's error.
func formInput(r *http.Request) map[string]any {
	out := map[string]any{}
	for k, v := range r.MultipartForm.Value {
		if len(v) > 0 {
			out[k] = v[0]
		}
	}
	return out
}

// fileType is an uploaded file's content type: the part's own, unless it is
// missing or generic, then the one its name's extension implies.
func fileType(header, name string) string {
	mt, _, _ := mime.ParseMediaType(header)
	switch mt {
	case typeText, typeMarkdown, typePDF:
		return mt
	case "text/x-markdown":
		return typeMarkdown
	case "", "application/octet-stream":
		switch strings.ToLower(filepath.Ext(name)) {
		case ".txt", ".text":
			return typeText
		case ".md", ".markdown":
			return typeMarkdown
		case ".pdf":
			return typePDF
		}
	}
	if mt == "" {
		return "application/octet-stream"
	}
	return mt
}

func (s *Server) listDocuments(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, knowledgeReadModels...); err != nil {
		return err
	}
	list, err := s.deps.Queries.KnowledgeDocuments(r.Context(), in.user.UserID, pageOf(in.query))
	if err != nil {
		return err
	}
	writeList(w, list, documentFromRow)
	return nil
}

func (s *Server) getDocument(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, knowledgeReadModels...); err != nil {
		return err
	}
	id, _ := in.path.Int("knowledge_id")
	d, err := s.deps.Queries.KnowledgeDocument(r.Context(), in.user.UserID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, documentFromRow(d))
	return nil
}

func (s *Server) getKnowledgeSettings(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, knowledgeReadModels...); err != nil {
		return err
	}
	id, _ := in.path.Int("knowledge_id")
	st, err := s.deps.Queries.KnowledgeSettings(r.Context(), in.user.UserID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, knowledgeSettingsFromRow(st))
	return nil
}

// optionalCount is an Int field as a pointer to int; nil for null.
func optionalCount(v validation.Values, name string) *int {
	if n, ok := v.Int(name); ok {
		i := int(n)
		return &i
	}
	return nil
}

func (s *Server) updateKnowledgeSettings(w http.ResponseWriter, r *http.Request, in input) error {
	id, _ := in.path.Int("knowledge_id")
	c := aggregates.UpdateKnowledgeSettings{KnowledgeID: id, CallerID: in.user.UserID}
	if in.body.Has("top_k") {
		c.TopK = aggregates.Set(optionalCount(in.body, "top_k"))
	}
	if in.body.Has("min_score") {
		var v *string
		if d, ok := in.body.Decimal("min_score"); ok {
			v = &d
		}
		c.MinScore = aggregates.Set(v)
	}
	if in.body.Has("score_type") {
		c.ScoreType = aggregates.Set(optionalString(in.body, "score_type"))
	}
	if in.body.Has("reranker_enabled") {
		var v *bool
		if b, ok := in.body.Bool("reranker_enabled"); ok {
			v = &b
		}
		c.RerankerEnabled = aggregates.Set(v)
	}
	if in.body.Has("reranker_model") {
		c.RerankerModel = aggregates.Set(optionalString(in.body, "reranker_model"))
	}
	if in.body.Has("reranker_top_n") {
		c.RerankerTopN = aggregates.Set(optionalCount(in.body, "reranker_top_n"))
	}
	d, res, err := s.deps.Commands.Knowledge.UpdateSettings(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, knowledgeReadModels...)
	writeJSON(w, http.StatusOK, knowledgeSettingsFromState(d))
	return nil
}

type searchResultJSON struct {
	ChunkID int64   `json:"chunk_id"`
	Text    string  `json:"text"`
	Score   float64 `json:"score"`
	Rank    int     `json:"rank"`
}

func (s *Server) searchDocument(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, knowledgeReadModels...); err != nil {
		return err
	}
	id, _ := in.path.Int("knowledge_id")
	query, _ := in.body.String("query")
	hits, err := s.deps.Search.Search(r.Context(), in.user.UserID, id, query)
	if err != nil {
		return err
	}
	out := struct {
		Query   string             `json:"query"`
		Results []searchResultJSON `json:"results"`
	}{Query: query, Results: []searchResultJSON{}}
	for _, h := range hits {
		out.Results = append(out.Results, searchResultJSON{ChunkID: h.ChunkID, Text: h.Text, Score: h.Score, Rank: h.Rank})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) reindexDocument(w http.ResponseWriter, r *http.Request, in input) error {
	id, _ := in.path.Int("knowledge_id")
	job, res, err := s.deps.Commands.Knowledge.RequestReindex(r.Context(), in.user.UserID, id)
	if err != nil {
		return err
	}
	s.settle(w, r, res, knowledgeReadModels...)
	writeJSON(w, http.StatusAccepted, reindexJobFromRow(job))
	return nil
}

func (s *Server) getReindexJob(w http.ResponseWriter, r *http.Request, in input) error {
	id, _ := in.path.Int("knowledge_id")
	jobID, _ := in.path.Int("job_id")
	job, err := s.deps.Queries.ReindexJob(r.Context(), in.user.UserID, id, jobID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, reindexJobFromRow(job))
	return nil
}
