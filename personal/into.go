package personal

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"

	"lectern/events"
)

// Opening straight into the decoded event.
//
// Open writes the event's JSON back with its values in place, and the
// reader then decodes that: for a replay, which opens every event of the
// log, writing the JSON costs as much as decoding it. OpenInto decodes the
// sealed JSON as it is (the placeholders in place of the values), then
// decodes each sealed value into its field of the decoded struct. The
// fields are found once per event type and Go type, by their json tags.
// Anything it does not expect is left to Open (the caller falls back): the
// result is always what decoding Open's result gives.

// OpenInto decodes data, of eventType, into v (a pointer to a new, zero
// event struct) as decoding Open's result would, without writing that
// result. It takes each sealed value's member to hold its placeholder in
// data, as sealing writes them (Open puts a value only in place of one). It
// reports false, with v zero, when it does not take the event (not sealed, a
// shape it does not expect, data that does not decode): the caller then
// opens and decodes as usual.
func (s *Sealer) OpenInto(ctx context.Context, eventType string, data []byte, v any) (bool, error) {
	if _, ok := rules[eventType]; !ok {
		return false, nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return false, nil
	}
	p := planFor(eventType, rv.Elem().Type())
	if p == nil {
		return false, nil
	}
	sc := openScratches.Get().(*openScratch)
	defer sc.release()
	return s.openIntoWith(ctx, sc, eventType, p, data, v)
}

// openIntoWith is OpenInto of data into v by plan p, with sc for scratch.
// The struct as stored, placeholders and all, is decoded without the
// "pii" member where sealing wrote it (first, or, before, last: the
// decoder need not read it), else with it ("pii" matches no field).
func (s *Sealer) openIntoWith(ctx context.Context, sc *openScratch, eventType string, p *intoPlan, data []byte, v any) (bool, error) {
	if sub, b64, after, ok := leadingEnvelope(data); ok {
		sealed, ok := decodeBase64(sc.sealed, b64)
		sc.sealed = sealed
		if !ok {
			return false, nil // not base64: Open says so
		}
		sc.subject = sameString(sc.subject, sub)
		sc.body = append(append(sc.body[:0], '{'), after...)
		return s.openInto(ctx, sc, eventType, p, sc.subject, sealed, sc.body, v)
	}
	raw, body, ok := envelopeOf(data)
	if !ok {
		return false, nil
	}
	subject, sealed, err := parseEnvelopeInto(sc.sealed, raw)
	sc.sealed = sealed
	if err != nil {
		return true, fmt.Errorf("personal: open %s: %w", eventType, err)
	}
	if body != nil {
		sc.body = append(append(sc.body[:0], body...), '}')
		body = sc.body
	} else {
		body = data
	}
	return s.openInto(ctx, sc, eventType, p, subject, sealed, body, v)
}

// sameString is b as a string: last when they are equal. A subject's events
// come in runs, and its string is made once a run.
func sameString(last string, b []byte) string {
	if last == string(b) {
		return last
	}
	return string(b)
}

// openInto decodes body, the event as stored without its envelope, into
// v, then opens sealed, the envelope's nonce and ciphertext (sc's) with
// subject's key and decodes each value into its field by plan p.
func (s *Sealer) openInto(ctx context.Context, sc *openScratch, eventType string, p *intoPlan, subject string, sealed, body []byte, v any) (bool, error) {
	rv := reflect.ValueOf(v)
	sc.ad = appendAdditional(sc.ad[:0], eventType, subject)
	plain, erased, err := s.openValuesWith(ctx, sc.ad, eventType, subject, sealed, &sc.memo)
	if err != nil {
		return true, err
	}
	if err := gojson.Unmarshal(body, v); err != nil {
		rv.Elem().SetZero()
		return false, nil
	}
	if erased {
		return true, nil // the placeholders stand
	}
	var vbuf [8]member
	values, ok := members(plain, vbuf[:0])
	if ok {
		ok = p.put(rv.Elem(), values)
	}
	if !ok {
		rv.Elem().SetZero()
		return false, nil
	}
	return true, nil
}

// openScratch holds OpenInto's ciphertext, opened in place, the event
// without its envelope, and the additional data: nothing decoded from them
// refers to them (the decoder copies its input, strings are copied).
type openScratch struct {
	sealed, body, ad []byte
	subject          string  // the last subject opened (see sameString)
	memo             KeyMemo // the last key it was opened with
}

var openScratches = sync.Pool{New: func() any { return new(openScratch) }}

func (sc *openScratch) release() {
	if cap(sc.sealed) > maxScratch || cap(sc.body) > maxScratch || cap(sc.ad) > maxScratch {
		return
	}
	sc.wipe()
	openScratches.Put(sc)
}

