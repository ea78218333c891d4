package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/swaggest/swgui/v5emb"

	"lectern/eventstore"
)

// docsHandler serves Swagger UI with its assets embedded in the binary, so the
// docs page works offline.
func docsHandler() http.Handler {
	return v5emb.New("Lectern API", "/openapi.json", "/docs/")
}

// JSON Schema builders for the response components.
type schema = map[string]any

func ref(name string) schema { return schema{"$ref": "#/components/schemas/" + name} }
func str() schema            { return schema{"type": "string"} }
func integer() schema        { return schema{"type": "integer"} }
func boolean() schema        { return schema{"type": "boolean"} }
func dateTime() schema       { return schema{"type": "string", "format": "date-time"} }
func arrayOf(items schema) schema {
	return schema{"type": "array", "items": items}
}
func nullable(s schema) schema {
	out := schema{}
	for k, v := range s {
		out[k] = v
	}
	out["type"] = []any{s["type"], "null"}
	return out
}
func object(props schema, required ...string) schema {
	if required == nil {
		required = []string{}
	}
	return schema{"type": "object", "properties": props, "required": required}
}

func listOf(item string) schema {
	return object(schema{"items": arrayOf(ref(item)), "total": integer(), "page": integer(), "size": integer()},
		"items", "total", "page", "size")
}

// components are the response schemas, by name.
func components() schema {
	tokens := schema{"access_token": str(), "refresh_token": str(), "token_type": str()}
	me := object(schema{
		"id": integer(), "email": str(), "name": str(), "roles": arrayOf(str()),
		"partner_ids": arrayOf(integer()), "created_at": dateTime(), "updated_at": dateTime(),
	}, "id", "email", "name", "roles", "partner_ids", "created_at", "updated_at")
	return schema{
		"ErrorDetail": object(schema{"detail": str()}, "detail"),
		"ValidationError": object(schema{
			"type": str(), "loc": arrayOf(schema{"type": []any{"string", "integer"}}), "msg": str(),
			"input": schema{}, "ctx": schema{"type": "object"},
		}, "type", "loc", "msg", "input"),
		"HTTPValidationError": object(schema{"detail": arrayOf(ref("ValidationError"))}, "detail"),
		"EmailCodeSent": object(schema{"email": str(), "verification_token": str(), "expires_at": dateTime()},
			"email", "verification_token", "expires_at"),
		"EmailVerification": object(schema{"email": str(), "email_verified_token": str()}, "email", "email_verified_token"),
		"LoginTokens":       object(tokens, "access_token", "refresh_token", "token_type"),
		"Me":                me,
		"SignUpResult": object(schema{"user": ref("Me"), "access_token": str(), "refresh_token": str(), "token_type": str()},
			"user", "access_token", "refresh_token", "token_type"),
		"Agent": object(schema{
			"agent_id": integer(), "owner_id": integer(), "name": str(), "system_prompt": str(),
			"role_description": nullable(str()), "template_source": nullable(str()), "is_active": boolean(),
			"created_at": dateTime(), "updated_at": dateTime(),
		}, "agent_id", "owner_id", "name", "system_prompt", "is_active", "created_at", "updated_at"),
		"AgentList": listOf("Agent"),
	}
}

// allComponents merges every area's response schemas.
func allComponents() schema {
	out := components()
	for _, area := range []schema{organisationComponents(), classroomComponents(), practiceComponents(), sessionComponents(), modelComponents(), knowledgeComponents(), adminEventComponents(), privacyComponents()} {
		for k, v := range area {
			out[k] = v
		}
	}
	return out
}

var statusText = map[int]string{
	400: "Bad request", 401: "Not authenticated", 403: "Not enough permissions", 404: "Not found",
	408: "Request body too slow", 409: "Conflict", 413: "Request body too large", 422: "Validation error", 429: "Too many requests",
	502: "Every model failed", 503: "The database or the event store is unavailable, a lock the change needs was held too long, " +
		"or too many passwords are being checked at once",
}

// headerRef refers to a header of components.headers.
func headerRef(name string) schema { return schema{"$ref": "#/components/headers/" + name} }

// responseHeaders are the documented headers of every response.
func responseHeaders() schema {
	return schema{
		"X-Request-ID": schema{"description": "The request's id (the client's X-Request-ID, or one the server made), as in its logs",
			"schema": schema{"type": "string"}},
		"X-Event-Position": schema{"description": "Where the write's events stand in the log; send it as X-Min-Position to read your write elsewhere",
			"schema": schema{"type": "string"}},
		"X-Projection-Pending": schema{"description": "\"true\" when a read model had not applied the write (or X-Min-Position) within 2 s",
			"schema": schema{"type": "string", "enum": []string{"true"}}},
		"Retry-After": schema{"description": "Seconds to wait before trying again", "schema": schema{"type": "integer", "minimum": 1}},
		"Location": schema{"description": "The path (relative to the server) of the GET that reads the created resource",
			"schema": schema{"type": "string", "format": "uri-reference"}},
		"Idempotent-Replayed": schema{"description": "\"true\" when the answer is the stored first answer to a request with the same Idempotency-Key (nothing was written again)",
			"schema": schema{"type": "string", "enum": []string{"true"}}},
	}
}

