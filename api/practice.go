package api

// practiceOperations are few-shot examples and practice sessions.
func (s *Server) practiceOperations() []operation {
	return s.fewShotOperations()
}

// practiceComponents are their response schemas.
func practiceComponents() schema {
	return fewShotComponents()
}
