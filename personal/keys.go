package personal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Keys are the subjects' data keys, in PostgreSQL (subject_keys), each
// wrapped (AES-256-GCM) by the master key, LECTERN_DATA_KEY. Unwrapped keys
// are cached for CacheTTL. An erasure on this process takes effect at once;
// one on another replica as soon as its notification (ErasuresChannel)
// reaches this one and Forget drops the key, and within CacheTTL if it is
// never heard.
type Keys struct {
	db     *pgxpool.Pool
	master cipher.AEAD
	// previous is the master key being rotated away from (rotate.go): keys
	// it wrapped are read until Rewrap wraps them under master. Nil
	// outside a rotation.
	previous cipher.AEAD
	now      func() time.Time

	// cache holds the subjects' keys by subject (*cachedKey). Readers,
	// once per event they open, and side by side, read it without a lock:
	// a read lock's shared counter, written by every reader, cost each
	// look-up more than the look-up itself. mu serialises its writers.
	cache  sync.Map
	mu     sync.Mutex
	cached int // entries in cache, under mu
	// forgotten counts Forget's calls: a key loaded before one is not
	// cached after it (it may be the key Forget was told is erased).
	forgotten atomic.Uint64
	// dropped counts what takes a key away (Forget, ForgetAll, a tombstone
	// cached, a key replaced): a memo made before one is stale (KeyMemo).
	dropped atomic.Uint64
}

// ErasuresChannel is the PostgreSQL notification channel on which Erase
// names the subject it erased, when its erasure commits: every process
// listening drops its cached key at once (FollowErasures).
const ErasuresChannel = "lectern_erasures"

type cachedKey struct {
	aead    cipher.AEAD // nil: erased (a tombstone, which never changes)
	fetched time.Time
}

// current reports whether c answers a look-up at now without asking the
// database: a tombstone always does, a key for CacheTTL.
func (c *cachedKey) current(now time.Time) bool {
	return c.aead == nil || now.Sub(c.fetched) < CacheTTL
}

// CacheTTL bounds how long a replica may use a key another replica erased.
const CacheTTL = 5 * time.Second

// lookupTimeout bounds a key look-up in the database when the caller set
// no deadline: a cached key needs none, and readers that open an event at a
// time (a replay's decoders) pass context.Background() rather than set up a
// deadline for every event.
const lookupTimeout = 10 * time.Second

// maxCached bounds the cache; past it, it starts afresh.
const maxCached = 100_000

// NewKeys returns the key store of db under the 32-byte master key.
func NewKeys(db *pgxpool.Pool, master []byte) (*Keys, error) {
	return NewRotatingKeys(db, master, nil)
}

// NewRotatingKeys is NewKeys during a rotation of the master key: keys
// wrapped by previous (the master key before, 32 bytes) are read too, and
// Rewrap wraps them under master. Keys are always made under master. With
// previous nil, it is NewKeys.
func NewRotatingKeys(db *pgxpool.Pool, master, previous []byte) (*Keys, error) {
	aead, err := masterAEAD(master)
	if err != nil {
		return nil, err
	}
	k := &Keys{db: db, master: aead, now: time.Now}
	if previous != nil {
		if k.previous, err = masterAEAD(previous); err != nil {
			return nil, fmt.Errorf("%w (the previous one)", err)
		}
	}
	return k, nil
}

// KeyID names a master key without revealing it: operators compare the ids
// that `lectern keys rotate` and each replica's log print.
func KeyID(key []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("lectern master key id"))
	return hex.EncodeToString(mac.Sum(nil)[:8])
}

func masterAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("personal: the data key must be 32 bytes, not %d", len(key))
	}
	return newAEAD(key)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Key implements KeySource.
