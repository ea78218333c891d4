package llm

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// Provider kinds a model can name in models.yaml.
const (
	// ProviderEcho answers with the last user message it was given (offline).
	ProviderEcho = "echo"
	// ProviderEchoReverse answers with the last user message reversed rune by rune (offline).
	ProviderEchoReverse = "echo-reverse"
	// ProviderOpenAI is any server of the OpenAI-compatible chat completions API
	// (OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM, ...).
	ProviderOpenAI = "openai"
)

// Defaults applied to a models.yaml entry that leaves the field out.
const (
	DefaultTimeout = 60 * time.Second
	DefaultRetries = 2
	// MaxRetries bounds a model's retries, so that a typo cannot make a turn hang.
	MaxRetries = 10
	// MaxNameLength bounds a logical model name.
	MaxNameLength = 200
)

// EnvModelsFile names the environment variable the service reads for the path
// of its models.yaml; unset or empty, it uses [DefaultCatalogue].
const EnvModelsFile = "LECTERN_MODELS_FILE"

// Model is one entry of the catalogue: a logical model name clients pass in
// model_names, and how to reach it.
type Model struct {
	// ID is referred to by a class's primary_model_id and allowed_model_ids.
	ID int64
	// Name is the logical name clients pass in model_names.
	Name string
	// Provider is ProviderEcho, ProviderEchoReverse or ProviderOpenAI.
	Provider string
	// BaseURL is the OpenAI-compatible API root, e.g. https://api.openai.com/v1.
	BaseURL string
	// ProviderModel is the model id sent to the provider, e.g. gpt-4o-mini.
	ProviderModel string
	// APIKeyEnv names the environment variable holding the API key; an unset
	// variable (or an empty name) means no key is sent.
	APIKeyEnv string
	// Timeout bounds each attempt of a call.
	Timeout time.Duration
	// Retries is how many times a failed attempt is retried (429, 5xx, transport errors).
	Retries int
	// StreamDelay is the pause between the words of an echo model's
	// streamed answer, so that streaming shows without a provider (0: none).
	// A call that is not streamed answers at once.
	StreamDelay time.Duration
	// PriceInput and PriceOutput are prices per 1 000 000 prompt and completion
	// tokens, in the operator's currency (USD for OpenAI's list prices).
	PriceInput, PriceOutput float64
	// Default marks the service's default model; exactly one model has it.
	Default bool
}

// Cost is the price of a call's usage, in the currency of the model's prices.
func (m Model) Cost(u Usage) float64 {
	return (float64(u.PromptTokens)*m.PriceInput + float64(u.CompletionTokens)*m.PriceOutput) / 1e6
}

// Catalogue is the immutable set of models the service offers.
type Catalogue struct {
	models []Model
}

//go:embed default_models.yaml
var defaultModelsYAML []byte

// DefaultCatalogue is the built-in catalogue (default_models.yaml, embedded):
// the offline models echo (id 1, default) and echo-reverse (id 2).
func DefaultCatalogue() *Catalogue {
	c, err := Parse(defaultModelsYAML)
	if err != nil {
		panic("llm: the embedded default_models.yaml is invalid: " + err.Error())
	}
	return c
}

// NewCatalogue returns a catalogue of models, or every problem Validate finds.
func NewCatalogue(models ...Model) (*Catalogue, error) {
	c := &Catalogue{models: append([]Model(nil), models...)}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Load reads a models.yaml file; an empty path gives [DefaultCatalogue].
func Load(path string) (*Catalogue, error) {
	if path == "" {
		return DefaultCatalogue(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llm: load models: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("llm: load models from %s: %w", path, err)
	}
	return c, nil
}

// modelsFile is the shape of models.yaml.
type modelsFile struct {
	Models []modelEntry `yaml:"models"`
}

type modelEntry struct {
	ID        int64  `yaml:"id"`
	Name      string `yaml:"name"`
	Provider  string `yaml:"provider"`
	BaseURL   string `yaml:"base_url"`
	Model     string `yaml:"model"`
	APIKeyEnv string `yaml:"api_key_env"`
	Timeout   string `yaml:"timeout"`
	Retries   *int   `yaml:"retries"`
	// StreamDelay is a Go duration, like Timeout.
	StreamDelay string `yaml:"stream_delay"`
	Price       struct {
		Input  float64 `yaml:"input"`
		Output float64 `yaml:"output"`
	} `yaml:"price_per_million_tokens"`
	Default bool `yaml:"default"`
}

// Parse reads models.yaml content: unknown keys are errors, left-out timeout
// and retries take DefaultTimeout and DefaultRetries, and the result is
// validated. Every problem is reported at once.
func Parse(data []byte) (*Catalogue, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f modelsFile
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	var problems []error
	c := &Catalogue{}
	for i, e := range f.Models {
		m := Model{
			ID:            e.ID,
			Name:          e.Name,
			Provider:      e.Provider,
			BaseURL:       e.BaseURL,
			ProviderModel: e.Model,
			APIKeyEnv:     e.APIKeyEnv,
			Timeout:       DefaultTimeout,
			Retries:       DefaultRetries,
			PriceInput:    e.Price.Input,
			PriceOutput:   e.Price.Output,
			Default:       e.Default,
		}
		if e.Retries != nil {
			m.Retries = *e.Retries
		}
		if e.Timeout != "" {
			d, err := time.ParseDuration(e.Timeout)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s: timeout %q is not a duration with a unit, such as \"30s\"", where(i, m), e.Timeout))
				d = DefaultTimeout // reported above; keep Validate from repeating it
			}
			m.Timeout = d
		}
		if e.StreamDelay != "" {
			d, err := time.ParseDuration(e.StreamDelay)
			if err != nil {
				problems = append(problems, fmt.Errorf("%s: stream_delay %q is not a duration with a unit, such as \"30ms\"", where(i, m), e.StreamDelay))
			}
			m.StreamDelay = d
		}
		c.models = append(c.models, m)
	}
	if err := c.Validate(); err != nil {
		problems = append(problems, err)
	}
	if err := errors.Join(problems...); err != nil {
		return nil, err
	}
	return c, nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports every problem of the catalogue, joined with errors.Join:
