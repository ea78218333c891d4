package personal

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	gojson "github.com/goccy/go-json"
	asmbase64 "github.com/segmentio/asm/base64"

	"lectern/eventstore"
)

// piiMember is the member of a sealed event's data that holds its personal
// values, encrypted. Event types are Go structs with fixed members, none of
// them named so, so its presence marks a sealed event.
const piiMember = "pii"

var piiKey = []byte(`"` + piiMember + `":`)

// envelope is the "pii" member: the subject whose key sealed the values, and
// the nonce and ciphertext of their JSON object (AES-256-GCM, the event type
// and subject as additional data).
type envelope struct {
	Subject string `json:"sub"`
	Sealed  []byte `json:"ct"` // nonce || ciphertext
}

// ErrErased is the key of a subject that was erased.
var ErrErased = errors.New("personal: subject erased")

// KeySource gives the AEAD of a subject's key: create makes one for a
// subject that has none; ErrErased for a subject that was erased.
type KeySource interface {
	Key(ctx context.Context, subject string, create bool) (cipher.AEAD, error)
}

// Sealer seals and opens the personal fields of events.
type Sealer struct {
	keys KeySource
}

// NewSealer returns a sealer over keys.
func NewSealer(keys KeySource) *Sealer { return &Sealer{keys: keys} }

// Subject is whose personal data an event of eventType with data holds, the
// acting user being actor: "user-7", or "" for an event that holds none.
func Subject(eventType string, data json.RawMessage, actor int64) (string, error) {
	r, ok := rules[eventType]
	if !ok {
		return "", nil
	}
	var top map[string]json.RawMessage
	if err := gojson.Unmarshal(data, &top); err != nil {
		return "", err
	}
	return r.subject(top, actor), nil
}

// SubjectOf is whose personal data a stored event holds: the subject named
// in its "pii" member when it is sealed, else Subject's (an event stored in
// clear, appended before its fields were sealed); "" for none
// or for data that does not decode.
func SubjectOf(eventType string, data []byte, actor int64) string {
	if _, ok := rules[eventType]; !ok {
		return ""
	}
	if subjects, _ := appendSubjects(nil, data, nil); len(subjects) > 0 {
		return subjects[0]
	}
	subject, _ := Subject(eventType, data, actor)
	return subject
}

func (r rule) subject(top map[string]json.RawMessage, actor int64) string {
	for _, s := range r.subjects {
		var id *int64
		if raw, ok := top[s.member]; ok && gojson.Unmarshal(raw, &id) == nil && id != nil && *id > 0 {
			return s.category + "-" + strconv.FormatInt(*id, 10)
		}
	}
	if actor > 0 {
		return "user-" + strconv.FormatInt(actor, 10)
	}
	return ""
}

// Seal returns data with its personal fields replaced by their placeholders
// and their values encrypted under the subject's key in the "pii" member.
// An event type that holds no personal data, or an event with no subject
// (nothing to key it by), is returned as it is. actor is the acting user.
func (s *Sealer) Seal(ctx context.Context, eventType string, data json.RawMessage, actor int64) (json.RawMessage, error) {
	r, ok := rules[eventType]
	if !ok {
		return data, nil
	}
	if r.scannable() {
		var buf [16]member
		if ms, ok := members(data, buf[:0]); ok {
			if out, ok, err := s.sealMembers(ctx, eventType, r, data, ms, actor); ok || err != nil {
				return out, err
			}
		}
	}
	return s.sealGeneral(ctx, eventType, r, data, actor)
}

// sealGeneral is Seal through maps: for any rule and any valid JSON.
func (s *Sealer) sealGeneral(ctx context.Context, eventType string, r rule, data json.RawMessage, actor int64) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := gojson.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("personal: seal %s: %w", eventType, err)
	}
	if _, sealed := top[piiMember]; sealed {
		return data, nil
	}
	subject := r.subject(top, actor)
	if subject == "" {
		return data, nil
	}
	values := map[string]json.RawMessage{}
	for _, f := range r.fields {
		v, err := f.take(top, subject)
		if err != nil {
			return nil, fmt.Errorf("personal: seal %s: %w", eventType, err)
		}
		if v != nil && !f.isPlaceholder(v) {
			values[f.name()] = v
		}
	}
	plain, err := gojson.Marshal(values)
	if err != nil {
		return nil, err
	}
	aead, err := s.keys.Key(ctx, subject, true)
	if err != nil {
		return nil, fmt.Errorf("personal: seal %s: %w", eventType, err)
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	rest, err := gojson.Marshal(top)
	if err != nil {
		return nil, err
	}
	sealed := aead.Seal(nonce, nonce, plain, additional(eventType, subject))
	return appendSealedEvent(nil, subject, sealed, rest[1:len(rest)-1]), nil
}

