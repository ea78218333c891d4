package downstream_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"

	"lectern/downstream"
	"lectern/events"
)

func TestEncode(t *testing.T) {
	capacity := int64(30)
	course := int64(4)
	e := events.ClassCreated{ClassID: 3, OrgID: 1, PartnerID: 2, CourseID: &course, Name: "Algebra A", Status: "planned",
		Capacity: &capacity, AllowedModelIDs: []int64{}, CreatedBy: 7}
	m := events.Meta{EventID: "0193a1f2-7c1e-7d3a-9b1e-1f2a3b4c5d6e", StreamID: "class-3", Version: 1, Position: "812-5",
		RecordedAt: time.Date(2026, 11, 21, 10, 4, 5, 123456000, time.UTC), UserID: 7}
	ce, err := downstream.Encode(m, e)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := downstream.Message(ce)
	if err != nil {
		t.Fatal(err)
	}
	if msg.UUID != m.EventID || msg.Metadata.Get("content-type") != "application/cloudevents+json" {
		t.Errorf("message uuid %s metadata %v", msg.UUID, msg.Metadata)
	}
	var got map[string]any
	if err := json.Unmarshal(msg.Payload, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"specversion":     "1.0",
		"id":              "0193a1f2-7c1e-7d3a-9b1e-1f2a3b4c5d6e",
		"source":          "/lectern",
		"type":            "lectern.class.created",
		"subject":         "class-3",
		"time":            "2026-11-21T10:04:05.123456Z",
		"datacontenttype": "application/json",
		"streamversion":   float64(1),
		"schemaversion":   float64(1),
		"data": map[string]any{
			"class_id": float64(3), "org_id": float64(1), "partner_id": float64(2), "course_id": float64(4), "name": "Algebra A",
			"description": nil, "status": "planned", "start_at": nil, "end_at": nil, "capacity": float64(30), "timezone": nil,
			"location": nil, "online_url": nil, "invite_only": false, "primary_model_id": nil, "allowed_model_ids": []any{},
			"created_by": float64(7),
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CloudEvent\n%s\nwant\n%v", msg.Payload, want)
	}

	// A consumer with the CloudEvents SDK reads it back.
	var back cloudevents.Event
	if err := json.Unmarshal(msg.Payload, &back); err != nil {
		t.Fatal(err)
	}
	var data events.ClassCreated
	if err := back.DataAs(&data); err != nil || !reflect.DeepEqual(data, e) {
		t.Fatalf("data read back %+v (%v), want %+v", data, err, e)
	}
}

// A user's erasure goes out as whom to erase: who erased them stays in.
func TestEncodeUserErased(t *testing.T) {
	m := events.Meta{EventID: "0193a1f2-7c1e-7d3a-9b1e-1f2a3b4c5d6f", StreamID: "user-7", Version: 3,
		RecordedAt: time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC), UserID: 1}
	ce, err := downstream.Encode(m, events.UserErased{UserID: 7, Actor: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ce.Type() != "lectern.user.erased" || ce.Subject() != "user-7" || ce.ID() != m.EventID {
		t.Errorf("type %s subject %s id %s", ce.Type(), ce.Subject(), ce.ID())
	}
	if got := string(ce.Data()); got != `{"user_id":7}` {
		t.Errorf("data %s, want {\"user_id\":7}", got)
	}
}

func TestEncodeRefusesAnEventWithoutID(t *testing.T) {
	_, err := downstream.Encode(events.Meta{StreamID: "course-1", Version: 1, RecordedAt: time.Now()}, events.CourseCreated{CourseID: 1})
	if err == nil {
		t.Fatal("an event without an id was encoded; consumers could not deduplicate it")
	}
}

// The forwarder publishes every event type of the class, course, partner and
// enrollment streams, and user.erased (subscribers erase what they hold of
// the user), and no other: a new event type of these categories cannot be
// forgotten.
func TestForwardsEveryClassroomEventType(t *testing.T) {
	f, err := downstream.New(downstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var handled []string
	for _, h := range f.Projection().Handlers {
		handled = append(handled, h.NewEvent().(events.Event).EventType())
	}
	slices.Sort(handled)

	// Every `EventType() string { return "category.name" }` in package events.
	files, err := filepath.Glob("../events/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "EventType" || len(fn.Body.List) != 1 {
				continue
			}
			ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
			if !ok || len(ret.Results) != 1 {
				continue
			}
			lit, ok := ret.Results[0].(*ast.BasicLit)
			if !ok {
				continue
			}
			name, _ := strconv.Unquote(lit.Value)
			switch strings.SplitN(name, ".", 2)[0] {
			case events.CategoryClass, events.CategoryCourse, events.CategoryPartner, events.CategoryEnrollment:
				declared = append(declared, name)
			}
		}
	}
	declared = append(declared, events.UserErased{}.EventType())
	slices.Sort(declared)
	if len(declared) == 0 || !slices.Equal(handled, declared) {
		t.Fatalf("forwarded %v\nclassroom event types %v", handled, declared)
	}
}

// A traced event's CloudEvent carries its trace context as the CloudEvents
// distributed tracing extension: traceparent, and tracestate when there is
// one.
func TestEncodeTraced(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, state := range []string{"", "lectern=1"} {
		m := events.Meta{EventID: "0193a1f2-7c1e-7d3a-9b1e-1f2a3b4c5d70", StreamID: "course-4", Version: 1,
			RecordedAt: time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC), TraceParent: parent, TraceState: state}
		ce, err := downstream.Encode(m, events.CourseCreated{CourseID: 4, PartnerID: 2, Title: "Algebra"})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := downstream.Message(ce)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(msg.Payload, &got); err != nil {
			t.Fatal(err)
		}
		if got["traceparent"] != parent {
			t.Errorf("traceparent = %v, want %s", got["traceparent"], parent)
		}
		if ts, ok := got["tracestate"]; (state == "" && ok) || (state != "" && ts != state) {
			t.Errorf("tracestate = %v (present %v), want %q", ts, ok, state)
		}
		var back cloudevents.Event
		if err := json.Unmarshal(msg.Payload, &back); err != nil {
			t.Fatal(err)
		}
		if ext, ok := extensions.GetDistributedTracingExtension(back); !ok || ext.TraceParent != parent || ext.TraceState != state {
			t.Errorf("the SDK reads back %+v (%v), want %s %q", ext, ok, parent, state)
		}
	}
}
