package events

// registerKnowledge registers the events of knowledge documents.
func registerKnowledge(r *Registry) {}
