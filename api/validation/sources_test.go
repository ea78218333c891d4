package validation

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lectern/derrors"
)

func TestSourcesLoc(t *testing.T) {
	s := Sources{"course_id": "query", "session_id": "path"}
	cases := []struct {
		field string
		want  []any
	}{
		{"name", []any{"body", "name"}},
		{"model_names.1", []any{"body", "model_names", 1}},
		{"", []any{"body"}},
		{"course_id", []any{"query", "course_id"}},
		{"session_id", []any{"path", "session_id"}},
	}
	for _, tc := range cases {
		f := &derrors.FieldError{Field: tc.field}
		if diff := cmp.Diff(tc.want, s.Loc(f.Path())); diff != "" {
			t.Errorf("field %q (-want +got):\n%s", tc.field, diff)
		}
	}
	if diff := cmp.Diff([]any{"body", "course_id"}, Sources(nil).Loc([]any{"course_id"})); diff != "" {
		t.Errorf("no sources: every field is the body's (-want +got):\n%s", diff)
	}
}

func TestFieldItems(t *testing.T) {
	verbatim := func(f *derrors.FieldError) string { return f.Msg }
	loud := func(f *derrors.FieldError) string { return f.Msg + "!" }
	joined := errors.Join(
		derrors.InvalidField(derrors.Item("model_names", 1), "nope", "unknown model 'nope'"),
		errors.Join(derrors.InvalidField("class_id", int64(4), "not yours")),
	)
	t.Run("joined field errors, in order, at their sources", func(t *testing.T) {
		items, ok := FieldItems(WithSources(joined, Sources{"class_id": "query"}), loud)
		if !ok {
			t.Fatal("not field errors")
		}
		want := Errors{
			ValueError([]any{"body", "model_names", 1}, "nope", "unknown model 'nope'!"),
			ValueError([]any{"query", "class_id"}, int64(4), "not yours!"),
		}
		if diff := cmp.Diff(want, items, cmp.AllowUnexported(ErrorItem{})); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("the command as a whole is the body", func(t *testing.T) {
		items, _ := FieldItems(derrors.InvalidField("", nil, "say which"), verbatim)
		if diff := cmp.Diff(Errors{ValueError([]any{"body"}, nil, "say which")}, items, cmp.AllowUnexported(ErrorItem{})); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	for name, err := range map[string]error{
		"nil":                        nil,
		"another kind":               derrors.New(derrors.ErrConflict, "taken"),
		"a field error among others": errors.Join(joined, errors.New("boom")),
	} {
		t.Run(name+" is not field errors", func(t *testing.T) {
			if items, ok := FieldItems(WithSources(err, Sources{"x": "query"}), verbatim); ok || items != nil {
				t.Errorf("FieldItems = %v, %v", items, ok)
			}
		})
	}
	t.Run("sources survive wrapping", func(t *testing.T) {
		err := fmt.Errorf("create class: %w", WithSources(derrors.InvalidField("course_id", "7", "m"), Sources{"course_id": "query"}))
		var f *derrors.FieldError
		if !errors.As(err, &f) {
			t.Fatal("no field error")
		}
		if diff := cmp.Diff([]any{"query", "course_id"}, FieldItem(SourcesOf(err), f, f.Msg).Loc); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}
