// Package downstream publishes the classroom's changes (class, course,
// partner and enrollment events), and users' erasures, to downstream systems
// as CloudEvents 1.0 JSON messages through Watermill: to a watermill-sql
// topic in PostgreSQL by default, or to NATS JetStream. docs/subscribing.md is its contract.
package downstream

import (
	"encoding/json"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"

	"lectern/events"
)

const (
	// Source is every message's CloudEvents source. Event ids are UUIDs,
	// unique on their own, so one source for the whole service keeps
	// (source, id) unique.
	Source = "/lectern"
	// TypePrefix precedes the stored event type name (docs/events.md) in
	// the CloudEvents type: "lectern.class.created".
	TypePrefix = "lectern."
	// ContentType is the message's content type: structured mode, the whole
	// CloudEvent is the payload.
	ContentType = "application/cloudevents+json"
	// MetaContentType is the Watermill metadata key (a NATS header) that
	// carries ContentType, as the CloudEvents NATS binding names it.
	MetaContentType = "content-type"

	// Extension attributes (CloudEvents names: lowercase alphanumerics).
	ExtStreamVersion = "streamversion" // the event's version in its stream: 1, 2, ...
	ExtSchemaVersion = "schemaversion" // the schema version of data
)

// Encode turns a stored event into its CloudEvent: the id is the event id
// (so consumers deduplicate re-deliveries by it), the subject is its stream
// (class-3), the time is when it was recorded, and data is the event in its
// current schema version (an older stored payload arrives upcast). An event
// whose append was traced carries its trace context in the traceparent and
// tracestate extensions.
func Encode(m events.Meta, e events.Event) (cloudevents.Event, error) {
	ce := cloudevents.New(cloudevents.CloudEventsVersionV1)
	ce.SetID(m.EventID)
	ce.SetSource(Source)
	ce.SetType(TypePrefix + e.EventType())
	ce.SetSubject(m.StreamID)
	ce.SetTime(m.RecordedAt.UTC())
	ce.SetExtension(ExtStreamVersion, m.Version)
	ce.SetExtension(ExtSchemaVersion, e.SchemaVersion())
	// The append's trace context, as the CloudEvents distributed tracing
	// extension carries it: a consumer's spans can link to the request
	// that caused the change.
	extensions.DistributedTracingExtension{TraceParent: m.TraceParent, TraceState: m.TraceState}.AddTracingAttributes(&ce)
	// The event itself, not its JSON bytes: the SDK would send bytes as
	// data_base64.
	if err := ce.SetData(cloudevents.ApplicationJSON, redact(e)); err != nil {
		return cloudevents.Event{}, fmt.Errorf("encode %s %s: %w", e.EventType(), m.EventID, err)
	}
	if err := ce.Validate(); err != nil {
		return cloudevents.Event{}, fmt.Errorf("cloudevent of %s %s: %w", e.EventType(), m.EventID, err)
	}
	return ce, nil
}

// Redacted stands for a secret left out of a published event.
const Redacted = "[redacted]"

// erasedUser is the data of a user.erased message: whom to erase. Who
// erased them (the event's actor) stays in the service.
type erasedUser struct {
	UserID int64 `json:"user_id"`
}

// erasedPartner is the data of a partner.erased message.
type erasedPartner struct {
	PartnerID int64 `json:"partner_id"`
}

// redact leaves out what must not leave the service: an invite code admits
// whoever holds it to its class, so downstream systems get its id only; and
// a partner's contact details are personal data, which a broker keeps for
// its retention and cannot erase, so downstream systems get the partner's
// ids and read the rest from the API (docs/privacy.md).
func redact(e events.Event) any {
	switch e := e.(type) {
	case events.UserErased:
		return erasedUser{UserID: e.UserID}
	case events.PartnerErased:
		return erasedPartner{PartnerID: e.PartnerID}
	case events.PartnerCreated:
		e.FullName, e.Email, e.Phone = Redacted, Redacted, nil
		return e
	case events.InviteCodeIssued:
		e.Code = Redacted
		return e
	case events.InviteCodeUsed:
		e.Code = Redacted
		return e
	case events.InviteCodeRevoked:
		e.Code = Redacted
		return e
	}
	return e
}

// Message wraps a CloudEvent in a Watermill message whose UUID is the event
// id: watermill-sql stores it in the uuid column, and on NATS it becomes the
// Nats-Msg-Id that JetStream deduplicates re-publishes by.
func Message(ce cloudevents.Event) (*message.Message, error) {
	payload, err := json.Marshal(ce)
	if err != nil {
		return nil, err
	}
	msg := message.NewMessage(ce.ID(), payload)
	msg.Metadata.Set(MetaContentType, ContentType)
	return msg, nil
}
