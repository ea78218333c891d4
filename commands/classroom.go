package commands

// Classroom is the courses, classes, invite codes and enrollments use cases.
type Classroom struct{ d Deps }
