package knowledge

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A reader's documents are read one at a time: the next waits for the
// turn of the last (and is refused once its caller stops waiting), while
// another reader's takes its own at once; a turn given back is free again,
// and nothing is kept of readers no one waits for.
func TestOneReadersDocumentsLeaveTheSlotToOthers(t *testing.T) {
	ts := &turns{m: map[int64]*turn{}}
	ctx := context.Background()
	first, err := ts.take(ctx, 7)
	if err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := ts.take(waiting, 7); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reader 7's second document while its first is read: %v; want it to wait", err)
	}
	other, err := ts.take(ctx, 8)
	if err != nil {
		t.Fatalf("reader 8 while reader 7's document is read: %v", err)
	}
	next := make(chan error, 1)
	go func() {
		release, err := ts.take(ctx, 7)
		if err == nil {
			release()
		}
		next <- err
	}()
	first()
	if err := <-next; err != nil {
		t.Fatalf("reader 7's next document once its first was read: %v", err)
	}
	other()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.m) != 0 {
		t.Errorf("%d readers kept with nobody waiting", len(ts.m))
	}
}
