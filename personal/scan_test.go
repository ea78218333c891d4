package personal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMembersSplitsTheTopLevel(t *testing.T) {
	for _, in := range []string{
		`{}`,
		` { } `,
		`{"a":1}`,
		`{"a":"x\"}y","b":[1,{"c":"]"}],"c":{"d":"{"},"e":null,"f":true,"g":-1.5e3}`,
		"{\n \"a\" : \"\\\\\" ,\t\"b\": []\n}",
		`{"name":"héllo ☃","n":0}`,
		`{"a":"x\\\\","b":"\\\"q\\\\\\\"","c":["\\\\",""]}`,
	} {
		got, ok := members([]byte(in), nil)
		if !ok {
			t.Errorf("%s: not split", in)
			continue
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d members, want %d", in, len(got), len(want))
		}
		for _, m := range got {
			if w, ok := want[string(m.key)]; !ok || string(w) != string(m.value) {
				t.Errorf("%s: member %q = %s, want %s", in, m.key, m.value, w)
			}
		}
	}
	for _, in := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1} x`, `{"a":"x}`, `{"a\u0041":1}`, `{"a":[1}`} {
		if _, ok := members([]byte(in), nil); ok {
			t.Errorf("%s: split, want refused (the general path takes it)", in)
		}
	}
}

// members agrees with encoding/json on every valid JSON object it splits
// (events are written by encoding/json: members need not validate): a
// member's value is the one encoding/json sees; what it refuses goes the
// general way, so the byte-level path can only be faster, never different.
func FuzzMembersAgreesWithEncodingJSON(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":"x\\\"}y","b":[1,{"c":"]"}]}`, `{"a":"\\\\"}`, `{"a":"\\\\\\"}"}`, `{"a":[1}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want map[string]json.RawMessage
		if !utf8.Valid(in) || json.Unmarshal(in, &want) != nil {
			return // encoding/json writes neither
		}
		got, ok := members(in, nil)
		if !ok {
			return
		}
		for _, m := range got {
			if w, ok := want[string(m.key)]; !ok || !json.Valid(m.value) || len(got) == len(want) && string(w) != string(m.value) {
				t.Fatalf("%q: member %q = %s, encoding/json has %s", in, m.key, m.value, w)
			}
		}
	})
}

type oneKey struct{ aead cipher.AEAD }

func (k oneKey) Key(context.Context, string, bool) (cipher.AEAD, error) { return k.aead, nil }

// zeroKeySealer is a sealer that keys every subject with one key, of zeros,
// and that key's AEAD.
func zeroKeySealer() (*Sealer, cipher.AEAD) {
	block, _ := aes.NewCipher(make([]byte, 32))
	aead, _ := cipher.NewGCM(block)
	return NewSealer(oneKey{aead}), aead
}