// appendSealedEvent appends a sealed event to dst: its envelope first (see
// leadingEnvelope), then members, the text of its other members without
// the object's braces.
func appendSealedEvent(dst []byte, subject string, sealed, members []byte) []byte {
	dst = appendEnvelope(append(dst, `{"pii":`...), subject, sealed)
	if len(members) > 0 {
		dst = append(append(dst, ','), members...)
	}
	return append(dst, '}')
}

// Sealed reports whether data, of eventType, may hold sealed values: a
// cheap test that lets readers skip Open (and its key look-up) for the rest.
// A quote inside a JSON string is escaped, so `"pii":` in the bytes is a
// member name.
func Sealed(eventType string, data []byte) bool {
	if _, ok := rules[eventType]; !ok {
		return false
	}
	if bytes.HasPrefix(data, leadingPII) {
		return true
	}
	_, _, ok := trailingEnvelope(data)
	return ok || bytes.Contains(data, piiKey)
}

// leadingPII starts a sealed event as sealing writes it: its "pii" member
// first, where readers find it without reading past it.
var leadingPII = append(append([]byte(`{`), piiKey...), envelopeStart...)

// leadingEnvelope reads the "pii" member of data that starts with it as
// sealing writes it: `{"pii":{"sub":"user-7","ct":"<base64>"},<the other
// members>}`. It returns the subject, the base64 text, and after: the other
// members and the object's closing brace (`"a":1}`, or `}` for none). Read
// forwards, where the member used to be found backwards from the end of the
// event (trailingEnvelope): the base64 holds no quote, so the first one
// ends it. False for anything else, and for a raw CR or LF in the base64
// (JSON refuses them in a string, base64 would skip them): the scan or
// go-json decides those.
func leadingEnvelope(data []byte) (sub, b64, after []byte, ok bool) {
	rest, ok := bytes.CutPrefix(data, leadingPII)
	if !ok {
		return nil, nil, nil, false
	}
	j := 0
	for j < len(rest) && subjectChar(rest[j]) {
		j++
	}
	sub = rest[:j]
	if b64, ok = bytes.CutPrefix(rest[j:], subjectEnd); !ok || j == 0 {
		return nil, nil, nil, false
	}
	k := bytes.IndexByte(b64, '"')
	if k < 0 {
		return nil, nil, nil, false
	}
	b64, tail := b64[:k], b64[k:] // `"},...` or `"}}`
	if len(tail) < 3 || tail[1] != '}' ||
		bytes.IndexByte(b64, '\\') >= 0 || bytes.IndexByte(b64, '\r') >= 0 || bytes.IndexByte(b64, '\n') >= 0 {
		return nil, nil, nil, false
	}
	switch {
	case tail[2] == ',':
		return sub, b64, tail[3:], true
	case len(tail) == 3 && tail[2] == '}':
		return sub, b64, tail[2:], true
	}
	return nil, nil, nil, false
}

// trailingEnvelope returns the "pii" member's value, and where the member
// starts (after the comma or brace before it), when data ends with it as
// sealMembers wrote it before it wrote it first (leadingEnvelope), the last
// member:
// `,"pii":{"sub":"user-7","ct":"<base64>"}}`. It reads the envelope alone,
// backwards, where a replay would otherwise scan the whole event for it.
//
// In valid JSON that ends so, the member is the top level's: the base64
// text and the subject hold no quote or backslash, so each quote read is a
// string's own, the member's object closes just before the top level does,
// and an object's last member is followed by its own closing brace.
// Callers decode the data as JSON too; a scan or the general path takes
// data that does not end so.
func trailingEnvelope(data []byte) (value []byte, at int, ok bool) {
	const tail = `"}}`
	end := len(data) - len(tail)
	if end < 0 || string(data[end:]) != tail {
		return nil, 0, false
	}
	// The base64 holds no quote: the last one before it opens it. (Its
	// bytes are checked as they are decoded, and a backslash here is left
	// to the scan.)
	i := lastQuote(data[:end]) + 1
	if bytes.IndexByte(data[i:end], '\\') >= 0 {
		return nil, 0, false
	}
	rest, ok := bytes.CutSuffix(data[:i], subjectEnd)
	if !ok {
		return nil, 0, false
	}
	j := len(rest)
	for j > 0 && subjectChar(rest[j-1]) {
		j--
	}
	head, ok := bytes.CutSuffix(rest[:j], piiEnvelope)
	if !ok || j == len(rest) || len(head) == 0 || head[len(head)-1] != ',' && head[len(head)-1] != '{' {
		return nil, 0, false
	}
	return data[len(head)+len(piiKey) : len(data)-1], len(head), true
}

