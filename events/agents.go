package events

// Stream category of agents.
const CategoryAgent = "agent"

// AgentCreated: a user created an agent (a named system prompt).
type AgentCreated struct {
	AgentID         int64   `json:"agent_id"`
	OwnerID         int64   `json:"owner_id"`
	Name            string  `json:"name"`
	SystemPrompt    string  `json:"system_prompt"`
	RoleDescription *string `json:"role_description"`
	TemplateSource  *string `json:"template_source"`
	IsActive        bool    `json:"is_active"`
}

// AgentUpdated: the owner edited an agent. It carries every editable field's
// new value, and which of them changed, so a replay needs no earlier state.
type AgentUpdated struct {
	AgentID         int64    `json:"agent_id"`
	Name            string   `json:"name"`
	SystemPrompt    string   `json:"system_prompt"`
	RoleDescription *string  `json:"role_description"`
	TemplateSource  *string  `json:"template_source"`
	IsActive        bool     `json:"is_active"`
	Changed         []string `json:"changed"`
}

// EventType implements Event.
func (AgentCreated) EventType() string { return "agent.created" }

// SchemaVersion implements Event.
func (AgentCreated) SchemaVersion() int { return 1 }

// EventType implements Event.
func (AgentUpdated) EventType() string { return "agent.updated" }

// SchemaVersion implements Event.
func (AgentUpdated) SchemaVersion() int { return 1 }

var (
	_ Event = AgentCreated{}
	_ Event = AgentUpdated{}
)