// wipe clears the opened values: personal values do not linger in the
// pool. The ciphertext buffer is written from its start and cleared so:
// what lies past its length is zeros, or was never more than ciphertext.
// The body holds only the event as stored.
func (sc *openScratch) wipe() {
	clear(sc.sealed)
	sc.sealed, sc.body = sc.sealed[:0], sc.body[:0]
}

// envelopeOf returns the top-level "pii" member's value: false when data has
// none (never sealed) or does not scan. When the member ends data, as
// sealing wrote it before it wrote it first, body is data up to it, without
// the comma before it and the closing brace: the members before it, to be
// closed with '}'.
func envelopeOf(data []byte) (raw, body []byte, ok bool) {
	if raw, at, ok := trailingEnvelope(data); ok {
		if body = data[:at]; body[len(body)-1] == ',' {
			body = body[:len(body)-1]
		}
		return raw, body, true
	}
	if !bytes.Contains(data, piiKey) {
		return nil, nil, false
	}
	var buf [16]member
	ms, ok := members(data, buf[:0])
	if !ok {
		return nil, nil, false
	}
	raw = piiOf(ms)
	return raw, nil, raw != nil
}

// intoPlan is where each sealed field of an event type lives in its Go
// struct.
type intoPlan struct{ fields []intoField }

// intoField is a field of a rule in a Go struct: outer is the index of its
// top-level member's field; for a nested field, inner is the index of the
// member's field in the object (or in each element of the array: each).
type intoField struct {
	name         string
	outer, inner []int
	nested, each bool
	str          bool // a string the decoder would set as it is (see decodeField)
	nullIsZero   bool // the decoder leaves it zero for a JSON null (see decodeField)
}

type planKey struct {
	eventType string
	typ       reflect.Type
}

// plans caches planFor, a nil plan for a pair it cannot take: a map that is
// copied to add to it (a dozen pairs, made once), so that reading it, once
// per event a replay opens, takes no lock.
var (
	plans   atomic.Pointer[map[planKey]*intoPlan]
	plansMu sync.Mutex // serialises the copies
)

// planFor returns the plan of eventType's rule over the struct type t, or
// nil when some field has no exact json tag in it (Open then decides, as
// the decoder would: ignoring it, or matching a tag in another case).
func planFor(eventType string, t reflect.Type) *intoPlan {
	key := planKey{eventType, t}
	if m := plans.Load(); m != nil {
		if p, ok := (*m)[key]; ok {
			return p
		}
	}
	plansMu.Lock()
	defer plansMu.Unlock()
	m := map[planKey]*intoPlan{}
	if old := plans.Load(); old != nil {
		if p, ok := (*old)[key]; ok {
			return p
		}
		maps.Copy(m, *old)
	}
	p := makePlan(rules[eventType], t)
	m[key] = p
	plans.Store(&m)
	return p
}

