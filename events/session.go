package events

// registerSessions registers the events of practice sessions.
func registerSessions(r *Registry) {}
