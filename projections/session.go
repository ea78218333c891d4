package projections

// SessionProjections project practice sessions.
func SessionProjections() []Projection { return nil }
