package validation

import (
	"errors"

	"lectern/derrors"
)

// Sources says where a request carried the fields of the command a handler
// built from it, for the fields that did not come in the body: field name to
// "query" or "path". The domain names fields (derrors.FieldError); only the
// handler that read them knows where they were, so it alone can place a
// domain error in the request.
type Sources map[string]string

// Loc places a domain field path (derrors.FieldError.Path) in the request:
// under the field's source, the body unless s says otherwise. An empty path
// is the body as a whole.
func (s Sources) Loc(path []any) []any {
	src := "body"
	if len(path) > 0 {
		if name, ok := path[0].(string); ok && s[name] != "" {
			src = s[name]
		}
	}
	return append([]any{src}, path...)
}

// sourcedError is a handler's error with the Sources of its command.
type sourcedError struct {
	err     error
	sources Sources
}

func (e *sourcedError) Error() string { return e.err.Error() }
func (e *sourcedError) Unwrap() error { return e.err }

// WithSources records on a command's error where the request carried the
// command's fields that were not in its body; FieldItems reads it. A nil
// err stays nil, and so does every err when s is empty.
func WithSources(err error, s Sources) error {
	if err == nil || len(s) == 0 {
		return err
	}
	return &sourcedError{err: err, sources: s}
}

// FieldItems renders err's domain field errors (one, or several joined with
// errors.Join, nested or not) as value_error items, in order, at their
// request locations, worded by msg. ok is false when err holds anything but
// field errors.
func FieldItems(err error, msg func(*derrors.FieldError) string) (items Errors, ok bool) {
	sources := SourcesOf(err)
	var collect func(error) bool
	collect = func(e error) bool {
		// A walk of the tree node by node: errors.As would skip to a
		// sourcedError anywhere below.
		if s, ok := e.(*sourcedError); ok { //nolint:errorlint // see above
			return collect(s.err)
		}
		if joined, ok := e.(interface{ Unwrap() []error }); ok {
			for _, inner := range joined.Unwrap() {
				if !collect(inner) {
					return false
				}
			}
			return true
		}
		var field *derrors.FieldError
		if !errors.As(e, &field) {
			return false
		}
		items = append(items, FieldItem(sources, field, msg(field)))
		return true
	}
	if err == nil || !collect(err) {
		return nil, false
	}
	return items, true
}

// FieldItem renders one domain field error as a value_error at its request
// location, with the text msg.
func FieldItem(s Sources, f *derrors.FieldError, msg string) ErrorItem {
	return ValueError(s.Loc(f.Path()), f.Input, msg)
}

// SourcesOf returns the Sources recorded on err (WithSources), or none.
func SourcesOf(err error) Sources {
	var s *sourcedError
	if errors.As(err, &s) {
		return s.sources
	}
	return nil
}