// lastQuote is bytes.LastIndexByte(b, '"'), eight bytes at a time: it
// reads back over a ciphertext's base64 text (a hundred bytes and more) for
// every event a replay opens, twice, and LastIndexByte reads a byte at a
// time.
func lastQuote(b []byte) int {
	const ones, highs, quotes = 0x0101010101010101, 0x8080808080808080, 0x2222222222222222
	i := len(b)
	for ; i >= 8; i -= 8 {
		w := binary.LittleEndian.Uint64(b[i-8:i]) ^ quotes // a quote's byte is now zero
		if (w-ones)&^w&highs != 0 {                        // some byte is zero
			break
		}
	}
	return bytes.LastIndexByte(b[:i], '"')
}

// subjectEnd follows the subject in the envelope as appendEnvelope writes it.
var subjectEnd = append([]byte(`"`), envelopeMiddle...)

// subjectChar is a byte of a subject ("user-7", "partner-6") as sealMembers
// writes it.
func subjectChar(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-'
}

// Open returns data with the personal values of its "pii" member put back,
// or, when its subject was erased, with their placeholders (the "pii" member
// goes either way). Data that was never sealed is returned as it is.
func (s *Sealer) Open(ctx context.Context, eventType string, data json.RawMessage) (json.RawMessage, error) {
	if !Sealed(eventType, data) {
		return data, nil
	}
	return s.openSealed(ctx, eventType, data)
}

// openSealed is Open of data that Sealed reported may hold sealed values.
func (s *Sealer) openSealed(ctx context.Context, eventType string, data json.RawMessage) (json.RawMessage, error) {
	r := rules[eventType]
	if r.scannable() {
		if ms, ok := members(data, make([]member, 0, 16)); ok {
			if out, ok, err := s.openMembers(ctx, eventType, r, ms); ok || err != nil {
				return out, err
			}
		}
	}
	return s.openGeneral(ctx, eventType, r, data)
}

// openGeneral is Open through maps: for any rule and any valid JSON.
func (s *Sealer) openGeneral(ctx context.Context, eventType string, r rule, data json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := gojson.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("personal: open %s: %w", eventType, err)
	}
	raw, sealed := top[piiMember]
	if !sealed {
		return data, nil
	}
	delete(top, piiMember)
	var env envelope
	if err := gojson.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf("personal: open %s: %w", eventType, err)
	}
	plain, erased, err := s.openValues(ctx, eventType, env.Subject, env.Sealed)
	if err != nil {
		return nil, err
	}
	if erased {
		return gojson.Marshal(top) // the placeholders stand
	}
	var values map[string]json.RawMessage
	if err := gojson.Unmarshal(plain, &values); err != nil {
		return nil, fmt.Errorf("personal: open %s: %w", eventType, err)
	}
	for _, f := range r.fields {
		if v, ok := values[f.name()]; ok {
			if err := f.put(top, v); err != nil {
				return nil, fmt.Errorf("personal: open %s: %w", eventType, err)
			}
		}
	}
	return gojson.Marshal(top)
}

// openValues decrypts sealed, an envelope's nonce and ciphertext, in place
// (it must be the caller's own) with the key of subject: the JSON object of
// an event's personal values, or erased when the subject was erased (its
// placeholders stand).
func (s *Sealer) openValues(ctx context.Context, eventType, subject string, sealed []byte) (plain []byte, erased bool, err error) {
	return s.openValuesWith(ctx, additional(eventType, subject), eventType, subject, sealed, nil)
}

