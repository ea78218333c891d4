package api

// knowledgeOperations are the knowledge documents.
func (s *Server) knowledgeOperations() []operation { return nil }

// knowledgeComponents are their response schemas.
func knowledgeComponents() schema { return schema{} }
