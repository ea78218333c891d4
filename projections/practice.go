package projections

// PracticeProjections project few-shot examples and practice sessions.
func PracticeProjections() []Projection { return nil }