func (k *Keys) Key(ctx context.Context, subject string, create bool) (cipher.AEAD, error) {
	if c, ok := k.lookup(subject); ok && c.current(k.now()) {
		return c.open()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
	}
	since := k.forgotten.Load()
	wrapped, err := k.load(ctx, subject)
	if errors.Is(err, pgx.ErrNoRows) && create {
		wrapped, err = k.create(ctx, subject)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrErased // never had one: nothing of it can be read
	}
	if err != nil {
		return nil, err
	}
	if wrapped == nil {
		k.remember(subject, nil, since) // erased: a tombstone, cached for good
		return nil, ErrErased
	}
	aead, err := k.unwrap(subject, wrapped)
	if err != nil {
		return nil, err
	}
	k.remember(subject, aead, since)
	return aead, nil
}

// A KeyMemo remembers the last key a reader was given (Keys.KeyThrough):
// a subject's events come in runs in the log, and a replay's look-up in the
// shared cache, made once the page's events have pushed the cache out of
// the CPU's, cost it about as much as decrypting the event. A memo is a
// reader's own (not shared between goroutines); its zero value is empty.
type KeyMemo struct {
	keys    *Keys
	subject string
	key     *cachedKey
	dropped uint64 // Keys.dropped when it was made
}

// KeyThrough is Key (create false) through m: the memo's key when it is of
// subject, no key was taken away since it was made and it is current, else
// the cache's or the database's, which m then remembers.
func (k *Keys) KeyThrough(ctx context.Context, subject string, m *KeyMemo) (cipher.AEAD, error) {
	if c, ok := k.fromMemo(subject, m); ok {
		return c.open()
	}
	dropped := k.dropped.Load() // before the look-up: a drop after it makes the memo stale
	aead, err := k.Key(ctx, subject, false)
	if err != nil && !errors.Is(err, ErrErased) {
		return nil, err
	}
	if c, ok := k.lookup(subject); ok {
		*m = KeyMemo{keys: k, subject: subject, key: c, dropped: dropped}
	}
	return aead, err
}

// fromMemo is m's key of subject, unless m is another subject's or another
// store's, or its key was taken away since or is no longer current.
func (k *Keys) fromMemo(subject string, m *KeyMemo) (*cachedKey, bool) {
	if m.keys != k || m.subject != subject || m.dropped != k.dropped.Load() || !m.key.current(k.now()) {
		return nil, false
	}
	return m.key, true
}

// open is the cached key's AEAD, or ErrErased for a tombstone.
func (c *cachedKey) open() (cipher.AEAD, error) {
	if c.aead == nil {
		return nil, ErrErased
	}
	return c.aead, nil
}

// checkSubject names the row of subject_keys that ties the database to its
// master key: a random key wrapped by it, which opens nothing. No subject
// is named so (subjects are "user-7", "partner-3").
const checkSubject = "$master"

// Verify checks that the master key (or, during a rotation, the previous
// one) is the database's: a process given another master key would read
// no personal field, and seal new subjects' fields under keys that no other
// process can open. The first key verified on a database claims it (the
// check row), so that a key file made afresh under a misspelt path is
// refused even before any personal field is sealed (a database new, or
// upgraded from before sealing); a database from before the check row is
// checked against its first subject key, then claimed.
func (k *Keys) Verify(ctx context.Context) error {
	wrapped, err := k.load(ctx, checkSubject)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return nil // not migrated yet: the process that migrates verifies
	case errors.Is(err, pgx.ErrNoRows):
		if err := k.verifyFirstSubject(ctx); err != nil {
			return err
		}
		if wrapped, err = k.create(ctx, checkSubject); err != nil { // or another process's, made first
			return fmt.Errorf("personal: claim the database for the master key: %w", err)
		}
	case err != nil:
		return fmt.Errorf("personal: read the master key's check: %w", err)
	}
	return k.opens(checkSubject, wrapped)
}

