// Package aggregates holds the pure decision code of every aggregate: decide
// turns state and a command into events (or a business error), evolve applies
// an event to state. No I/O happens here.
package aggregates

// Patch is one field of a merge update: Set false leaves the field as it is.
type Patch[T any] struct {
	Set   bool
	Value T
}

// Set returns a patch that sets the field to v.
func Set[T any](v T) Patch[T] { return Patch[T]{Set: true, Value: v} }

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
