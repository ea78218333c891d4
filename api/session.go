package api

// sessionOperations are the practice sessions.
func (s *Server) sessionOperations() []operation { return nil }

// sessionComponents are their response schemas.
func sessionComponents() schema { return schema{} }