// The byte-level path and the general one are interchangeable: what one
// seals, the other opens to the same data, for every event type whose
// personal fields are top-level.
func TestScannedAndGeneralPathsAgree(t *testing.T) {
	s, _ := zeroKeySealer()
	ctx := context.Background()
	types := make([]string, 0, len(rules))
	for typ, r := range rules {
		if r.scannable() {
			types = append(types, typ)
		}
	}
	sort.Strings(types)
	if len(types) < 11 {
		t.Fatalf("only %d event types with top-level fields", len(types))
	}
	for _, typ := range types {
		r := rules[typ]
		members := []string{`"user_id":7`, `"owner_id":7`, `"agent_id":3`, `"other":"kept \"as\" is"`}
		nested := map[string][]string{}
		var order []string
		for i, f := range r.fields {
			v := fmt.Sprintf(`"marker-%d \u00e9 \"q\""`, i)
			if f.kind == object {
				v = `{"k":["marker"]}`
			}
			if len(f.path) == 1 {
				members = append(members, fmt.Sprintf("%q:%s", f.path[0], v))
				continue
			}
			if _, ok := nested[f.path[0]]; !ok {
				order = append(order, f.path[0])
			}
			nested[f.path[0]] = append(nested[f.path[0]], fmt.Sprintf("%q:%s", f.path[1], v))
		}
		for _, top := range order {
			inner := "{" + strings.Join(nested[top], ",") + `,"kept":{"a":[1,"]"]}}`
			if name, each := strings.CutSuffix(top, "[]"); each {
				// Elements with the fields, without them, and one null member.
				members = append(members, fmt.Sprintf(`%q:[%s,{"kept":2},%s]`, name, inner, inner))
			} else {
				members = append(members, fmt.Sprintf("%q:%s", name, inner))
			}
		}
		data := json.RawMessage("{" + strings.Join(members, ",") + "}")
		ms, _ := membersOf(data)
		scanned, ok, err := s.sealMembers(ctx, typ, r, data, ms, 7)
		if err != nil || !ok {
			t.Fatalf("%s: the scan did not seal %s: %v", typ, data, err)
		}
		general, err := s.sealGeneral(ctx, typ, r, data, 7)
		if err != nil {
			t.Fatal(err)
		}
		for name, sealed := range map[string]json.RawMessage{"scanned": scanned, "general": general} {
			if strings.Contains(string(sealed), "marker") {
				t.Errorf("%s sealed by the %s path holds a value in clear: %s", typ, name, sealed)
			}
			sms, ok := membersOf(sealed)
			if !ok {
				t.Fatalf("%s sealed by the %s path: not an object: %s", typ, name, sealed)
			}
			viaScan, ok, err := s.openMembers(ctx, typ, r, sms)
			if err != nil || !ok {
				t.Fatalf("%s: the scan did not open %s: %v", typ, sealed, err)
			}
			viaGeneral, err := s.openGeneral(ctx, typ, r, sealed)
			if err != nil {
				t.Fatal(err)
			}
			for path, opened := range map[string]json.RawMessage{"scanned": viaScan, "general": viaGeneral} {
				if !sameJSON(t, opened, data) {
					t.Errorf("%s sealed %s, opened %s: %s, want %s", typ, name, path, opened, data)
				}
			}
		}
	}
}

func membersOf(data []byte) ([]member, bool) { return members(data, nil) }

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// A null of a nullable field is its own placeholder: both paths leave it
// in place and out of the sealed values, and it reads back as null.
func TestSealingLeavesANullableNullInPlace(t *testing.T) {
	s, aead := zeroKeySealer()
	ctx := context.Background()
	cases := []struct{ eventType, data, present, absent string }{
		{"agent.created", `{"agent_id":3,"owner_id":7,"name":"Tutor","system_prompt":"p","role_description":null,"template_source":"t","is_active":true}`,
			`"template_source":"t"`, `"role_description"`},
		{"session.started", `{"session_id":12,"user_id":7,"title":"T","settings":{"setting_id":1,"agent_snapshot":null}}`,
			`"title":"T"`, `"settings.agent_snapshot"`},
	}
	for _, c := range cases {
		general := func(ctx context.Context, eventType string, data json.RawMessage, actor int64) (json.RawMessage, error) {
			return s.sealGeneral(ctx, eventType, rules[eventType], data, actor)
		}
		for name, seal := range map[string]func(context.Context, string, json.RawMessage, int64) (json.RawMessage, error){"scan": s.Seal, "general": general} {
			sealed, err := seal(ctx, c.eventType, json.RawMessage(c.data), 7)
			if err != nil {
				t.Fatal(err)
			}
			raw, _, ok := envelopeOf(sealed)
			if !ok {
				t.Fatalf("%s %s: no envelope in %s", name, c.eventType, sealed)
			}
			subject, ct, err := parseEnvelope(raw)
			if err != nil {
				t.Fatal(err)
			}
			n := aead.NonceSize()
			plain, err := aead.Open(nil, ct[:n], ct[n:], additional(c.eventType, subject))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(plain), c.absent) || !strings.Contains(string(plain), c.present) {
				t.Errorf("%s %s: sealed values %s (want %s, and no %s)", name, c.eventType, plain, c.present, c.absent)
			}
			opened, err := s.Open(ctx, c.eventType, sealed)
			if err != nil {
				t.Fatal(err)
			}
			var want, got any
			_ = json.Unmarshal([]byte(c.data), &want)
			_ = json.Unmarshal(opened, &got)
			if !reflect.DeepEqual(want, got) {
				t.Errorf("%s %s: opens as %s, want %s", name, c.eventType, opened, c.data)
			}
		}
	}
}
