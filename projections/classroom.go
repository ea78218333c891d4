package projections

// ClassroomProjections project courses, classes and enrollments.
func ClassroomProjections() []Projection { return nil }
