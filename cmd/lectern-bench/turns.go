package main

import "slices"

// inTurns measures each kind rounds times and returns each one's mean. The
// kinds take turns in an order that changes every round (turnOrder), so
// that each goes first (second, ...) as often as the others, and follows
// each other kind as often: in a run of clear against clear, whichever went
// second gained up to a tenth; a kind can leave work behind for the next
// (dirty pages, a vacuum, garbage); and a drift of the machine's speed
// weighs on all alike. Each kind is given the round.
func inTurns(rounds int, kinds ...func(round int) (float64, error)) ([]float64, error) {
	means := make([]float64, len(kinds))
	for round := range rounds {
		for _, k := range turnOrder(len(kinds), round) {
			rate, err := kinds[k](round)
			if err != nil {
				return nil, err
			}
			means[k] += rate / float64(rounds)
		}
	}
	return means, nil
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