// openAPI renders the OpenAPI 3.1 document of every operation.
func (s *Server) openAPI() ([]byte, error) {
	paths := schema{}
	for _, op := range s.ops {
		item, _ := paths[op.path].(schema)
		if item == nil {
			item = schema{}
			paths[op.path] = item
		}
		o := schema{"operationId": op.id, "summary": op.summary, "tags": []string{op.tag}}
		o["security"] = []schema{} // public
		if op.auth {
			o["security"] = []schema{{"bearer": []string{}}}
		}
		write := op.method != http.MethodGet
		var params []schema
		for _, f := range op.pathParams {
			params = append(params, schema{"name": f.Name, "in": "path", "required": true, "schema": f.JSONSchema()})
		}
		for _, f := range op.query {
			params = append(params, schema{"name": f.Name, "in": "query", "required": f.Required, "schema": f.JSONSchema()})
		}
		if op.method == http.MethodGet && op.auth {
			params = append(params, schema{"name": "X-Min-Position", "in": "header", "required": false,
				"description": "Wait (up to 2 s) until the read models have applied this X-Event-Position",
				"schema":      schema{"type": "string", "maxLength": eventstore.MaxPositionLength}})
		}
		if op.idempotent {
			params = append(params, schema{"name": "Idempotency-Key", "in": "header", "required": false,
				"description": "Retrying with the same key returns the first response (kept 24 h)",
				"schema":      schema{"type": "string", "maxLength": 255}})
		}
		if params != nil {
			o["parameters"] = params
		}
		if op.body != nil {
			o["requestBody"] = schema{"required": true, "content": schema{"application/json": schema{"schema": op.body.JSONSchema()}}}
		}
		if op.ownBody != nil {
			o["requestBody"] = schema{"required": true, "content": schema{
				"application/json": schema{"schema": op.ownBody.JSONSchema()},
				"multipart/form-data": schema{"schema": object(schema{
					"file":  schema{"type": "string", "format": "binary", "description": "text/plain, text/markdown or application/pdf"},
					"title": schema{"type": "string", "maxLength": maxName, "description": "default: the file's name"},
				}, "file")},
			}}
		}
		responses := schema{}
		successHeaders := schema{"X-Request-ID": headerRef("X-Request-ID")}
		if op.auth || op.positioned {
			successHeaders["X-Projection-Pending"] = headerRef("X-Projection-Pending")
		}
		if op.auth && write || op.positioned {
			successHeaders["X-Event-Position"] = headerRef("X-Event-Position")
		}
		if op.idempotent {
			successHeaders["Idempotent-Replayed"] = headerRef("Idempotent-Replayed")
		}
		if op.location != nil {
			successHeaders["Location"] = headerRef("Location")
		}
		success := schema{"description": http.StatusText(op.status), "headers": successHeaders}
		if op.response != "" {
			success["content"] = schema{"application/json": schema{"schema": ref(op.response)}}
		}
		if streamedTurns[op.id] {
			// Accept: text/event-stream: the same answer, streamed.
			success["content"].(schema)["text/event-stream"] = streamContent()
			success["description"] = http.StatusText(op.status) + "; with Accept: text/event-stream, the turn streamed as Server-Sent Events"
		}
		responses[strconv.Itoa(op.status)] = success
		errs := append([]int{}, op.errors...)
		if op.method == http.MethodGet && op.auth {
			errs = append(errs, 400) // an unreadable X-Min-Position
		}
		if op.body != nil || op.ownBody != nil || op.pathParams != nil || op.query != nil || op.idempotent {
			errs = append(errs, 422)
		}
		if op.body != nil || op.ownBody != nil {
			// Too large, cut short (400) or too slow (408).
			errs = append(errs, 413, 400, 408)
		}
		// Every operation reads or writes PostgreSQL (the session check
		// alone does): out of reach, it is a 503; so are an unreachable
		// EventStoreDB and a lock not taken in time.
		errs = append(errs, 503)
		sort.Ints(errs)
		errs = slices.Compact(errs)
		for _, code := range errs {
			body := ref("ErrorDetail")
			if code == 422 {
				body = ref("HTTPValidationError")
			}
			headers := schema{"X-Request-ID": headerRef("X-Request-ID")}
			if code == 429 || code == 503 {
				headers["Retry-After"] = headerRef("Retry-After")
			}
			responses[strconv.Itoa(code)] = schema{"description": statusText[code], "headers": headers,
				"content": schema{"application/json": schema{"schema": body}}}
		}
		o["responses"] = responses
		item[strings.ToLower(op.method)] = o
	}
	doc := schema{
		"openapi": "3.1.0",
		"info": schema{"title": "Lectern", "version": "1.0.0",
			"description": "AI practice classrooms: practice chats against language models, agents, classes and enrollments."},
		// Relative: the document describes the server that serves it.
		"servers": []schema{{"url": "/", "description": "the server that serves this document"}},
		"paths":   paths,
		"components": schema{
			"headers":         responseHeaders(),
			"schemas":         allComponents(),
			"securitySchemes": schema{"bearer": schema{"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}
