package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"lectern/queries"
)

// The session list is the hottest read: its page is encoded by hand, into a
// reused buffer, to the very bytes encoding/json writes for
// listJSON[practiceSessionJSON] (session_list_test.go holds the two to the
// same output). Reflection, the per-item conversion and its timestamp
// strings were about a fifth of the request's CPU time.

var listBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// writeSessionList renders a page of sessions as writeList(w, list,
// sessionFromRow) does.
func writeSessionList(w http.ResponseWriter, list queries.List[queries.PracticeSession]) {
	bp := listBuffers.Get().(*[]byte)
	body := appendSessionList((*bp)[:0], list)
	writeBody(w, http.StatusOK, body)
	if cap(body) <= 1<<20 { // do not keep a rare huge page's buffer
		*bp = body[:0]
		listBuffers.Put(bp)
	}
}

func appendSessionList(b []byte, list queries.List[queries.PracticeSession]) []byte {
	b = append(b, `{"items":[`...)
	for i, s := range list.Items {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSession(b, s)
	}
	b = append(b, `],"total":`...)
	b = strconv.AppendInt(b, int64(list.Total), 10)
	b = append(b, `,"page":`...)
	b = strconv.AppendInt(b, int64(list.Page.Page), 10)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, int64(list.Page.Size), 10)
	return append(b, '}')
}

// appendSession is sessionFromRow(s) as JSON (no settings, no responses).
func appendSession(b []byte, s queries.PracticeSession) []byte {
	b = append(b, `{"session_id":`...)
	b = strconv.AppendInt(b, s.ID, 10)
	b = append(b, `,"user_id":`...)
	b = strconv.AppendInt(b, s.UserID, 10)
	b = append(b, `,"created_at":"`...)
	b = s.CreatedAt.UTC().AppendFormat(b, timeFormat)
	b = append(b, `","updated_at":"`...)
	b = s.UpdatedAt.UTC().AppendFormat(b, timeFormat)
	b = append(b, `","class_id":`...)
	b = appendIntPtr(b, s.ClassID)
	b = append(b, `,"project_id":`...)
	b = appendIntPtr(b, s.ProjectID)
	b = append(b, `,"knowledge_ids":`...)
	if s.KnowledgeIDs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, id := range s.KnowledgeIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
		}
		b = append(b, ']')
	}
	b = append(b, `,"agent_id":`...)
	b = appendIntPtr(b, s.AgentID)
	b = append(b, `,"title":`...)
	b = appendStringPtr(b, s.Title)
	b = append(b, `,"notes":`...)
	b = appendStringPtr(b, s.Notes)
	return append(b, '}')
}

func appendIntPtr(b []byte, v *int64) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *v, 10)
}

func appendStringPtr(b []byte, v *string) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *v)
}

// appendJSONString quotes s as encoding/json does. Printable ASCII that
// encoding/json leaves alone is copied; anything else (control characters,
// quotes, backslashes, the HTML-escaped <, > and &, non-ASCII text with its
// U+2028, U+2029 and invalid-UTF-8 rules) is left to encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, err := json.Marshal(s)
			if err != nil { // a string always encodes
				panic(err)
			}
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
