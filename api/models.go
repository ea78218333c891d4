package api

import "net/http"

func (s *Server) modelOperations() []operation {
	return []operation{
		{method: http.MethodGet, path: "/models", id: "list_models", tag: "practice", auth: true,
			summary: "The model catalogue: logical models a practice turn may call", status: 200, response: "ModelList",
			errors: []int{401}, handle: s.listModels},
	}
}

func modelComponents() schema {
	return schema{
		"Model": object(schema{"id": integer(), "name": str(), "provider": str(), "is_default": boolean()},
			"id", "name", "provider", "is_default"),
		"ModelList": arrayOf(ref("Model")),
	}
}

type modelJSON struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Provider  string `json:"provider"`
	IsDefault bool   `json:"is_default"`
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request, _ input) error {
	out := []modelJSON{}
	for _, m := range s.deps.Models.Models() {
		out = append(out, modelJSON{ID: m.ID, Name: m.Name, Provider: m.Provider, IsDefault: m.Default})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
