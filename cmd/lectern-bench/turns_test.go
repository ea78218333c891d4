package main

import (
	"slices"
	"testing"
)

// Over a full square, every kind takes every place equally often and
// directly follows every other kind equally often.
func TestTurnOrderIsBalanced(t *testing.T) {
	for n := 1; n <= 7; n++ {
		rounds := n
		if n%2 == 1 {
			rounds = 2 * n
		}
		places := make(map[[2]int]int)  // (kind, place)
		follows := make(map[[2]int]int) // (before, after)
		for r := range rounds {
			order := turnOrder(n, r)
			sorted := slices.Sorted(slices.Values(order))
			for i, k := range sorted {
				if k != i {
					t.Fatalf("n=%d round %d: %v is not an order of the kinds", n, r, order)
				}
			}
			for i, k := range order {
				places[[2]int{k, i}]++
				if i > 0 {
					follows[[2]int{order[i-1], k}]++
				}
			}
		}
		for k := range n {
			for i := range n {
				if got, want := places[[2]int{k, i}], rounds/n; got != want {
					t.Errorf("n=%d: kind %d in place %d %d times, want %d", n, k, i, got, want)
				}
				if k == i {
					continue
				}
				if got, want := follows[[2]int{k, i}], rounds/n; got != want {
					t.Errorf("n=%d: kind %d after kind %d %d times, want %d", n, i, k, got, want)
				}
			}
		}
	}
}

// With two kinds, the order alternates, as it always did.
func TestTurnOrderOfTwoAlternates(t *testing.T) {
	for r, want := range [][]int{{0, 1}, {1, 0}, {0, 1}, {1, 0}} {
		if got := turnOrder(2, r); !slices.Equal(got, want) {
			t.Errorf("round %d: %v, want %v", r, got, want)
		}
	}
}

// The spread is of each round's own ratio, sorted, with the median of an
// even count the mean of the middle two.
func TestSpreadOfRoundRatios(t *testing.T) {
	rates := turnRates{{90, 80, 100, 70}, {100, 100, 100, 100}}
	if got, want := rates.spread(0, 1), "rounds 0.70-1.00, median 0.85"; got != want {
		t.Errorf("spread: %q, want %q", got, want)
	}
	if got := rates.mean(0); got != 85 {
		t.Errorf("mean: %v, want 85", got)
	}
	odd := turnRates{{90, 80, 100}, {100, 100, 100}}
	if got, want := odd.spread(0, 1), "rounds 0.80-1.00, median 0.90"; got != want {
		t.Errorf("spread of three: %q, want %q", got, want)
	}
}
