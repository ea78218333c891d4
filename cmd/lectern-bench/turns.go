package main

// inTurns measures each kind rounds times and returns each one's mean. The
// kinds take turns, the order rotated every round, so that each goes first
// (second, ...) as often as the others: in a run of clear against clear,
// whichever went second gained up to a tenth, and a drift of the machine's
// speed weighs on all alike. Each kind is given the round.
func inTurns(rounds int, kinds ...func(round int) (float64, error)) ([]float64, error) {
	means := make([]float64, len(kinds))
	for round := range rounds {
		for i := range kinds {
			k := (i + round) % len(kinds)
			rate, err := kinds[k](round)
			if err != nil {
				return nil, err
			}
			means[k] += rate / float64(rounds)
		}
	}
	return means, nil
}
