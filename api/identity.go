package api

import (
	"context"
	"net/http"

	"lectern/api/validation"
	"lectern/commands"
	"lectern/projections"
)

var (
	emailField   = validation.Field{Name: "email", Kind: validation.Email, Required: true}
	sendCodeBody = validation.Schema{Fields: []validation.Field{emailField}}
	verifyBody   = validation.Schema{Fields: []validation.Field{
		emailField, reqString("code", 32), reqString("verification_token", 256),
	}}
	signupBody = validation.Schema{Fields: []validation.Field{
		emailField,
		{Name: "password", Kind: validation.String, Required: true, MinLength: 8, MaxLength: 128},
		{Name: "name", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
		reqString("email_verified_token", 2048),
	}}
	loginBody = validation.Schema{Fields: []validation.Field{
		emailField, reqString("password", 128),
	}}
	refreshBody = validation.Schema{Fields: []validation.Field{reqString("refresh_token", 256)}}
	// The new password has sign-up's bounds.
	changePasswordBody = validation.Schema{Fields: []validation.Field{
		reqString("current_password", 128),
		{Name: "new_password", Kind: validation.String, Required: true, MinLength: 8, MaxLength: 128},
	}}
)

type tokensJSON struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
}

func tokensOf(t commands.Tokens) tokensJSON {
	return tokensJSON{AccessToken: t.AccessToken, RefreshToken: t.RefreshToken, TokenType: "bearer"}
}

type userJSON struct {
	ID         int64    `json:"id"`
	Email      string   `json:"email"`
	Name       string   `json:"name"`
	Roles      []string `json:"roles"`
	PartnerIDs []int64  `json:"partner_ids"`
	CreatedAt  string   `json:"created_at"`
	UpdatedAt  string   `json:"updated_at"`
}

func (s *Server) sendCode(w http.ResponseWriter, r *http.Request, in input) error {
	email, _ := in.body.String("email")
	token, expires, err := s.deps.Commands.Identity.SendCode(r.Context(), email, s.clientAddr(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"email": commands.NormalizeEmail(email), "verification_token": token, "expires_at": ts(expires),
	})
	return nil
}

func (s *Server) verifyCode(w http.ResponseWriter, r *http.Request, in input) error {
	email, _ := in.body.String("email")
	code, _ := in.body.String("code")
	token, _ := in.body.String("verification_token")
	verified, err := s.deps.Commands.Identity.VerifyCode(r.Context(), email, code, token, s.clientAddr(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"email": commands.NormalizeEmail(email), "email_verified_token": verified})
	return nil
}

func (s *Server) signUp(w http.ResponseWriter, r *http.Request, in input) error {
	email, _ := in.body.String("email")
	password, _ := in.body.String("password")
	name, _ := in.body.String("name")
	token, _ := in.body.String("email_verified_token")
	user, toks, res, err := s.deps.Commands.Identity.SignUp(r.Context(), email, password, name, token, s.clientAddr(r))
	if err != nil {
		return err
	}
	s.settle(w, r, res, usersReadModels...)
	writeJSON(w, http.StatusCreated, map[string]any{
		"user": userJSON{ID: user.ID, Email: user.Email, Name: user.Name, Roles: user.Roles, PartnerIDs: []int64{},
			CreatedAt: ts(user.CreatedAt), UpdatedAt: ts(user.UpdatedAt)},
		"access_token": toks.AccessToken, "refresh_token": toks.RefreshToken, "token_type": "bearer",
	})
	return nil
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, in input) error {
	email, _ := in.body.String("email")
	password, _ := in.body.String("password")
	toks, err := s.deps.Commands.Identity.Login(r.Context(), email, password, s.clientAddr(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tokensOf(toks))
	return nil
}

func (s *Server) refresh(w http.ResponseWriter, r *http.Request, in input) error {
	token, _ := in.body.String("refresh_token")
	toks, err := s.deps.Commands.Identity.Refresh(r.Context(), token)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, tokensOf(toks))
	return nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, in input) error {
	token, _ := in.body.String("refresh_token")
	err := s.deps.Commands.Identity.Logout(r.Context(), token)
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, in input) error {
	current, _ := in.body.String("current_password")
	next, _ := in.body.String("new_password")
	res, err := s.deps.Commands.Identity.ChangePassword(r.Context(), in.user.UserID, current, next, s.clientAddr(r), in.user.Session)
	if err != nil {
		return err
	}
	s.settle(w, r, res) // no read model shows a password
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) me(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, projections.UsersProjection, projections.PartnersProjection); err != nil {
		return err
	}
	u, err := s.userOf(r.Context(), in.user.UserID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

// userOf is the caller's account as GET /user/me shows it (and the export).
func (s *Server) userOf(ctx context.Context, id int64) (userJSON, error) {
	u, err := s.deps.Queries.UserByID(ctx, id)
	if isNotFound(err) {
		return userJSON{}, errBadCredentials // a valid signature for an account that is gone
	}
	if err != nil {
		return userJSON{}, err
	}
	partnerIDs, err := s.deps.Queries.PartnerIDsOfUser(ctx, u.ID)
	if err != nil {
		return userJSON{}, err
	}
	return userJSON{ID: u.ID, Email: u.Email, Name: u.Name, Roles: u.Roles, PartnerIDs: partnerIDs,
		CreatedAt: ts(u.CreatedAt), UpdatedAt: ts(u.UpdatedAt)}, nil
}
