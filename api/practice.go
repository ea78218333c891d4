package api

import "maps"

// practiceOperations are few-shot examples and practice sessions.
func (s *Server) practiceOperations() []operation {
	return s.fewShotOperations()
}

// practiceComponents are their response schemas, and those of a streamed
// turn's events.
func practiceComponents() schema {
	out := fewShotComponents()
	maps.Copy(out, streamComponents())
	return out
}
