package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	gojson "github.com/goccy/go-json"

	"lectern/eventstore"
)

// The export of a store that scans its log (eventstore.LogScanner: the
// PostgreSQL store, and the personal store over it) streams each page's rows
// straight from the query to the writer: nothing is held per event, and a
// line of Export is written by hand rather than through encoding/json's
// reflection, byte for byte what encoding/json writes (history_test checks
// the two against each other).

// scanChunk is how many events one query of a scanning export reads (they
// stream through; none is held).
const scanChunk = 10_000

// rawLine writes one line of an export for e, whose data and metadata are
// as stored() makes them, to out.
type rawLine func(out *bufio.Writer, e *eventstore.RawEvent, data []byte, meta *eventstore.Metadata) error

// scanExport exports what q selects from sc (q.Stream empty, q.HasEnd) to
// out; eventstore.ErrScanUnsupported, before anything is written, when sc
// cannot scan.
func scanExport(ctx context.Context, sc eventstore.LogScanner, out *bufio.Writer, q Query, line rawLine) (n int, err error) {
	after := q.After
	var meta eventstore.Metadata
	write := func(e *eventstore.RawEvent) error {
		after = e.Position
		if !q.matchesRaw(e) {
			return nil
		}
		meta = eventstore.Metadata{}
		if err := gojson.Unmarshal(e.Metadata, &meta); err != nil { // as the store's reads decode it
			return fmt.Errorf("export event %s: metadata: %w", e.ID, err)
		}
		data := e.Data
		if len(bytes.TrimSpace(data)) == 0 {
			data = json.RawMessage(`null`)
		}
		if typ := secretFields[string(e.Type)]; len(typ) > 0 && mayHoldSecrets(typ, data) {
			if data, err = redact(string(e.Type), data); err != nil {
				return fmt.Errorf("export event %s: %w", e.ID, err)
			}
		}
		if err := line(out, e, data, &meta); err != nil {
			return fmt.Errorf("export event %s: %w", e.ID, err)
		}
		n++
		return nil
	}
	for {
		k, err := sc.ScanAll(ctx, after, q.End, scanChunk, write)
		if err != nil {
			return n, fmt.Errorf("export after %s: %w", after, err)
		}
		if err := out.Flush(); err != nil {
			return n, err
		}
		if k < scanChunk {
			return n, nil
		}
	}
}

// matchesRaw is matches for a scanned event.
func (f Filter) matchesRaw(e *eventstore.RawEvent) bool {
	return (f.Category == "" || len(e.StreamID) > len(f.Category) && e.StreamID[len(f.Category)] == '-' &&
		string(e.StreamID[:len(f.Category)]) == f.Category) &&
		(f.Type == "" || string(e.Type) == f.Type) &&
		(f.Stream == "" || string(e.StreamID) == f.Stream) &&
		(f.Since.IsZero() || !e.RecordedAt.Before(f.Since)) &&
		(f.Until.IsZero() || e.RecordedAt.Before(f.Until))
}

// mayHoldSecrets reports whether redact could change data other than by
// dropping whitespace: when it names none of secrets, and holds no
// character whose encoding redact's re-encoded member names could change
// (an escape, <, >, & or a non-ASCII byte), redact gives data back.
func mayHoldSecrets(secrets []string, data []byte) bool {
	for _, s := range secrets {
		if bytes.Contains(data, []byte(`"`+s+`"`)) {
			return true
		}
	}
	for _, c := range data {
		if c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			return true
		}
	}
	return false
}

// writeLine is Export's line: a Line as encoding/json encodes it (HTML
// left unescaped), with its newline.
func writeLine(out *bufio.Writer, e *eventstore.RawEvent, data []byte, meta *eventstore.Metadata) error {
	b := out.AvailableBuffer()
	b = append(b, `{"position":"`...)
	b = e.Position.AppendText(b)
	b = append(b, `","stream":`...)
	b = appendString(b, e.StreamID, false)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, e.Version, 10)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type, false)
	b = append(b, `,"schema_version":`...)
	b = strconv.AppendInt(b, int64(e.SchemaVersion), 10)
	b = append(b, `,"data":`...)
	b = appendCompact(b, data)
	b = append(b, `,"metadata":`...)
	b = appendMetadata(b, meta)
	b = append(b, `,"recorded_at":"`...)
	b = e.RecordedAt.UTC().AppendFormat(b, timeFormat)
	b = append(b, `","event_id":"`...)
	b = appendUUID(b, e.ID)
	b = append(b, "\"}\n"...)
	_, err := out.Write(b)
	return err
}

// writeCloudEvent is ExportCloudEvents' line, through the Event the paged
// export makes.
func writeCloudEvent(out *bufio.Writer, e *eventstore.RawEvent, data []byte, meta *eventstore.Metadata) error {
	m, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	ce, err := cloudEvent(Event{Position: e.Position, EventID: e.ID.String(), Stream: string(e.StreamID), Version: e.Version,
		Type: string(e.Type), SchemaVersion: e.SchemaVersion, Data: data, Metadata: m, RecordedAt: e.RecordedAt.UTC()})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(ce)
}

// appendMetadata appends m as json.Marshal encodes it: every field of
// eventstore.Metadata, in its order (TestScannedMetadataIsMarshals fills
// each field, so one added there and not here fails it).
func appendMetadata(b []byte, m *eventstore.Metadata) []byte {
	b = append(b, '{')
	sep := false
	str := func(b []byte, name, v string) []byte {
		if v == "" {
			return b
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, name...)
		return appendString(b, []byte(v), true)
	}
	b = str(b, `"correlation_id":`, m.CorrelationID)
	b = str(b, `"causation_id":`, m.CausationID)
	if m.UserID != 0 {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, `"user_id":`...)
		b = strconv.AppendInt(b, m.UserID, 10)
	}
	b = str(b, `"request_id":`, m.RequestID)
	b = str(b, `"actor":`, m.Actor)
	b = str(b, `"traceparent":`, m.TraceParent)
	b = str(b, `"tracestate":`, m.TraceState)
	return append(b, '}')
}

// appendString appends s as encoding/json encodes a string, escaping HTML
// (<, >, &) when html.
func appendString(b, s []byte, html bool) []byte {
	for _, c := range s {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || html && (c == '<' || c == '>' || c == '&') {
			return appendStringSlow(b, s, html)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendStringSlow(b, s []byte, html bool) []byte {
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(string(s)) // a string always encodes
	return append(b, strings.TrimSuffix(buf.String(), "\n")...)
}

// appendCompact appends data, valid JSON, without the whitespace between its
// tokens: what encoding/json writes of a json.RawMessage (HTML left
// unescaped).
func appendCompact(b, data []byte) []byte {
	start := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"': // to the closing quote: one not escaped
			for {
				k := bytes.IndexByte(data[i+1:], '"')
				if k < 0 {
					i = len(data)
					break
				}
				i += 1 + k
				escaped := false
				for j := i - 1; data[j] == '\\'; j-- {
					escaped = !escaped
				}
				if !escaped {
					break
				}
			}
		case ' ', '\t', '\n', '\r':
			b = append(b, data[start:i]...)
			start = i + 1
		}
	}
	return append(b, data[start:]...)
}

// appendUUID appends id as uuid.UUID's String.
func appendUUID(b []byte, id [16]byte) []byte {
	var s [36]byte
	hex.Encode(s[0:8], id[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], id[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], id[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], id[8:10])
	s[23] = '-'
	hex.Encode(s[24:], id[10:])
	return append(b, s[:]...)
}