// verifyFirstSubject checks the master key against the database's first
// subject key, if it has one.
func (k *Keys) verifyFirstSubject(ctx context.Context) error {
	var subject string
	var wrapped []byte
	err := k.db.QueryRow(ctx, `SELECT subject, wrapped FROM subject_keys WHERE wrapped IS NOT NULL AND subject <> $1
		ORDER BY subject LIMIT 1`, checkSubject).Scan(&subject, &wrapped)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("personal: read a subject key to check the master key: %w", err)
	}
	return k.opens(subject, wrapped)
}

// opens refuses a master key that opens neither subject's wrapped key.
func (k *Keys) opens(subject string, wrapped []byte) error {
	raw, _, err := k.unwrapRaw(subject, wrapped)
	if err != nil {
		return fmt.Errorf("the master key of personal data does not open this database's subject keys: %w", err)
	}
	clear(raw)
	return nil
}

// unwrap opens the subject's wrapped key under the master key, or, during
// a rotation, the previous one.
func (k *Keys) unwrap(subject string, wrapped []byte) (cipher.AEAD, error) {
	raw, _, err := k.unwrapRaw(subject, wrapped)
	if err != nil {
		return nil, err
	}
	defer clear(raw) // the cipher keeps its own schedule
	return newAEAD(raw)
}

// unwrapRaw is unwrap's key as bytes, and whether the previous master key
// wrapped it.
func (k *Keys) unwrapRaw(subject string, wrapped []byte) (raw []byte, byPrevious bool, err error) {
	n := k.master.NonceSize()
	if len(wrapped) < n {
		return nil, false, fmt.Errorf("personal: the key of %s is damaged", subject)
	}
	raw, err = k.master.Open(nil, wrapped[:n], wrapped[n:], []byte(subject))
	if err != nil && k.previous != nil {
		if raw, perr := k.previous.Open(nil, wrapped[:n], wrapped[n:], []byte(subject)); perr == nil {
			return raw, true, nil
		}
		return nil, false, fmt.Errorf("personal: unwrap the key of %s (neither LECTERN_DATA_KEY nor LECTERN_DATA_KEY_PREVIOUS made it): %w", subject, err)
	}
	if err != nil {
		return nil, false, fmt.Errorf("personal: unwrap the key of %s (is LECTERN_DATA_KEY the one it was made with?): %w", subject, err)
	}
	return raw, false, nil
}

// remember caches subject's key (nil: erased), loaded when Forget had been
// called since times. A tombstone stays: a key loaded just before an Erase
// of this process must not be cached after it; nor a key loaded before a
// Forget (another process's erasure may have committed after the load).
func (k *Keys) remember(subject string, aead cipher.AEAD, since uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c, ok := k.lookup(subject); ok && c.aead == nil || aead != nil && k.forgotten.Load() != since {
		return
	}
	k.storeLocked(subject, &cachedKey{aead: aead, fetched: k.now()})
}

// lookup reads subject's cached key.
func (k *Keys) lookup(subject string) (*cachedKey, bool) {
	v, ok := k.cache.Load(subject)
	if !ok {
		return nil, false
	}
	return v.(*cachedKey), true
}

// storeLocked caches c as subject's key, under mu; a full cache starts
// afresh. A tombstone, or any key replacing another, makes every KeyMemo
// stale: a memo may hold the key it replaces (or, after the cache started
// afresh, the key of a subject the cache no longer holds), and a reader of
// an erasure that finds the tombstone cached forgets nothing more
// (ForgetErased).
func (k *Keys) storeLocked(subject string, c *cachedKey) {
	_, loaded := k.cache.Swap(subject, c)
	if loaded || c.aead == nil {
		k.dropped.Add(1)
	}
	if loaded {
		return
	}
	if k.cached++; k.cached > maxCached {
		// The tombstones go too: a key loaded before one of them was
		// cached must not be cached now in its place (remember).
		k.forgotten.Add(1)
		k.cache.Clear()
		k.cache.Store(subject, c)
		k.cached = 1
	}
}

