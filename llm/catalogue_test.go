package llm

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultCatalogue(t *testing.T) {
	t.Parallel()
	c := DefaultCatalogue()
	want := []Model{
		{ID: 1, Name: "echo", Provider: ProviderEcho, Timeout: 5 * time.Second, StreamDelay: 30 * time.Millisecond, Default: true},
		{ID: 2, Name: "echo-reverse", Provider: ProviderEchoReverse, Timeout: 5 * time.Second, StreamDelay: 30 * time.Millisecond},
	}
	if diff := cmp.Diff(want, c.Models()); diff != "" {
		t.Errorf("Models() (-want +got):\n%s", diff)
	}
	if d := c.Default(); d.Name != "echo" {
		t.Errorf("Default() = %q, want echo", d.Name)
	}
	if m, ok := c.ByName("echo-reverse"); !ok || m.ID != 2 {
		t.Errorf("ByName(echo-reverse) = %v, %v", m, ok)
	}
	if m, ok := c.ByID(1); !ok || m.Name != "echo" {
		t.Errorf("ByID(1) = %v, %v", m, ok)
	}
	if _, ok := c.ByName("Echo"); ok {
		t.Errorf("ByName(Echo) found a model: names are case-sensitive")
	}
	if _, ok := c.ByID(3); ok {
		t.Errorf("ByID(3) found a model")
	}
	c.Models()[0].Name = "changed"
	if c.Models()[0].Name != "echo" {
		t.Errorf("Models() exposes the catalogue's own slice")
	}
}

func TestLoadEmptyPathIsTheDefault(t *testing.T) {
	t.Parallel()
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(DefaultCatalogue().Models(), c.Models()); diff != "" {
		t.Errorf("Load(\"\") (-want +got):\n%s", diff)
	}
}