// no models, ids below 1, duplicate ids or names, empty or spaced names,
// unknown providers, an OpenAI-compatible model without an http(s) base_url
// or a provider model, an invalid api_key_env name, a timeout that is not
// positive, retries outside 0..MaxRetries, negative prices, a stream delay
// that is negative or set on a model that is not an echo model, and
// anything but exactly one default model.
func (c *Catalogue) Validate() error {
	if len(c.models) == 0 {
		return errors.New("no models: the catalogue needs at least one")
	}
	var problems []error
	add := func(i int, m Model, format string, args ...any) {
		problems = append(problems, fmt.Errorf("%s: %s", where(i, m), fmt.Sprintf(format, args...)))
	}
	ids := map[int64]int{}
	names := map[string]int{}
	var defaults []string
	for i, m := range c.models {
		if m.ID < 1 {
			add(i, m, "id must be an integer >= 1")
		} else if j, ok := ids[m.ID]; ok {
			add(i, m, "id %d is already used by %s", m.ID, where(j, c.models[j]))
		} else {
			ids[m.ID] = i
		}
		switch {
		case m.Name == "":
			add(i, m, "name is required")
		case strings.IndexFunc(m.Name, unicode.IsSpace) >= 0:
			add(i, m, "name must not contain spaces")
		case len([]rune(m.Name)) > MaxNameLength:
			add(i, m, "name is longer than %d characters", MaxNameLength)
		}
		if j, ok := names[m.Name]; ok && m.Name != "" {
			add(i, m, "name %q is already used by %s", m.Name, where(j, c.models[j]))
		} else {
			names[m.Name] = i
		}
		switch m.Provider {
		case ProviderEcho, ProviderEchoReverse:
		case ProviderOpenAI:
			if u, err := url.Parse(m.BaseURL); m.BaseURL == "" {
				add(i, m, "base_url is required for provider %q", ProviderOpenAI)
			} else if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add(i, m, "base_url %q is not an http(s) URL", m.BaseURL)
			}
			if m.ProviderModel == "" {
				add(i, m, "model (the provider's model id) is required for provider %q", ProviderOpenAI)
			}
		case "":
			add(i, m, "provider is required (%s, %s or %s)", ProviderEcho, ProviderEchoReverse, ProviderOpenAI)
		default:
			add(i, m, "unknown provider %q (want %s, %s or %s)", m.Provider, ProviderEcho, ProviderEchoReverse, ProviderOpenAI)
		}
		if m.APIKeyEnv != "" && !envName.MatchString(m.APIKeyEnv) {
			add(i, m, "api_key_env %q is not an environment variable name", m.APIKeyEnv)
		}
		if m.Timeout <= 0 {
			add(i, m, "timeout must be positive, got %s", m.Timeout)
		}
		if m.StreamDelay < 0 {
			add(i, m, "stream_delay must not be negative, got %s", m.StreamDelay)
		} else if m.StreamDelay > 0 && m.Provider == ProviderOpenAI {
			add(i, m, "stream_delay is for the offline echo models; provider %q streams at its own pace", ProviderOpenAI)
		}
		if m.Retries < 0 || m.Retries > MaxRetries {
			add(i, m, "retries must be between 0 and %d, got %d", MaxRetries, m.Retries)
		}
		if badPrice(m.PriceInput) || badPrice(m.PriceOutput) {
			add(i, m, "prices must be non-negative numbers")
		}
		if m.Default {
			defaults = append(defaults, fmt.Sprintf("%q", m.Name))
		}
	}
	switch len(defaults) {
	case 1:
	case 0:
		problems = append(problems, errors.New("no default model: mark exactly one with default: true"))
	default:
		problems = append(problems, fmt.Errorf("%d default models (%s): mark exactly one with default: true", len(defaults), strings.Join(defaults, ", ")))
	}
	return errors.Join(problems...)
}

func badPrice(p float64) bool { return p < 0 || math.IsNaN(p) || math.IsInf(p, 0) }

// where names a model in problems: models[2] "gpt" (id 3).
func where(i int, m Model) string {
	return fmt.Sprintf("models[%d] %q (id %d)", i, m.Name, m.ID)
}

// Models returns the catalogue's models in file order.
func (c *Catalogue) Models() []Model { return append([]Model(nil), c.models...) }

// ByName finds a model by its logical name (exact, case-sensitive).
func (c *Catalogue) ByName(name string) (Model, bool) {
	for _, m := range c.models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}

// ByID finds a model by its id.
func (c *Catalogue) ByID(id int64) (Model, bool) {
	for _, m := range c.models {
		if m.ID == id {
			return m, true
		}
	}
	return Model{}, false
}

// Default returns the service's default model.
func (c *Catalogue) Default() Model {
	for _, m := range c.models {
		if m.Default {
			return m
		}
	}
	return Model{} // unreachable for a validated catalogue
}