// openValuesWith is openValues given the additional data, ad: it escapes
// (the AEAD is an interface), so a reader opening event after event builds
// it in a buffer of its own rather than allocate one each time.
func (s *Sealer) openValuesWith(ctx context.Context, ad []byte, eventType, subject string, sealed []byte, memo *KeyMemo) (plain []byte, erased bool, err error) {
	aead, err := s.key(ctx, subject, memo)
	if errors.Is(err, ErrErased) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("personal: open %s: %w", eventType, err)
	}
	n := aead.NonceSize()
	if len(sealed) < n {
		return nil, false, fmt.Errorf("personal: open %s: sealed values too short", eventType)
	}
	if plain, err = aead.Open(sealed[n:n], sealed[:n], sealed[n:], ad); err != nil {
		return nil, false, fmt.Errorf("personal: open %s: %w", eventType, err)
	}
	return plain, false, nil
}

// key is the subject's key to open with: through memo, when there is one
// and the key source keeps memos (Keys).
func (s *Sealer) key(ctx context.Context, subject string, memo *KeyMemo) (cipher.AEAD, error) {
	if k, ok := s.keys.(*Keys); ok && memo != nil {
		return k.KeyThrough(ctx, subject, memo)
	}
	return s.keys.Key(ctx, subject, false)
}

// piiOf is the value of the "pii" member among ms (the last, as a decoder
// takes it); nil when there is none.
func piiOf(ms []member) []byte {
	var raw []byte
	for _, m := range ms {
		if string(m.key) == piiMember {
			raw = m.value
		}
	}
	return raw
}

func additional(eventType, subject string) []byte { return appendAdditional(nil, eventType, subject) }

// appendAdditional appends the additional data that binds sealed values to
// their event type and subject.
func appendAdditional(dst []byte, eventType, subject string) []byte {
	dst = append(dst, eventType...)
	dst = append(dst, 0)
	return append(dst, subject...)
}

// parseEnvelope reads a "pii" member's value: the subject and the nonce and
// ciphertext (decoded into a slice of the caller's own). The member as
// appendEnvelope writes it is read by hand; any other spelling of it
// through go-json.
func parseEnvelope(raw []byte) (subject string, sealed []byte, err error) {
	return parseEnvelopeInto(nil, raw)
}

// parseEnvelopeInto is parseEnvelope decoding the ciphertext into dst's
// storage when it is large enough.
func parseEnvelopeInto(dst, raw []byte) (subject string, sealed []byte, err error) {
	if sub, b64, ok := envelopeParts(raw); ok {
		if sealed, ok := decodeBase64(dst, b64); ok {
			return string(sub), sealed, nil
		}
	}
	var env envelope
	if err := gojson.Unmarshal(raw, &env); err != nil {
		return "", nil, err
	}
	return env.Subject, env.Sealed, nil
}

// decodeBase64 decodes b64 into dst's storage when it is large enough; false
// for text that is not base64.
func decodeBase64(dst, b64 []byte) ([]byte, bool) {
	n := fastBase64.DecodedLen(len(b64))
	out := slices.Grow(dst[:0], n)[:n]
	n, err := fastBase64.Decode(out, b64)
	return out[:n], err == nil
}

// envelopeParts splits an envelope spelled as appendEnvelope spells it into
// its subject and its base64 text; false for any other spelling, for an
// escape in the subject, and for a raw CR or LF in the base64 (JSON refuses
// them in a string, base64 would skip them): go-json decides those.
func envelopeParts(raw []byte) (sub, b64 []byte, ok bool) {
	rest, ok := bytes.CutPrefix(raw, envelopeStart)
	i := bytes.IndexByte(rest, '"')
	if !ok || i <= 0 {
		return nil, nil, false
	}
	sub = rest[:i]
	if b64, ok = bytes.CutPrefix(rest[i+1:], envelopeMiddle); ok {
		b64, ok = bytes.CutSuffix(b64, envelopeEnd)
	}
	return sub, b64, ok && bytes.IndexByte(sub, '\\') < 0 && bytes.IndexByte(b64, '\r') < 0 && bytes.IndexByte(b64, '\n') < 0
}

// fastBase64 decodes as encoding/base64's StdEncoding does, with AVX2 or
// NEON where the CPU has them: an event's ciphertext is its longest text,
// and decoding it was a tenth of the instructions a replay spent opening.
var fastBase64 = asmbase64.StdEncoding

var (
	envelopeStart  = []byte(`{"sub":"`)
	envelopeMiddle = []byte(`,"ct":"`)
	envelopeEnd    = []byte(`"}`)
)

