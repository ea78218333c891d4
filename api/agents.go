package api

import (
	"net/http"

	"lectern/aggregates"
	"lectern/api/validation"
	"lectern/projections"
	"lectern/queries"
)

var (
	agentPath = []validation.Field{idParam("agent_id")}

	usersReadModels  = []string{projections.UsersProjection}
	agentsReadModels = []string{projections.AgentsProjection}

	createAgentBody = validation.Schema{Fields: []validation.Field{
		{Name: "name", Kind: validation.String, Required: true, MinLength: 1, MaxLength: maxName},
		reqString("system_prompt", maxText),
		optString("role_description", maxText, true),
		optString("template_source", maxName, true),
		{Name: "is_active", Kind: validation.Bool, Nullable: true},
	}}
	updateAgentBody = validation.Schema{Fields: []validation.Field{
		{Name: "name", Kind: validation.String, MinLength: 1, MaxLength: maxName},
		optString("role_description", maxText, true),
		optString("system_prompt", maxText, false),
		optString("template_source", maxName, true),
		{Name: "is_active", Kind: validation.Bool},
	}}
)

type agentJSON struct {
	AgentID         int64   `json:"agent_id"`
	OwnerID         int64   `json:"owner_id"`
	Name            string  `json:"name"`
	SystemPrompt    string  `json:"system_prompt"`
	RoleDescription *string `json:"role_description"`
	TemplateSource  *string `json:"template_source"`
	IsActive        bool    `json:"is_active"`
	CreatedAt       string  `json:"created_at"`
	UpdatedAt       string  `json:"updated_at"`
}

func agentFromState(a aggregates.Agent) agentJSON {
	return agentJSON{AgentID: a.ID, OwnerID: a.OwnerID, Name: a.Name, SystemPrompt: a.SystemPrompt,
		RoleDescription: a.RoleDescription, TemplateSource: a.TemplateSource, IsActive: a.IsActive,
		CreatedAt: ts(a.CreatedAt), UpdatedAt: ts(a.UpdatedAt)}
}

func agentFromRow(a queries.Agent) agentJSON {
	return agentJSON{AgentID: a.ID, OwnerID: a.OwnerID, Name: a.Name, SystemPrompt: a.SystemPrompt,
		RoleDescription: a.RoleDescription, TemplateSource: a.TemplateSource, IsActive: a.IsActive,
		CreatedAt: ts(a.CreatedAt), UpdatedAt: ts(a.UpdatedAt)}
}

// optionalString reads a nullable string field: absent, null or a value.
func optionalString(v validation.Values, name string) *string {
	if s, ok := v.String(name); ok {
		return &s
	}
	return nil
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request, in input) error {
	c := aggregates.CreateAgent{OwnerID: in.user.UserID}
	c.Name, _ = in.body.String("name")
	c.SystemPrompt, _ = in.body.String("system_prompt")
	c.RoleDescription = optionalString(in.body, "role_description")
	c.TemplateSource = optionalString(in.body, "template_source")
	if b, ok := in.body.Bool("is_active"); ok {
		c.IsActive = &b
	}
	agent, res, err := s.deps.Commands.Agents.Create(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, agentsReadModels...)
	writeJSON(w, http.StatusCreated, agentFromState(agent))
	return nil
}

func (s *Server) updateAgent(w http.ResponseWriter, r *http.Request, in input) error {
	id, _ := in.path.Int("agent_id")
	c := aggregates.UpdateAgent{AgentID: id, CallerID: in.user.UserID}
	if v, ok := in.body.String("name"); ok {
		c.Name = aggregates.Set(v)
	}
	if v, ok := in.body.String("system_prompt"); ok {
		c.SystemPrompt = aggregates.Set(v)
	}
	if in.body.Has("role_description") {
		c.RoleDescription = aggregates.Set(optionalString(in.body, "role_description"))
	}
	if in.body.Has("template_source") {
		c.TemplateSource = aggregates.Set(optionalString(in.body, "template_source"))
	}
	if v, ok := in.body.Bool("is_active"); ok {
		c.IsActive = aggregates.Set(v)
	}
	agent, res, err := s.deps.Commands.Agents.Update(r.Context(), c)
	if err != nil {
		return err
	}
	s.settle(w, r, res, agentsReadModels...)
	writeJSON(w, http.StatusOK, agentFromState(agent))
	return nil
}

func pageOf(v validation.Values) queries.Page {
	p := queries.Page{Page: 1, Size: 50}
	if n, ok := v.Int("page"); ok {
		p.Page = int(n)
	}
	if n, ok := v.Int("size"); ok {
		p.Size = int(n)
	}
	return p
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, agentsReadModels...); err != nil {
		return err
	}
	list, err := s.deps.Queries.Agents(r.Context(), in.user.UserID, pageOf(in.query))
	if err != nil {
		return err
	}
	writeList(w, list, agentFromRow)
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request, in input) error {
	if err := s.awaitMinPosition(w, r, agentsReadModels...); err != nil {
		return err
	}
	id, _ := in.path.Int("agent_id")
	a, err := s.deps.Queries.Agent(r.Context(), in.user.UserID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentFromRow(a))
	return nil
}
