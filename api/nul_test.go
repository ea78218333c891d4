package api_test

import (
	"net/http"
	"testing"
)

// A NUL character cannot be stored in PostgreSQL text: it is refused at the
// edge instead of stopping a projection.
func TestNULCharacterRefused(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	wantBody(t, e.do(t, "POST", "/agents", `{"name":"x","system_prompt":"a\u0000b"}`, u.Access), http.StatusUnprocessableEntity,
		`{"detail":[{"type":"value_error","loc":["body","system_prompt"],"msg":"Value error, String must not contain NUL characters","input":"a\u0000b","ctx":{"error":"String must not contain NUL characters"}}]}`)
	// Agents written afterwards are still projected.
	res := e.do(t, "POST", "/agents", map[string]any{"name": "after", "system_prompt": "p"}, u.Access)
	wantStatus(t, res, http.StatusCreated)
	wantHeader(t, res, "X-Projection-Pending", "")
}
