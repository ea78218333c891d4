package validation

// Header validates one request header value (absent headers are not
// passed), with the error location ["header", name] as FastAPI reports it.
func Header(name, value string, f Field) (Values, Errors) {
	f.Name = name
	return validateParams("header", map[string]any{name: value}, []Field{f})
}

// MissingBody is the error for a request whose required body is absent.
func MissingBody() ErrorItem {
	return missingError([]any{"body"}, nil)
}
