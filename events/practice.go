package events

// registerPractice registers the events of few-shot examples and practice sessions.
func registerPractice(r *Registry) {
	register[FewShotCreated](r)
	register[FewShotUpdated](r)
}