// sealMembers is Seal over the scanned top-level members of data, for a
// scannable rule; false when a member's value is not what the scan expects
// (the general path then takes the event).
func (s *Sealer) sealMembers(ctx context.Context, eventType string, r rule, data []byte, ms []member, actor int64) (json.RawMessage, bool, error) {
	if piiOf(ms) != nil {
		return data, true, nil // sealed already
	}
	subject := r.subjectOf(ms, actor)
	if subject == "" {
		return data, true, nil
	}
	aead, err := s.keys.Key(ctx, subject, true)
	if err != nil {
		return nil, false, fmt.Errorf("personal: seal %s: %w", eventType, err)
	}
	sc := sealScratches.Get().(*sealScratch)
	defer sc.release()
	plain := append(sc.plain[:0], '{')
	out := append(sc.out[:0], '{')
	for _, m := range ms {
		if f, personal := r.fieldOf(m.key); personal {
			if !f.isPlaceholder(m.value) {
				plain = appendMember(plain, m.key, m.value)
			}
			out = appendMember(out, m.key, f.placeholder(subject))
			continue
		}
		v := m.value
		for _, f := range r.nestedUnder(m.key) {
			var taken []byte
			var ok bool
			if v, taken, ok = takeNested(v, f, f.placeholder(subject)); !ok {
				return nil, false, nil
			}
			if taken != nil && !f.isPlaceholder(taken) {
				plain = appendMember(plain, []byte(f.name()), taken)
			}
		}
		out = appendMember(out, m.key, v)
	}
	plain = append(plain, '}')
	n := aead.NonceSize()
	sealed := sc.sealed[:n]
	if _, err := rand.Read(sealed); err != nil {
		return nil, false, err
	}
	sealed = aead.Seal(sealed, sealed, plain, appendAdditional(sc.ad[:0], eventType, subject))
	sc.plain, sc.out, sc.sealed = plain, out, sealed
	// The result is the one allocation, of its exact size (out is the
	// other members after an opening brace).
	size := len(out) + len(`{"pii":{"sub":"`) + len(subject) + len(`","ct":""},}`) + fastBase64.EncodedLen(len(sealed))
	return appendSealedEvent(make([]byte, 0, size), subject, sealed, out[1:]), true, nil
}

// sealScratch holds what sealMembers writes on the way to its result.
type sealScratch struct {
	plain, out, sealed []byte
	ad                 [64]byte
}

var sealScratches = sync.Pool{New: func() any { return &sealScratch{sealed: make([]byte, 0, 512)} }}

// maxScratch bounds what a scratch keeps: an event may be as large as an
// append (a MiB), and the pool should not hold such buffers for good.
const maxScratch = 64 << 10

func (sc *sealScratch) release() {
	if cap(sc.plain) > maxScratch || cap(sc.out) > maxScratch || cap(sc.sealed) > maxScratch {
		return
	}
	clear(sc.plain[:cap(sc.plain)]) // personal values do not linger in the pool
	clear(sc.sealed[:cap(sc.sealed)])
	sealScratches.Put(sc)
}

