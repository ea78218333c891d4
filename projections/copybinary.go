package projections

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// copyBinary is pgx's CopyFrom (COPY ... FROM STDIN BINARY, the columns'
// types read from the table first), its values encoded without pgx's
// per-value plan look-up and reflection where their Go and column types
// are the loaders' common ones (integers, text, JSON text, booleans and
// times, by value or by reference); any other pair goes through pgx's
// encoder, as CopyFrom would encode it. A replay writes a million rows so.
func copyBinary(ctx context.Context, conn *pgx.Conn, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) error {
	quoted := make([]string, len(columns))
	for i, c := range columns {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	cols := strings.Join(quoted, ", ")
	describe := "SELECT " + cols + " FROM " + table.Sanitize()
	sd, err := conn.Prepare(ctx, describe, describe) // kept on the connection, as CopyFrom's

	if err != nil {
		return err
	}
	if len(sd.Fields) != len(columns) {
		return fmt.Errorf("copy into %s: %d columns described, %d given", table.Sanitize(), len(sd.Fields), len(columns))
	}
	oids := make([]uint32, len(sd.Fields))
	for i, f := range sd.Fields {
		oids[i] = f.DataTypeOID
	}
	r := &copyReader{rows: rows, oids: oids, types: conn.TypeMap()}
	r.buf = append(r.buf, "PGCOPY\n\377\r\n\000"...)
	r.buf = binary.BigEndian.AppendUint32(r.buf, 0) // flags
	r.buf = binary.BigEndian.AppendUint32(r.buf, 0) // header extension
	_, err = conn.PgConn().CopyFrom(ctx, r, "COPY "+table.Sanitize()+" ( "+cols+" ) FROM STDIN BINARY")
	if r.err != nil {
		return r.err // what stopped the rows, not the COPY it aborted
	}
	return err
}

// copyReader is the COPY stream of rows, encoded as it is read.
type copyReader struct {
	rows  pgx.CopyFromSource
	oids  []uint32
	types *pgtype.Map
	buf   []byte
	off   int
	done  bool
	err   error
}

// copyChunk is how much copyReader encodes ahead of a read.
const copyChunk = 64 << 10

func (r *copyReader) Read(p []byte) (int, error) {
	if r.off == len(r.buf) && r.done {
		return 0, io.EOF
	}
	if r.off > 0 { // what was read goes: the buffer stays a chunk or so
		r.buf, r.off = append(r.buf[:0], r.buf[r.off:]...), 0
	}
	for !r.done && len(r.buf)-r.off < max(len(p), copyChunk) {
		if !r.rows.Next() {
			if err := r.rows.Err(); err != nil {
				r.err = err
				return 0, err
			}
			r.buf = binary.BigEndian.AppendUint16(r.buf, 0xffff) // the trailer
			r.done = true
			break
		}
		values, err := r.rows.Values()
		if err == nil {
			r.buf, err = r.appendRow(r.buf, values)
		}
		if err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(p, r.buf[r.off:])
	r.off += n
	return n, nil
}

// Column types with an encoding of their own here.
const (
	oidBool        = 16
	oidInt8        = 20
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidVarchar     = 1043
	oidTimestamptz = 1184
	oidJSONB       = 3802
)

// y2kMicros is PostgreSQL's epoch in microseconds since the Unix epoch.
const y2kMicros = 946_684_800_000_000

func (r *copyReader) appendRow(b []byte, values []any) ([]byte, error) {
	if len(values) != len(r.oids) {
		return b, fmt.Errorf("copy: a row of %d values for %d columns", len(values), len(r.oids))
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(values)))
	for i, v := range values {
		var ok bool
		if b, ok = appendValue(b, r.oids[i], v); ok {
			continue
		}
		// pgx's own encoding, as CopyFrom's encodeCopyValue.
		at := len(b)
		b = binary.BigEndian.AppendUint32(b, 0)
		enc, err := r.types.Encode(r.oids[i], pgx.BinaryFormatCode, v, b)
		if err != nil {
			return b, fmt.Errorf("copy: column %d: %w", i, err)
		}
		if enc == nil { // NULL
			b = binary.BigEndian.AppendUint32(b[:at], 0xffffffff)
			continue
		}
		binary.BigEndian.PutUint32(enc[at:], uint32(len(enc)-at-4))
		b = enc
	}
	return b, nil
}

// appendValue appends v as a field of a column of type oid, if it is one
// of the pairs encoded here.
func appendValue(b []byte, oid uint32, v any) ([]byte, bool) {
	switch v := v.(type) {
	case *int64:
		if v == nil {
			return appendNull(b), true
		}
		return appendInt(b, oid, *v)
	case int64:
		return appendInt(b, oid, v)
	case *int32:
		if v == nil {
			return appendNull(b), true
		}
		return appendInt(b, oid, int64(*v))
	case int32:
		return appendInt(b, oid, int64(v))
	case *string:
		if v == nil {
			return appendNull(b), true
		}
		return appendText(b, oid, *v)
	case string:
		return appendText(b, oid, v)
	case **string:
		if v == nil || *v == nil {
			return appendNull(b), true
		}
		return appendText(b, oid, **v)
	case *bool:
		if v == nil {
			return appendNull(b), true
		}
		return appendBool(b, oid, *v)
	case bool:
		return appendBool(b, oid, v)
	case *time.Time:
		if v == nil {
			return appendNull(b), true
		}
		return appendTime(b, oid, *v)
	case time.Time:
		return appendTime(b, oid, v)
	}
	return b, false
}

func appendNull(b []byte) []byte { return binary.BigEndian.AppendUint32(b, 0xffffffff) }

func appendInt(b []byte, oid uint32, n int64) ([]byte, bool) {
	switch {
	case oid == oidInt8:
		b = binary.BigEndian.AppendUint32(b, 8)
		return binary.BigEndian.AppendUint64(b, uint64(n)), true
	case oid == oidInt4 && n == int64(int32(n)):
		b = binary.BigEndian.AppendUint32(b, 4)
		return binary.BigEndian.AppendUint32(b, uint32(n)), true
	}
	return b, false
}

func appendText(b []byte, oid uint32, s string) ([]byte, bool) {
	switch oid {
	case oidText, oidVarchar, oidJSON: // JSON text as it is, as pgx's JSON codec takes a string
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...), true
	case oidJSONB:
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)+1))
		b = append(b, 1) // jsonb's binary version
		return append(b, s...), true
	}
	return b, false
}

func appendBool(b []byte, oid uint32, v bool) ([]byte, bool) {
	if oid != oidBool {
		return b, false
	}
	b = binary.BigEndian.AppendUint32(b, 1)
	if v {
		return append(b, 1), true
	}
	return append(b, 0), true
}

func appendTime(b []byte, oid uint32, t time.Time) ([]byte, bool) {
	if oid != oidTimestamptz {
		return b, false
	}
	us := t.Unix()*1_000_000 + int64(t.Nanosecond())/1000 - y2kMicros // as pgx's timestamptz codec
	b = binary.BigEndian.AppendUint32(b, 8)
	return binary.BigEndian.AppendUint64(b, uint64(us)), true
}