// Prefetch loads the keys of subjects that are not cached, in one statement:
// a reader of a page of events (a replay, an export) asks once per page, not
// once per subject.
func (k *Keys) Prefetch(ctx context.Context, subjects []string) error {
	now := k.now()
	var missing []string
	seen := make(map[string]struct{}, len(subjects))
	for _, s := range subjects {
		if _, dup := seen[s]; dup {
			continue
		}
		seen[s] = struct{}{}
		if c, ok := k.lookup(s); !ok || !c.current(now) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	since := k.forgotten.Load()
	rows, err := k.db.Query(ctx, `SELECT subject, wrapped FROM subject_keys WHERE subject = ANY($1)`, missing)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var subject string
		var wrapped []byte
		if err := rows.Scan(&subject, &wrapped); err != nil {
			return err
		}
		if wrapped == nil {
			k.remember(subject, nil, since) // erased
			continue
		}
		if aead, err := k.unwrap(subject, wrapped); err == nil {
			k.remember(subject, aead, since)
		} // else Key, asked for it, says what is wrong
	}
	return rows.Err()
}

// load returns the subject's wrapped key: nil once erased.
func (k *Keys) load(ctx context.Context, subject string) ([]byte, error) {
	var wrapped []byte
	err := k.db.QueryRow(ctx, `SELECT wrapped FROM subject_keys WHERE subject = $1`, subject).Scan(&wrapped)
	return wrapped, err
}

// randomKey is a new subject key: 32 random bytes (AES-256).
func randomKey() ([]byte, error) {
	raw := make([]byte, 32)
	_, err := rand.Read(raw)
	return raw, err
}

// create makes the subject a key, unless another process just did.
func (k *Keys) create(ctx context.Context, subject string) ([]byte, error) {
	raw, err := randomKey()
	if err != nil {
		return nil, err
	}
	wrapped, err := k.wrap(subject, raw)
	if err != nil {
		return nil, err
	}
	if _, err := k.db.Exec(ctx, `INSERT INTO subject_keys (subject, wrapped) VALUES ($1, $2) ON CONFLICT (subject) DO NOTHING`,
		subject, wrapped); err != nil {
		return nil, err
	}
	return k.load(ctx, subject)
}

