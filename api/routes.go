package api

import "net/http"

// operations is the whole interface: the router and the OpenAPI document are
// both built from this table, so they cannot drift apart.
func (s *Server) operations() []operation {
	ops := s.identityAndAgentOperations()
	ops = append(ops, s.organisationOperations()...)
	ops = append(ops, s.classroomOperations()...)
	ops = append(ops, s.practiceOperations()...)
	ops = append(ops, s.sessionOperations()...)
	ops = append(ops, s.modelOperations()...)
	ops = append(ops, s.knowledgeOperations()...)
	ops = append(ops, s.adminEventOperations()...)
	ops = append(ops, s.privacyOperations()...)
	return ops
}

func (s *Server) identityAndAgentOperations() []operation {
	authErrors := []int{401}
	return []operation{
		// Identity (DESIGN §5, §7).
		{method: http.MethodPost, path: "/user/email/send-code", id: "send_email_code", tag: "identity",
			summary: "E-mail a 6-digit sign-up code", body: &sendCodeBody, status: 200, response: "EmailCodeSent",
			errors: []int{429}, handle: s.sendCode},
		{method: http.MethodPost, path: "/user/email/verify-code", id: "verify_email_code", tag: "identity",
			summary: "Verify an e-mailed code", body: &verifyBody, status: 200, response: "EmailVerification",
			errors: []int{400, 429}, handle: s.verifyCode},
		// No Location: no GET reads an account by its id (GET /user/me reads
		// the caller's, which the request that signs up is not yet).
		{method: http.MethodPost, path: "/user/signup", id: "sign_up", tag: "identity",
			summary: "Create an account for a verified e-mail", body: &signupBody, status: 201, response: "SignUpResult",
			errors: []int{400, 409, 429}, positioned: true, handle: s.signUp},
		{method: http.MethodPost, path: "/user/login", id: "login", tag: "identity",
			summary: "Log in with e-mail and password", body: &loginBody, status: 200, response: "LoginTokens",
			errors: []int{401, 429}, handle: s.login},
		{method: http.MethodPost, path: "/user/token/refresh", id: "refresh_token", tag: "identity",
			summary: "Rotate a refresh token", body: &refreshBody, status: 200, response: "LoginTokens",
			errors: []int{401}, handle: s.refresh},
		{method: http.MethodPost, path: "/user/logout", id: "logout", tag: "identity",
			summary: "Revoke a refresh token and its family", body: &refreshBody, status: 204,
			handle: s.logout},
		{method: http.MethodGet, path: "/user/me", id: "who_am_i", tag: "identity", auth: true,
			summary: "The caller's account", status: 200, response: "Me", errors: authErrors, handle: s.me},
		{method: http.MethodPost, path: "/user/me/password", id: "change_password", tag: "identity", auth: true, unmetered: true,
			summary: "Change my password (the current one confirms it); my other sessions end", body: &changePasswordBody,
			status: 204, errors: []int{401, 403, 409, 429}, handle: s.changePassword},

		// Agents (seed 4.14, 4.15; DESIGN §7).
		{method: http.MethodPost, path: "/agents", id: "create_agent", tag: "agents", auth: true, idempotent: true,
			summary: "Create an agent", body: &createAgentBody, status: 201, response: "Agent",
			errors: []int{401, 409}, location: &locatedBy{get: "get_agent", id: "agent_id"}, handle: s.createAgent},
		{method: http.MethodGet, path: "/agents", id: "list_agents", tag: "agents", auth: true,
			summary: "List my agents", query: pageQuery, status: 200, response: "AgentList",
			errors: authErrors, handle: s.listAgents},
		{method: http.MethodGet, path: "/agents/{agent_id}", id: "get_agent", tag: "agents", auth: true,
			summary: "Read one of my agents", pathParams: agentPath, status: 200, response: "Agent",
			errors: []int{401, 404}, handle: s.getAgent},
		{method: http.MethodPatch, path: "/agents/{agent_id}", id: "update_agent", tag: "agents", auth: true,
			summary: "Update my agent (merge)", pathParams: agentPath, body: &updateAgentBody, status: 200, response: "Agent",
			errors: []int{401, 404, 409}, handle: s.updateAgent},
	}
}
