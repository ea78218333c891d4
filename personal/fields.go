// Package personal keeps personal data erasable in an append-only history
// (crypto-shredding). The personal fields of an event are sealed when it is
// appended: each is replaced by a placeholder, and their values travel in the
// event's "pii" member, encrypted (AES-256-GCM) under a key of the data's
// subject (the user). Readers open events with the subject's key; erasing a
// subject deletes its key, and every copy of its data, in every event on
// either store, then reads as the placeholders. docs/privacy.md has the list
// of fields and the whole story.
package personal

import (
	"strconv"
	"strings"
)

// ErasedText is what a personal text reads as once its subject is erased
// (and what a reader without the key sees); a nullable one reads as null,
// an object as {}, a list as [], an e-mail address as ErasedEmail.
const ErasedText = "[erased]"

// ErasedEmail is what an e-mail address of subject ("user-7") reads as once
// erased: unique per subject, as e-mail columns are.
func ErasedEmail(subject string) string { return "erased-" + subject + "@erased.invalid" }

// UserSubject is the subject of a user's personal data.
func UserSubject(userID int64) string { return "user-" + strconv.FormatInt(userID, 10) }

// PartnerSubject is the subject of the personal data of a partner without
// a user account.
func PartnerSubject(partnerID int64) string { return "partner-" + strconv.FormatInt(partnerID, 10) }

// placeholder kinds of a field.
type kind byte

const (
	text     kind = 's' // "[erased]"
	nullable kind = 'n' // null
	object   kind = 'o' // {}
	list     kind = 'a' // []
	email    kind = 'e' // erased-<subject>@erased.invalid: unique per subject, as e-mail columns are
)

// field is a personal member of an event's data: a top-level name, a member
// of a nested object ("settings.agent_snapshot"), or a member of every
// element of an array ("results[].response_text").
type field struct {
	path []string // object members; a "[]" suffix on one means each element
	kind kind
}

// rule says whose data an event holds and which of its members are personal.
type rule struct {
	// subjects are the members naming the subject, tried in order, each with
	// its subject category ("user_id" → "user-7"); none set: the acting user
	// of the event's metadata.
	subjects []subjectMember
	fields   []field
}

type subjectMember struct{ member, category string }

func parseFields(spec ...string) []field {
	out := make([]field, len(spec))
	for i, s := range spec {
		name, k, _ := strings.Cut(s, ":")
		out[i] = field{path: strings.Split(name, "."), kind: kind(k[0])}
	}
	return out
}

var byUser = []subjectMember{{"user_id", "user"}}

// rules are the events that hold personal data. An event type not listed
// holds none (ids, statuses, settings, organisation names, class and course
// texts, which belong to the organisation: docs/privacy.md).
var rules = map[string]rule{
	"user.signed_up":           {byUser, parseFields("email:e", "name:s")},
	"agent.created":            {[]subjectMember{{"owner_id", "user"}}, parseFields("name:s", "system_prompt:s", "role_description:n", "template_source:n")},
	"agent.updated":            {nil, parseFields("name:s", "system_prompt:s", "role_description:n", "template_source:n")},
	"fewshot.created":          {byUser, parseFields("title:n", "input_text:s", "output_text:s", "meta:o")},
	"fewshot.updated":          {nil, parseFields("title:n", "input_text:s", "output_text:s", "meta:o")},
	"partner.created":          {[]subjectMember{{"user_id", "user"}, {"partner_id", "partner"}}, parseFields("full_name:s", "email:e", "phone:n")},
	"promotion.requested":      {byUser, parseFields("name:s", "email:e", "org_name:s", "edu_category:n")},
	"promotion.rejected":       {byUser, parseFields("reason:n")},
	"session.started":          {byUser, parseFields("title:n", "settings.style_params:o", "settings.agent_snapshot:n")},
	"session.turn_recorded":    {nil, parseFields("prompt_text:s", "messages:a", "results[].response_text:s", "results[].error:n")},
	"session.settings_updated": {nil, parseFields("settings.style_params:o", "settings.agent_snapshot:n")},
	// content: version 1's inline text. content_hash is the text's SHA-256:
	// in clear, it would confirm a guess at the text after the erasure.
	"knowledge.document_uploaded": {byUser, parseFields("title:s", "content:s", "content_hash:s")},
	// reranker_model is informational (the built-in reranker is used):
	// free text of the owner's, up to 200 characters. An upload's is the
	// default, null.
	"knowledge.settings_changed": {nil, parseFields("settings.reranker_model:n")},
}

// Holds reports whether events of eventType hold personal data.
func Holds(eventType string) bool {
	_, ok := rules[eventType]
	return ok
}
