package personal

import (
	"bytes"
	"context"
	"crypto/cipher"
	"encoding/json"
	"errors"
	"reflect"
)

// SealStored seals the data of a stored event as appending it now would:
// for events stored before sealing (their personal fields in clear), and
// for events sealed before one of their fields joined the table (that field
// in clear beside the sealed ones), which are opened and sealed whole
// again. changed is false for data that holds nothing personal in clear.
// The values of a subject erased since are sealed under a key made for them
// and forgotten at once: they read as placeholders, as the subject's other
// events do. actor is the event's acting user (its metadata's).
func (s *Sealer) SealStored(ctx context.Context, eventType string, data json.RawMessage, actor int64) (json.RawMessage, bool, error) {
	if !Holds(eventType) {
		return data, false, nil
	}
	wasSealed, opened := Sealed(eventType, data), data
	if wasSealed {
		var err error
		if opened, err = s.Open(ctx, eventType, data); err != nil {
			return nil, false, err
		}
	}
	sealed, err := s.Seal(ctx, eventType, opened, actor)
	if errors.Is(err, ErrErased) {
		sealed, err = NewSealer(forgotten{}).Seal(ctx, eventType, opened, actor)
	}
	if err != nil {
		return nil, false, err
	}
	if wasSealed && sameInClear(data, sealed) {
		return data, false, nil // nothing personal beside its sealed values
	}
	return sealed, true, nil
}

// sameInClear reports whether two sealed events read the same without
// their keys: the same members, "pii" aside, as JSON values (whatever their
// order and spelling).
func sameInClear(a, b []byte) bool {
	decode := func(data []byte) (map[string]any, bool) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var m map[string]any
		if d.Decode(&m) != nil {
			return nil, false
		}
		delete(m, "pii")
		return m, true
	}
	ma, okA := decode(a)
	mb, okB := decode(b)
	return okA && okB && reflect.DeepEqual(ma, mb)
}

// forgotten is a key source whose keys are made for one use and kept
// nowhere: what they seal no one can open.
type forgotten struct{}

func (forgotten) Key(context.Context, string, bool) (cipher.AEAD, error) {
	key, err := randomKey()
	if err != nil {
		return nil, err
	}
	defer clear(key) // the cipher keeps its own schedule
	return newAEAD(key)
}