func makePlan(r rule, t reflect.Type) *intoPlan {
	if !r.scannable() {
		return nil
	}
	p := &intoPlan{}
	for _, f := range r.fields {
		outerName, each := strings.CutSuffix(f.path[0], "[]")
		outer, ft, ok := fieldByTag(t, outerName)
		if !ok {
			return nil
		}
		x := intoField{name: f.name(), outer: outer}
		leaf := ft
		if len(f.path) == 2 {
			x.nested, x.each = true, each
			if each {
				if ft.Kind() != reflect.Slice {
					return nil
				}
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if x.inner, leaf, ok = fieldByTag(ft, f.path[1]); !ok {
				return nil
			}
		}
		x.str = leaf.Kind() == reflect.String && !unmarshals(leaf)
		x.nullIsZero = x.str || leaf.Kind() == reflect.Pointer && !unmarshals(leaf) && !unmarshals(leaf.Elem())
		p.fields = append(p.fields, x)
	}
	return p
}

var (
	jsonUnmarshaler = reflect.TypeFor[gojson.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// unmarshals reports whether values of t decode themselves in a way of
// their own: *t, whose methods include t's, has an UnmarshalJSON or
// UnmarshalText method.
func unmarshals(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler)
}

// fieldByTag finds the field of struct t whose json name is name, among its
// own fields: an embedded struct is not looked into (no plan then).
func fieldByTag(t reflect.Type, name string) ([]int, reflect.Type, bool) {
	if t.Kind() != reflect.Struct {
		return nil, nil, false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil, nil, false
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && tag == name {
			return f.Index, f.Type, true
		}
	}
	return nil, nil, false
}

// put decodes each sealed value into its field of ev: false when a value
// does not fit (Open then decides).
func (p *intoPlan) put(ev reflect.Value, values []member) bool {
	for _, v := range values {
		f := p.field(v.key)
		if f == nil {
			continue // not one of the rule's fields: Open puts it nowhere either
		}
		outer := ev.FieldByIndex(f.outer)
		if !f.nested {
			if !decodeField(outer, v.value, f) {
				return false
			}
			continue
		}
		if string(v.value) == "null" {
			continue
		}
		if !f.each {
			if !putInner(outer, f, v.value) {
				return false
			}
			continue
		}
		var ebuf [8][]byte
		vals, ok := appendElements(ebuf[:0], v.value)
		if !ok || outer.Len() != len(vals) {
			return false
		}
		for i, val := range vals {
			if !putInner(outer.Index(i), f, val) {
				return false
			}
		}
	}
	return true
}

func (p *intoPlan) field(name []byte) *intoField {
	for i := range p.fields {
		if p.fields[i].name == string(name) {
			return &p.fields[i]
		}
	}
	return nil
}

// putInner decodes value into f's inner field of obj (a struct, or a
// pointer to one: a nil one was null, and gets nothing, as with Open).
func putInner(obj reflect.Value, f *intoField, value []byte) bool {
	if obj.Kind() == reflect.Pointer {
		if obj.IsNil() {
			return true
		}
		obj = obj.Elem()
	}
	return decodeField(obj.FieldByIndex(f.inner), value, f)
}

// decodeField sets f, the field of plan x, to the JSON value, as decoding
// it into a zero f would. The common cases are set without the decoder: a
// JSON string without escapes, in valid UTF-8, into a field of a string kind
// that decodes itself in no way of its own (x.str), and a null into a field
// the decoder leaves zero for it (a nullable text left out: x.nullIsZero).
func decodeField(f reflect.Value, value []byte, x *intoField) bool {
	if x.str && len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
		s := value[1 : len(value)-1]
		if bytes.IndexByte(s, '\\') < 0 && bytes.IndexByte(s, '"') < 0 && utf8.Valid(s) {
			f.SetString(string(s))
			return true
		}
	}
	f.SetZero()
	if x.nullIsZero && string(value) == "null" {
		return true
	}
	return gojson.Unmarshal(value, f.Addr().Interface()) == nil
}

// Opening sets r to open the events it decodes with s (OpenWith and
// OpenIntoWith) and returns it. There is no deadline per event: the key
// store bounds its own look-ups.
//
// An erasure event it decodes (user.erased, partner.erased) makes s's key
// source forget the subject's key (when it can, as Keys can) before the
// call returns: a reader that decodes the log in order (a projection, a
// replay's page) then loads the key afresh for the events after it, finds
// it erased and reads their placeholders, even on a replica that has not
// yet heard of the erasure (ErasuresChannel). Such an event is one sealed
// with a key cached just before the erasure committed and appended just
// after it.
func (s *Sealer) Opening(r *events.Registry) *events.Registry {
	r.OpenIntoWith(func(eventType string, data json.RawMessage, v any) (bool, error) {
		return s.OpenInto(context.Background(), eventType, data, v)
	})
	return r.OpenWith(func(eventType string, data json.RawMessage) (json.RawMessage, error) {
		s.forgetIfErasure(eventType, data)
		return s.Open(context.Background(), eventType, data)
	})
}

// The erasure events' types. (Opening sees them through OpenWith: they
// hold nothing personal, so OpenInto never takes them.)
var (
	userErased    = events.UserErased{}.EventType()
	partnerErased = events.PartnerErased{}.EventType()
)

// An erasedForgetter drops what it cached of an erased subject's key (Keys).
type erasedForgetter interface{ ForgetErased(subject string) }

// forgetIfErasure makes s's keys forget the key of the subject that an
// event of eventType with data erased, if it is an erasure (user.erased,
// partner.erased): readers of the log in order (Opening, Store) call it
// before they open the events after it. Data that does not decode is left
// to the decoder to refuse.
func (s *Sealer) forgetIfErasure(eventType string, data []byte) {
	if eventType != userErased && eventType != partnerErased {
		return
	}
	f, ok := s.keys.(erasedForgetter)
	var e struct {
		UserID    int64 `json:"user_id"`
		PartnerID int64 `json:"partner_id"`
	}
	if !ok || gojson.Unmarshal(data, &e) != nil {
		return
	}
	switch {
	case eventType == userErased && e.UserID > 0:
		f.ForgetErased(UserSubject(e.UserID))
	case eventType == partnerErased && e.PartnerID > 0:
		f.ForgetErased(PartnerSubject(e.PartnerID))
	}
}
