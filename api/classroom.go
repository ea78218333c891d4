package api

// classroomOperations are the courses, classes, invite codes and enrollments.
func (s *Server) classroomOperations() []operation { return nil }

// classroomComponents are their response schemas.
func classroomComponents() schema { return schema{} }
