package projections

// KnowledgeProjections project knowledge documents.
func KnowledgeProjections() []Projection { return nil }
