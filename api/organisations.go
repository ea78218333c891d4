package api

// organisationOperations are organisations, partners and promotion requests.
func (s *Server) organisationOperations() []operation { return nil }

// organisationComponents are their response schemas.
func organisationComponents() schema { return schema{} }
