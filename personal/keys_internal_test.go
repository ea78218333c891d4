package personal

import (
	"context"
	"crypto/cipher"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The cache holds at most maxCached keys: one more starts it afresh with
// that one, and a key no longer cached is asked of the database again.
func TestKeyCacheIsBounded(t *testing.T) {
	k, aead := cacheOnlyKeys(t)
	subject := func(i int) string { return "user-" + strconv.Itoa(i) }
	for i := range maxCached {
		k.remember(subject(i), aead, k.forgotten.Load())
	}
	k.remember(subject(0), aead, k.forgotten.Load()) // cached already: not one more
	if _, ok := k.lookup(subject(0)); !ok || k.cached != maxCached {
		t.Fatalf("after %d keys and one again: %d cached, the first cached %v", maxCached, k.cached, ok)
	}
	k.remember(subject(maxCached), aead, k.forgotten.Load())
	if k.cached != 1 {
		t.Errorf("after one key more than the cache holds: %d cached, want 1 (it starts afresh)", k.cached)
	}
	if _, ok := k.lookup(subject(maxCached)); !ok {
		t.Error("the key that overflowed the cache is not cached")
	}
	if _, ok := k.lookup(subject(0)); ok {
		t.Error("a key from before the cache started afresh is still cached")
	}
}

// Readers look keys up while another goroutine caches and erases others
// (run with -race): the cache is read without a lock.
func TestKeyCacheReadersBesideWriters(t *testing.T) {
	k, aead := cacheOnlyKeys(t)
	k.remember("user-1", aead, k.forgotten.Load())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 10_000 {
				if got, err := k.Key(context.Background(), "user-1", false); err != nil || got != aead {
					t.Errorf("user-1's key: %v, %v", got, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 10_000 {
			s := "user-" + strconv.Itoa(i+2)
			k.remember(s, aead, k.forgotten.Load())
			k.mu.Lock()
			k.storeLocked(s, &cachedKey{}) // a tombstone, as Erase leaves
			k.mu.Unlock()
			k.remember(s, aead, k.forgotten.Load()) // does not replace it
			if c, _ := k.lookup(s); c.aead != nil {
				t.Errorf("%s: a key replaced its tombstone", s)
				return
			}
		}
	})
	wg.Wait()
}

// A key loaded before a Forget (another replica's erasure, heard while the
// load was under way) is not cached after it; a tombstone is, and a key
// loaded after it too.
func TestAKeyLoadedBeforeAForgetIsNotCached(t *testing.T) {
	k, aead := cacheOnlyKeys(t)
	before := k.forgotten.Load()
	k.Forget("user-1")
	k.remember("user-1", aead, before)
	if _, ok := k.lookup("user-1"); ok {
		t.Error("a key loaded before the Forget was cached")
	}
	k.remember("user-2", nil, before)
	if c, ok := k.lookup("user-2"); !ok || c.aead != nil {
		t.Error("a tombstone loaded before the Forget was not cached")
	}
	k.remember("user-1", aead, k.forgotten.Load())
	if c, ok := k.lookup("user-1"); !ok || c.aead != aead {
		t.Error("a key loaded after the Forget was not cached")
	}
	k.ForgetAll()
	if _, ok := k.lookup("user-1"); ok || k.cached != 0 {
		t.Errorf("ForgetAll left user-1 (%d cached)", k.cached)
	}
}

// cacheOnlyKeys is a key store with no database (a look-up past its cache
// would fail) and a key to cache in it.
func cacheOnlyKeys(t *testing.T) (*Keys, cipher.AEAD) {
	t.Helper()
	k, err := NewKeys(nil, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	aead, err := newAEAD(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	return k, aead
}

// Reading an erasure event forgets the subject's key once: a live key (or
// none cached, a load of it perhaps in flight) is forgotten; a tombstone
// cached already stays, and the process forgets nothing more for it.
func TestForgetErasedKeepsATombstone(t *testing.T) {
	k, aead := cacheOnlyKeys(t)
	k.remember("user-1", aead, k.forgotten.Load())
	k.ForgetErased("user-1")
	if _, ok := k.lookup("user-1"); ok || k.forgotten.Load() != 1 {
		t.Fatalf("a live key read erased: still cached %v, forgotten %d; want gone, 1", ok, k.forgotten.Load())
	}
	k.ForgetErased("user-2") // none cached: a load may be in flight
	if k.forgotten.Load() != 2 {
		t.Fatalf("nothing cached: forgotten %d, want 2", k.forgotten.Load())
	}
	k.remember("user-1", nil, k.forgotten.Load()) // the tombstone, loaded again
	k.ForgetErased("user-1")
	if c, ok := k.lookup("user-1"); !ok || c.aead != nil || k.forgotten.Load() != 2 {
		t.Errorf("a tombstone read erased again: cached %v, forgotten %d; want it kept, 2", ok, k.forgotten.Load())
	}
}

// A reader's memo of its last key serves only that subject of that store,
// and only until a key is taken away (Forget, ForgetAll, a tombstone cached
// by Erase or by a load, a key replaced) or its key is no longer current; a
// tombstone is remembered too.
func TestKeyMemoIsDroppedWithTheKey(t *testing.T) {
	ctx := context.Background()
	// keysWithMemo is a store with user-1's key cached, its clock, and a
	// reader's memo of the key.
	keysWithMemo := func(t *testing.T) (*Keys, cipher.AEAD, *time.Time, *KeyMemo) {
		t.Helper()
		k, aead := cacheOnlyKeys(t)
		now := time.Now()
		k.now = func() time.Time { return now }
		k.remember("user-1", aead, k.forgotten.Load())
		var m KeyMemo
		if got, err := k.KeyThrough(ctx, "user-1", &m); got != aead || err != nil {
			t.Fatalf("user-1's key: %v, %v", got, err)
		}
		if _, ok := k.fromMemo("user-1", &m); !ok {
			t.Fatal("no memo after a look-up")
		}
		return k, aead, &now, &m
	}

	k, aead, _, m := keysWithMemo(t)
	if got, err := k.KeyThrough(ctx, "user-1", m); got != aead || err != nil {
		t.Fatalf("through the memo: %v, %v", got, err)
	}
	other, _ := cacheOnlyKeys(t)
	if _, ok := k.fromMemo("user-2", m); ok {
		t.Error("the memo served another subject")
	}
	if _, ok := other.fromMemo("user-1", m); ok {
		t.Error("the memo served another store")
	}

	for name, drop := range map[string]func(k *Keys, aead cipher.AEAD, now *time.Time){
		"Forget of another subject": func(k *Keys, _ cipher.AEAD, _ *time.Time) { k.Forget("user-9") },
		"ForgetAll":                 func(k *Keys, _ cipher.AEAD, _ *time.Time) { k.ForgetAll() },
		"its key past CacheTTL":     func(_ *Keys, _ cipher.AEAD, now *time.Time) { *now = now.Add(CacheTTL) },
		"an Erase": func(k *Keys, _ cipher.AEAD, _ *time.Time) { // as Erase leaves the cache, without the database
			k.mu.Lock()
			k.storeLocked("user-1", &cachedKey{fetched: k.now()})
			k.mu.Unlock()
		},
		// Another reader (a page's prefetch) loads the tombstone of an
		// erasure made on another replica: a reader of the erasure event
		// then finds it cached and forgets nothing (ForgetErased).
		"a tombstone loaded in its place": func(k *Keys, _ cipher.AEAD, _ *time.Time) { k.remember("user-1", nil, k.forgotten.Load()) },
		"a tombstone loaded after the cache started afresh": func(k *Keys, _ cipher.AEAD, _ *time.Time) {
			k.mu.Lock()
			k.cache.Clear()
			k.cached = 0
			k.mu.Unlock()
			k.remember("user-1", nil, k.forgotten.Load())
		},
		"its key loaded again": func(k *Keys, aead cipher.AEAD, _ *time.Time) { k.remember("user-1", aead, k.forgotten.Load()) },
	} {
		k, aead, now, m := keysWithMemo(t)
		drop(k, aead, now)
		if _, ok := k.fromMemo("user-1", m); ok {
			t.Errorf("after %s, the memo still serves its key", name)
		}
	}

	k, _ = cacheOnlyKeys(t)
	k.mu.Lock()
	k.storeLocked("user-3", &cachedKey{fetched: k.now()}) // a tombstone
	k.mu.Unlock()
	var tm KeyMemo
	for range 2 { // the second through the memo
		if got, err := k.KeyThrough(ctx, "user-3", &tm); got != nil || !errors.Is(err, ErrErased) {
			t.Errorf("an erased subject: %v, %v; want ErrErased", got, err)
		}
		if _, ok := k.fromMemo("user-3", &tm); !ok {
			t.Error("the tombstone is not remembered")
		}
	}
}

// A decoder that makes its memo while Forget runs (the key still cached
// when it looks, gone when Forget returns) holds a stale memo once Forget
// has returned.
func TestNoMemoOfAKeyOutlivesItsForget(t *testing.T) {
	ctx := context.Background()
	k, aead := cacheOnlyKeys(t)
	const subject = "user-1"
	var dropped sync.Map // the cached keys each Forget dropped, once it returned
	stop := make(chan struct{})
	forgetting := make(chan struct{})
	go func() { // another replica's erasures heard, over and over
		defer close(forgetting)
		for {
			select {
			case <-stop:
				return
			default:
			}
			k.remember(subject, aead, k.forgotten.Load())
			c, _ := k.lookup(subject)
			k.Forget(subject)
			dropped.Store(c, true)
		}
	}()
	defer func() { close(stop); <-forgetting }()
	// With the count of drops taken before the key went, a memo of the
	// dropped key outlived its Forget within the first 40 000 rounds in
	// each of three runs.
	rounds := 200_000
	if testing.Short() {
		rounds = 50_000
	}
	for range rounds { // a decoder, one event at a time
		var m KeyMemo
		if !throughCache(ctx, k, subject, &m) || m.key == nil {
			continue
		}
		if _, gone := dropped.Load(m.key); gone {
			if _, ok := k.fromMemo(subject, &m); ok {
				t.Fatal("a memo of a key that Forget dropped still serves it after Forget returned")
			}
		}
	}
}

// A full cache that starts afresh drops its tombstones too: a key whose
// load began before the subject's erasure, refused while the tombstone
// was cached, is not cached once the cache has started afresh either.
func TestAKeyLoadedBeforeAnErasureIsNotCachedAfterTheCacheStartsAfresh(t *testing.T) {
	k, aead := cacheOnlyKeys(t)
	since := k.forgotten.Load() // the load of user-0's key begins
	k.mu.Lock()
	k.storeLocked("user-0", &cachedKey{fetched: k.now()}) // erased, as Erase leaves the cache
	k.mu.Unlock()
	for i := range maxCached { // the cache fills and starts afresh
		k.remember("user-"+strconv.Itoa(i+1), aead, k.forgotten.Load())
	}
	if _, ok := k.lookup("user-0"); ok {
		t.Fatal("the tombstone survived the cache starting afresh: the test proves nothing")
	}
	k.remember("user-0", aead, since) // the load ends
	if c, ok := k.lookup("user-0"); ok && c.aead != nil {
		t.Error("a key loaded before the erasure was cached after it")
	}
}

// A reader of an erasure event that finds the subject's tombstone cached
// forgets nothing (ForgetErased); by then no memo of the subject's live key
// may serve: a tombstone seen is one whose store made the memos stale.
func TestNoMemoOfAKeyOutlivesItsTombstoneSeenByForgetErased(t *testing.T) {
	ctx := context.Background()
	k, aead := cacheOnlyKeys(t)
	var current atomic.Pointer[string] // the subject the eraser is about to erase
	stop := make(chan struct{})
	erasing := make(chan struct{})
	go func() { // erasures, each loading a tombstone over a live key
		defer close(erasing)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			subject := "user-" + strconv.Itoa(i%(maxCached/2))
			k.Forget(subject) // the last lap's tombstone
			k.remember(subject, aead, k.forgotten.Load())
			current.Store(&subject)
			for range i % 64 { // let the reader make its memo, sometimes
				runtime.Gosched()
			}
			k.remember(subject, nil, k.forgotten.Load())
		}
	}()
	defer func() { close(stop); <-erasing }()
	rounds := 500_000
	if testing.Short() {
		rounds = 100_000
	}
	for range rounds { // a reader of the log: an event, then the erasure
		s := current.Load()
		if s == nil {
			continue
		}
		subject := *s
		var m KeyMemo
		if !throughCache(ctx, k, subject, &m) || m.key == nil || m.key.aead == nil {
			continue
		}
		k.ForgetErased(subject)
		if got, ok := k.fromMemo(subject, &m); ok && got.aead != nil {
			t.Fatal("after ForgetErased, a memo of the subject's live key still serves it")
		}
	}
}

// throughCache is k.KeyThrough, false where the key is not cached: a store
// of cacheOnlyKeys has no database to load it from.
func throughCache(ctx context.Context, k *Keys, subject string, m *KeyMemo) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, err := k.KeyThrough(ctx, subject, m)
	return err == nil
}
