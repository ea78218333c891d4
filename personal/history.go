package personal

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
)

// SealStored seals the data of an event stored before sealing (its personal
// fields in clear), as appending it now would: changed is false for data
// that holds nothing personal or is sealed already. The values of a subject
// erased since are sealed under a key made for them and forgotten at once:
// they read as placeholders, as the subject's other events do. actor is the
// event's acting user (its metadata's).
func (s *Sealer) SealStored(ctx context.Context, eventType string, data json.RawMessage, actor int64) (sealed json.RawMessage, changed bool, err error) {
	if !Holds(eventType) || Sealed(eventType, data) {
		return data, false, nil
	}
	sealed, err = s.Seal(ctx, eventType, data, actor)
	if errors.Is(err, ErrErased) {
		sealed, err = NewSealer(forgotten{}).Seal(ctx, eventType, data, actor)
	}
	if err != nil {
		return nil, false, err
	}
	return sealed, true, nil
}

// forgotten is a key source whose keys are made for one use and kept
// nowhere: what they seal no one can open.
type forgotten struct{}

func (forgotten) Key(context.Context, string, bool) (cipher.AEAD, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	defer clear(key) // the cipher keeps its own schedule
	return newAEAD(key)
}
