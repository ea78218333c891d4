package events

// registerClassroom registers the events of courses, classes (with invite
// codes) and enrollments.
func registerClassroom(r *Registry) {}