// openMembers is Open over the scanned top-level members of sealed data,
// for a scannable rule; false when a member's value is not what the scan
// expects (the general path then takes the event).
func (s *Sealer) openMembers(ctx context.Context, eventType string, r rule, ms []member) (json.RawMessage, bool, error) {
	var values []member
	if raw := piiOf(ms); raw != nil {
		subject, sealed, err := parseEnvelope(raw)
		if err != nil {
			return nil, false, fmt.Errorf("personal: open %s: %w", eventType, err)
		}
		// sealed is this call's own (decoded from base64).
		plain, erased, err := s.openValues(ctx, eventType, subject, sealed)
		if err != nil {
			return nil, false, err
		}
		if !erased { // else the placeholders stand
			var ok bool
			if values, ok = members(plain, make([]member, 0, 8)); !ok {
				return nil, false, nil
			}
		}
	}
	sealedValue := func(name string) []byte {
		for _, v := range values {
			if string(v.key) == name {
				return v.value
			}
		}
		return nil
	}
	size := 2
	for _, m := range ms {
		size += len(m.key) + len(m.value) + 4
	}
	for _, v := range values {
		size += len(v.value)
	}
	out := make([]byte, 1, size)
	out[0] = '{'
	for _, m := range ms {
		if string(m.key) == piiMember {
			continue
		}
		v := m.value
		if f, personal := r.fieldOf(m.key); personal {
			if sv := sealedValue(f.name()); sv != nil {
				v = sv
			}
			out = appendMember(out, m.key, v)
			continue
		}
		nested := r.nestedUnder(m.key)
		if len(nested) == 0 {
			out = appendMember(out, m.key, v)
			continue
		}
		// Each nested field but the last is put into a copy of the value,
		// the last straight into out.
		last, lastValue := -1, []byte(nil)
		for i, f := range nested {
			sv := sealedValue(f.name())
			if sv == nil {
				continue
			}
			if last >= 0 {
				var ok bool
				if v, ok = appendPutNested(nil, v, nested[last], lastValue); !ok {
					return nil, false, nil
				}
			}
			last, lastValue = i, sv
		}
		if last < 0 {
			out = appendMember(out, m.key, v)
			continue
		}
		out = appendMember(out, m.key, nil)
		var ok bool
		if out, ok = appendPutNested(out, v, nested[last], lastValue); !ok {
			return nil, false, nil
		}
	}
	return append(out, '}'), true, nil
}

// Prefetcher is a KeySource that loads many subjects' keys at once.
type Prefetcher interface {
	Prefetch(ctx context.Context, subjects []string) error
}

// Prefetch loads, in one go, the keys that opening evs will need.
func (s *Sealer) Prefetch(ctx context.Context, evs []eventstore.RecordedEvent) error {
	if _, ok := s.keys.(Prefetcher); !ok {
		return nil
	}
	var subjects []string
	ms := make([]member, 0, 16)
	for _, ev := range evs {
		if Holds(ev.Type) {
			subjects, ms = appendSubjects(subjects, ev.Data, ms)
		}
	}
	return s.prefetch(ctx, subjects)
}

// prefetch loads the keys of subjects in one go, when the key source can.
func (s *Sealer) prefetch(ctx context.Context, subjects []string) error {
	p, ok := s.keys.(Prefetcher)
	if !ok || len(subjects) == 0 {
		return nil
	}
	return p.Prefetch(ctx, subjects)
}

// appendSubjects appends to subjects the subject of the "pii" member of
// data, if sealed, through ms (returned for reuse). The member as the scan
// path writes it (in appendEnvelope's spelling) is found without a scan;
// otherwise sealed data is scanned, and data the scan does not take adds none
// (Open goes the general way, and asks for its key itself). A subject here
// is only a hint of which keys to load: Open reads the envelope itself.
func appendSubjects(subjects []string, data []byte, ms []member) ([]string, []member) {
	if rest, ok := bytes.CutPrefix(data, leadingPII); ok {
		if j := bytes.IndexByte(rest, '"'); j > 0 {
			return appendSubject(subjects, rest[:j]), ms
		}
	}
	if env, _, ok := trailingEnvelope(data); ok {
		sub, _, _ := envelopeParts(env)
		return appendSubject(subjects, sub), ms
	}
	if i := bytes.Index(data, piiEnvelope); i >= 0 {
		rest := data[i+len(piiEnvelope):]
		if j := bytes.IndexByte(rest, '"'); j > 0 {
			return appendSubject(subjects, rest[:j]), ms
		}
	}
	if !bytes.Contains(data, piiKey) {
		return subjects, ms // not sealed
	}
	ms, ok := members(data, ms[:0])
	if !ok {
		return subjects, ms
	}
	raw := piiOf(ms) // the member Open reads
	if raw == nil {
		return subjects, ms
	}
	env, ok := members(raw, nil)
	if !ok {
		return subjects, ms
	}
	for _, e := range env {
		if string(e.key) == "sub" && len(e.value) > 2 {
			subjects = append(subjects, string(e.value[1:len(e.value)-1]))
		}
	}
	return subjects, ms
}

// appendSubject appends sub to subjects unless it is the last one: a
// subject's events come in runs, and one will do.
func appendSubject(subjects []string, sub []byte) []string {
	if n := len(subjects); n > 0 && subjects[n-1] == string(sub) {
		return subjects
	}
	return append(subjects, string(sub))
}

// piiEnvelope starts the "pii" member as sealMembers writes it.
var piiEnvelope = append(append([]byte(nil), piiKey...), envelopeStart...)
