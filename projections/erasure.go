package projections

import (
	"lectern/events"
	"lectern/personal"
)

// Erasure: user.erased, the one event whose handlers change rows of other
// streams than its own.
//
// Once a user is erased (package personal), every personal field of their
// events decodes as its placeholder. The user.erased event that follows has
// each read model write those placeholders over the rows it projected in
// clear, so that the live tables are what a replay of the log, which decodes
// the placeholders, builds. Each projection anonymises its own tables, with
// the values its handlers write for an event at its placeholders. They are
// constants: an erasure applied again, or to rows that hold placeholders
// already, changes nothing, and the erased user's events that come later
// decode as placeholders too, so where an erasure lands among them does not
// matter. No row's version or updated_at moves but the user's own: the event
// belongs to the user's stream, and moving another stream's row would make
// its next event look old.
//
// Such an event breaks the rule sets rely on (Handler: a handler touches its
// stream's rows only), so:
//   - groupSets applies it alone, in log order with every other event: a
//     live batch or a replay page never applies an event before it that the
//     log has after it, or the reverse;
//   - projections merged into one consumer group each bring a handler of it,
//     which the runner and the replay combine into one (handlersByType);
//   - in a replay's catch-up every loader that folds it anonymises the rows
//     it holds, and the handlers apply it again once the loaders have handed
//     all their rows over: rows a loader handed over before the erasure (a
//     session's responses) are out of its reach.

// crossStream reports whether events of type typ change rows of other
// streams than their own (see above).
func crossStream(typ string) bool { return typ == userErased }

var userErased = events.UserErased{}.EventType()

// erasure reports whether events of type typ erase a person's data: such an
// event is never passed over (SkipPoison, an operator's skip), since a read
// model that skipped it would keep the data. It stops its projection until
// it applies.
func erasure(typ string) bool { return typ == userErased || typ == partnerErased }

var partnerErased = events.PartnerErased{}.EventType()

// erasedIDs are the erased users of a set of user.erased events.
func erasedIDs(es []events.UserErased) []int64 {
	ids := make([]int64, len(es))
	for i, e := range es {
		ids[i] = e.UserID
	}
	return ids
}

// erasedEmail is what an e-mail address of the user reads as once erased:
// the placeholder of the fields whose subject is the user.
func erasedEmail(userID int64) string { return personal.ErasedEmail(personal.UserSubject(userID)) }

// erasedEmails are erasedEmail of each of ids.
func erasedEmails(ids []int64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = erasedEmail(id)
	}
	return out
}
