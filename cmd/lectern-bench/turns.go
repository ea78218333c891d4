package main

import (
	"fmt"
	"slices"
)

// turnRates are the rates inTurns measured: each kind's rate in each round.
type turnRates [][]float64

// mean is kind k's mean rate.
func (t turnRates) mean(k int) float64 {
	sum := 0.0
	for _, r := range t[k] {
		sum += r
	}
	return sum / float64(len(t[k]))
}

// means is each kind's mean rate.
func (t turnRates) means() []float64 {
	out := make([]float64, len(t))
	for k := range t {
		out[k] = t.mean(k)
	}
	return out
}

// spread tells how far the ratio of kind a to kind b ranged from round to
// round, and its median: the ratio of the means is the figure, and this
// says what one run of the machine's noise made of it.
func (t turnRates) spread(a, b int) string {
	ratios := make([]float64, len(t[a]))
	for r := range ratios {
		ratios[r] = t[a][r] / t[b][r]
	}
	slices.Sort(ratios)
	n := len(ratios)
	median := ratios[n/2]
	if n%2 == 0 {
		median = (ratios[n/2-1] + ratios[n/2]) / 2
	}
	return fmt.Sprintf("rounds %.2f-%.2f, median %.2f", ratios[0], ratios[n-1], median)
}

// inTurns measures each kind rounds times and returns every round's rates.
// The kinds take turns in an order that changes every round (turnOrder), so
// that each goes first (second, ...) as often as the others, and follows
// each other kind as often: in a run of clear against clear, whichever went
// second gained up to a tenth; a kind can leave work behind for the next
// (dirty pages, a vacuum, garbage); and a drift of the machine's speed
// weighs on all alike. Each kind is given the round.
func inTurns(rounds int, kinds ...func(round int) (float64, error)) (turnRates, error) {
	rates := make(turnRates, len(kinds))
	for k := range rates {
		rates[k] = make([]float64, rounds)
	}
	for round := range rounds {
		for _, k := range turnOrder(len(kinds), round) {
			rate, err := kinds[k](round)
			if err != nil {
				return nil, err
			}
			rates[k][round] = rate
		}
	}
	return rates, nil
}

// turnOrder is the order of n kinds in a round: the rows of a Williams
// square. Over n rounds (2n for an odd n) each kind takes each place as
// often as the others, and directly follows each other kind as often.
// (Rotating one order, as before, had each kind always follow the same one.)
func turnOrder(n, round int) []int {
	order := make([]int, n)
	for j := range order {
		// The first row is 0, 1, n-1, 2, n-2, ...; each next row adds one.
		k := (j + 1) / 2
		if j%2 == 0 && j > 0 {
			k = n - j/2
		}
		order[j] = (k + round) % n
	}
	if n%2 == 1 && round/n%2 == 1 {
		slices.Reverse(order) // an odd square is balanced with its reverse
	}
	return order
}