// The repository's models.yaml is the documented copy of the default.
func TestRepositoryModelsFile(t *testing.T) {
	t.Parallel()
	c, err := Load(filepath.Join("..", "models.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.ByName(c.Default().Name); !ok {
		t.Errorf("no default model")
	}
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
models:
  - id: 1
    name: echo
    provider: echo
    stream_delay: 25ms
    default: true
  - id: 7
    name: gpt-4o-mini
    provider: openai
    base_url: https://api.openai.com/v1
    model: gpt-4o-mini-2024-07-18
    api_key_env: OPENAI_API_KEY
    timeout: 90s
    retries: 0
    price_per_million_tokens: {input: 0.15, output: 0.6}
`)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []Model{
		{ID: 1, Name: "echo", Provider: ProviderEcho, Timeout: DefaultTimeout, Retries: DefaultRetries, StreamDelay: 25 * time.Millisecond, Default: true},
		{
			ID: 7, Name: "gpt-4o-mini", Provider: ProviderOpenAI, BaseURL: "https://api.openai.com/v1",
			ProviderModel: "gpt-4o-mini-2024-07-18", APIKeyEnv: "OPENAI_API_KEY", Timeout: 90 * time.Second,
			Retries: 0, PriceInput: 0.15, PriceOutput: 0.6,
		},
	}
	if diff := cmp.Diff(want, c.Models()); diff != "" {
		t.Errorf("Models() (-want +got):\n%s", diff)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		want       []string // parts of the error
	}{
		{"empty file", "", []string{"no models"}},
		{"unknown key", "models:\n  - id: 1\n    name: echo\n    provider: echo\n    default: true\n    temperature: 1\n", []string{"field temperature not found"}},
		{"not YAML", "models: [", []string{"yaml"}},
		{"wrong type", "models:\n  - id: one\n", []string{"cannot unmarshal"}},
		{
			"timeout without unit, and other problems",
			"models:\n  - id: 1\n    name: echo\n    provider: echo\n    timeout: 30\n  - id: 1\n    name: b\n    provider: echo\n",
			[]string{
				`models[0] "echo" (id 1): timeout "30" is not a duration with a unit, such as "30s"`,
				`models[1] "b" (id 1): id 1 is already used by models[0] "echo" (id 1)`,
				"no default model",
			},
		},
		{"stream_delay without unit", "models:\n  - id: 1\n    name: echo\n    provider: echo\n    stream_delay: 30\n    default: true\n",
			[]string{`models[0] "echo" (id 1): stream_delay "30" is not a duration with a unit, such as "30ms"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tt.yaml)
			_, err := Load(path)
			if err == nil {
				t.Fatalf("Load succeeded, want an error with %q", tt.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing file) = %v, want os.ErrNotExist", err)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// validModels is a valid catalogue each Validate case breaks in one way.
func validModels() []Model {
	return []Model{
		{ID: 1, Name: "echo", Provider: ProviderEcho, Timeout: time.Second, Default: true},
		{ID: 2, Name: "echo-reverse", Provider: ProviderEchoReverse, Timeout: time.Second},
		{
			ID: 3, Name: "gpt", Provider: ProviderOpenAI, BaseURL: "http://localhost:8000/v1", ProviderModel: "m",
			APIKeyEnv: "GPT_KEY", Timeout: time.Minute, Retries: 2, PriceInput: 1, PriceOutput: 2,
		},
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	if _, err := NewCatalogue(validModels()...); err != nil {
		t.Fatalf("the valid catalogue: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(ms []Model) []Model
		want   []string // the end of each problem line, in order
	}{
		{"no models", func([]Model) []Model { return nil }, []string{"no models: the catalogue needs at least one"}},
		{"id below 1", func(ms []Model) []Model { ms[1].ID = 0; return ms }, []string{`models[1] "echo-reverse" (id 0): id must be an integer >= 1`}},
		{"duplicate id", func(ms []Model) []Model { ms[2].ID = 1; return ms }, []string{`models[2] "gpt" (id 1): id 1 is already used by models[0] "echo" (id 1)`}},
		{"missing name", func(ms []Model) []Model { ms[1].Name = ""; return ms }, []string{`models[1] "" (id 2): name is required`}},
		{"name with spaces", func(ms []Model) []Model { ms[1].Name = "echo reverse"; return ms }, []string{`models[1] "echo reverse" (id 2): name must not contain spaces`}},
		{"name too long", func(ms []Model) []Model { ms[1].Name = strings.Repeat("é", 201); return ms }, []string{"name is longer than 200 characters"}},
		{"duplicate name", func(ms []Model) []Model { ms[2].Name = "echo"; return ms }, []string{`models[2] "echo" (id 3): name "echo" is already used by models[0] "echo" (id 1)`}},
		{"missing provider", func(ms []Model) []Model { ms[0].Provider = ""; return ms }, []string{`models[0] "echo" (id 1): provider is required (echo, echo-reverse or openai)`}},
		{"unknown provider", func(ms []Model) []Model { ms[0].Provider = "anthropic"; return ms }, []string{`models[0] "echo" (id 1): unknown provider "anthropic" (want echo, echo-reverse or openai)`}},
		{"openai without base_url", func(ms []Model) []Model { ms[2].BaseURL = ""; return ms }, []string{`models[2] "gpt" (id 3): base_url is required for provider "openai"`}},
		{"openai with a base_url that is not http", func(ms []Model) []Model { ms[2].BaseURL = "localhost:8000"; return ms }, []string{`models[2] "gpt" (id 3): base_url "localhost:8000" is not an http(s) URL`}},
		{"openai with a base_url without host", func(ms []Model) []Model { ms[2].BaseURL = "https:///v1"; return ms }, []string{`base_url "https:///v1" is not an http(s) URL`}},
		{"openai without model", func(ms []Model) []Model { ms[2].ProviderModel = ""; return ms }, []string{`models[2] "gpt" (id 3): model (the provider's model id) is required for provider "openai"`}},
		{"bad api_key_env", func(ms []Model) []Model { ms[2].APIKeyEnv = "$GPT_KEY"; return ms }, []string{`models[2] "gpt" (id 3): api_key_env "$GPT_KEY" is not an environment variable name`}},
		{"zero timeout", func(ms []Model) []Model { ms[0].Timeout = 0; return ms }, []string{`models[0] "echo" (id 1): timeout must be positive, got 0s`}},
		{"negative timeout", func(ms []Model) []Model { ms[0].Timeout = -time.Second; return ms }, []string{`timeout must be positive, got -1s`}},
		{"negative retries", func(ms []Model) []Model { ms[2].Retries = -1; return ms }, []string{`models[2] "gpt" (id 3): retries must be between 0 and 10, got -1`}},
		{"too many retries", func(ms []Model) []Model { ms[2].Retries = 11; return ms }, []string{`retries must be between 0 and 10, got 11`}},
		{"negative stream delay", func(ms []Model) []Model { ms[0].StreamDelay = -time.Millisecond; return ms }, []string{`models[0] "echo" (id 1): stream_delay must not be negative, got -1ms`}},
		{"stream delay on a provider", func(ms []Model) []Model { ms[2].StreamDelay = time.Millisecond; return ms }, []string{`models[2] "gpt" (id 3): stream_delay is for the offline echo models; provider "openai" streams at its own pace`}},
		{"negative price", func(ms []Model) []Model { ms[2].PriceOutput = -1; return ms }, []string{`models[2] "gpt" (id 3): prices must be non-negative numbers`}},
		{"NaN price", func(ms []Model) []Model { ms[2].PriceInput = math.NaN(); return ms }, []string{`prices must be non-negative numbers`}},
		{"no default", func(ms []Model) []Model { ms[0].Default = false; return ms }, []string{"no default model: mark exactly one with default: true"}},
		{"two defaults", func(ms []Model) []Model { ms[2].Default = true; return ms }, []string{`2 default models ("echo", "gpt"): mark exactly one with default: true`}},
		{
			"every problem at once",
			func(ms []Model) []Model {
				ms[1].ID, ms[1].Provider, ms[1].Timeout = 1, "x", 0
				ms[2].Default = true
				return ms
			},
			[]string{
				`models[1] "echo-reverse" (id 1): id 1 is already used by models[0] "echo" (id 1)`,
				`models[1] "echo-reverse" (id 1): unknown provider "x" (want echo, echo-reverse or openai)`,
				`models[1] "echo-reverse" (id 1): timeout must be positive, got 0s`,
				`2 default models ("echo", "gpt"): mark exactly one with default: true`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := NewCatalogue(tt.mutate(validModels())...)
			if err == nil {
				t.Fatalf("NewCatalogue succeeded: %v", c.Models())
			}
			got := strings.Split(err.Error(), "\n")
			ok := len(got) == len(tt.want)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.HasSuffix(got[i], tt.want[i])
			}
			if !ok {
				t.Errorf("Validate() problems:\n%s\nwant lines ending with:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestNewCatalogueCopiesItsInput(t *testing.T) {
	t.Parallel()
	ms := validModels()
	c, err := NewCatalogue(ms...)
	if err != nil {
		t.Fatal(err)
	}
	ms[0].Name = "changed"
	if _, ok := c.ByName("echo"); !ok {
		t.Errorf("the catalogue shares its caller's slice")
	}
}