// wrap seals the subject's raw key under the master key, bound to the
// subject.
func (k *Keys) wrap(subject string, raw []byte) ([]byte, error) {
	nonce := make([]byte, k.master.NonceSize(), k.master.NonceSize()+len(raw)+k.master.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return k.master.Seal(nonce, nonce, raw, []byte(subject)), nil
}

// Erase deletes the subject's key, keeping a tombstone so that no new key is
// made for it: every sealed value of the subject, in every event, reads as
// its placeholder from now on. It first takes the subject's lock
// exclusively, so that a holder of a subject without a key row
// (HoldLiveKey) ends before the tombstone is written.
func (k *Keys) Erase(ctx context.Context, subject string) error {
	// The notification goes out when the erasure commits (ErasuresChannel).
	err := pgx.BeginFunc(ctx, k.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+subjectLockKey+`)`, subject); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH erased AS (
			INSERT INTO subject_keys (subject, wrapped, erased_at) VALUES ($1, NULL, now())
			ON CONFLICT (subject) DO UPDATE SET wrapped = NULL, erased_at = COALESCE(subject_keys.erased_at, now())
			RETURNING subject)
		SELECT pg_notify($2, subject) FROM erased`, subject, ErasuresChannel)
		return err
	})
	if err != nil {
		return fmt.Errorf("personal: erase %s: %w", subject, err)
	}
	k.mu.Lock()
	k.storeLocked(subject, &cachedKey{fetched: k.now()}) // a tombstone: see remember
	k.mu.Unlock()
	return nil
}

// rowQuerier is a transaction, as HoldLiveKey is given it.
type rowQuerier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// subjectLockKey is the key of subject $1's advisory lock, taken until the
// transaction ends: exclusive by Erase, shared by HoldLiveKey for a subject
// with no key row to lock.
const subjectLockKey = `hashtextextended('lectern subject key ' || $1::text, 0)`

// HoldLiveKey locks subject's key row in q, a transaction, until it ends,
// and fails with ErrSubjectErased when the subject was erased. A write of
// the subject's data outside the log (a document's text or its chunks, in
// clear; a dead letter's error) made in that transaction then either
// commits before an erasure's tombstone, which waits for it (Erase) and
// whose clean-up after the key goes finds it (commands.Erasure), or sees
// the tombstone and writes nothing. A process's cached key, which outlives
// an erasure on another replica for a moment, cannot slip a write past it.
// A subject with no key row (nothing of theirs was ever sealed) has no row
// to lock: the subject's advisory lock, shared, stands in for it, which
// Erase takes exclusively before it writes the tombstone.
func HoldLiveKey(ctx context.Context, q rowQuerier, subject string) error {
	erased, found, err := heldKey(ctx, q, subject)
	if err == nil && !found {
		var locked bool
		if err = q.QueryRow(ctx, `SELECT true FROM pg_advisory_xact_lock_shared(`+subjectLockKey+`)`, subject).Scan(&locked); err == nil {
			// An erasure that took the lock first has committed its
			// tombstone, which this statement sees (q is READ COMMITTED).
			erased, _, err = heldKey(ctx, q, subject)
		}
	}
	switch {
	case err != nil:
		return fmt.Errorf("personal: hold the key of %s: %w", subject, err)
	case erased:
		return ErrSubjectErased
	}
	return nil
}

// heldKey locks subject's key row in q, if there is one, and reports
// whether it is a tombstone.
func heldKey(ctx context.Context, q rowQuerier, subject string) (erased, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT wrapped IS NULL FROM subject_keys WHERE subject = $1 FOR SHARE`, subject).Scan(&erased)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	return erased, err == nil, err
}

// Forget drops subject's cached key, which another process erased: the
// next look-up asks the database. A tombstone goes too (it is found again).
func (k *Keys) Forget(subject string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forgotten.Add(1)
	if _, loaded := k.cache.LoadAndDelete(subject); loaded {
		k.cached--
	}
	// After the key is gone: a reader that read dropped before this made
	// its memo of the key before it went, and one that read it after finds
	// no key to remember (KeyThrough reads dropped before it looks up).
	k.dropped.Add(1)
}

// ForgetErased is Forget for a reader that has just read the subject's
// erasure in the log (Sealer.Opening): a tombstone cached already is the
// answer, and stays (nothing can replace one: see remember), so that every
// reader of the erasure event does not make the process forget once more.
func (k *Keys) ForgetErased(subject string) {
	// Under mu: a tombstone seen there has made every memo stale already
	// (storeLocked), where one seen between its store and that could leave
	// a memo of the live key serving the events after the erasure.
	k.mu.Lock()
	c, ok := k.lookup(subject)
	k.mu.Unlock()
	if ok && c.aead == nil {
		return
	}
	k.Forget(subject)
}

// A notifier calls notify with each notification on a channel, and resync
// each time it starts listening (projections.Listener).
type notifier interface {
	OnNotify(channel string, notify func(payload string), resync func())
}

// FollowErasures makes l's notifications of erasures (ErasuresChannel) drop
// the keys cached here: each subject named at once, and every key whenever
// l starts listening (again), as what was sent meanwhile went unheard.
func (k *Keys) FollowErasures(l notifier) { l.OnNotify(ErasuresChannel, k.Forget, k.ForgetAll) }

// ForgetAll drops every cached key: erasures may have gone unheard (the
// listener was not listening).
func (k *Keys) ForgetAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forgotten.Add(1)
	k.cache.Clear()
	k.cached = 0
	k.dropped.Add(1) // after the keys are gone: see Forget
}
