package api_test

import (
	"net/http"
	"testing"
)

func TestModels(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	u := e.signUp(t)
	wantBody(t, e.do(t, "GET", "/models", nil, u.Access), http.StatusOK,
		`[{"id":1,"name":"echo","provider":"echo","is_default":true},{"id":2,"name":"echo-reverse","provider":"echo-reverse","is_default":false}]`)
	wantStatus(t, e.do(t, "GET", "/models", nil, ""), http.StatusUnauthorized)
}
