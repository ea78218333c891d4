// Package blobstest helps the tests of what sweeps document blobs
// (blobs.Sweep, and the janitor that runs it).
package blobstest

import "context"

// Hang is a check of documents (a blobs.Recorded) that hangs on one
// document until its context ends, as an event store that never answers
// would, and finds every other document not recorded.
type Hang struct {
	id   int64
	hung chan struct{}
}

// HangOn is a Hang on the document id.
func HangOn(id int64) *Hang { return &Hang{id: id, hung: make(chan struct{})} }

// Check is the check: pass it where a blobs.Recorded goes. It is asked
// about the document it hangs on once at most.
func (h *Hang) Check(ctx context.Context, id int64) (bool, error) {
	if id != h.id {
		return false, nil
	}
	close(h.hung)
	<-ctx.Done()
	return false, ctx.Err()
}

// Asked reports whether Check was asked about the document it hangs on.
func (h *Hang) Asked() bool {
	select {
	case <-h.hung:
		return true
	default:
		return false
	}
}
