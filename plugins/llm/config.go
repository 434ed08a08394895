package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/weirhq/weir/internal/escape"
)

// The provider kinds the plugin speaks.
const (
	kindOpenAI = "openai"
	// kindOpenAIResponses is the OpenAI Responses API (POST
	// /v1/responses), beside Chat Completions.
	kindOpenAIResponses = "openai-responses"
	kindAnthropic       = "anthropic"
)

// config is the plugin's section of weir's configuration:
//
//	plugin "llm" {
//	  env = ["ANTHROPIC_API_KEY"]
//	  providers = {
//	    local  = { kind = "openai",    base_url = "http://127.0.0.1:8089/v1" }
//	    claude = { kind = "anthropic", base_url = "https://api.anthropic.com", api_key_env = "ANTHROPIC_API_KEY" } # auth = "x-api-key"
//	  }
//	  models = {
//	    small = { provider = "local", model = "qwen3-4b", input_cost = 100, output_cost = 400, max_tokens = 1024 }
//	  }
//	}
type config struct {
	Providers map[string]*providerConfig
	Models    map[string]*modelConfig
}

type providerConfig struct {
	Name    string
	Kind    string
	BaseURL string
	// Auth is how the key is sent: authXAPIKey (the Messages API's
	// x-api-key header, Anthropic's default) or authBearer
	// (Authorization: Bearer, OpenAI's and some gateways').
	Auth string
	// AnthropicVersion is the anthropic-version header of every Messages
	// API request: the API version whose request and answer shapes the
	// plugin speaks, not the SDK's newest.
	AnthropicVersion string
	// APIKeyEnv names the variable the key is read from; the key itself
	// lives only in apiKey and never in an error or an output.
	APIKeyEnv string
	apiKey    string
}

type modelConfig struct {
	Alias    string
	Provider string
	// Model is the provider's model id.
	Model string
	// InputCost and OutputCost are budget units per million tokens.
	InputCost  int64
	OutputCost int64
	// MaxTokens is the default and the ceiling of a turn's output tokens.
	MaxTokens int64
	// TokenLimitField names the request field that carries MaxTokens:
	// fieldMaxCompletionTokens (OpenAI's, which its reasoning models
	// require) or fieldMaxTokens (Anthropic's, and older OpenAI-compatible
	// servers').
	TokenLimitField string
	// Limits enforced before a call; 0 means none.
	MaxConcurrent     int64
	RequestsPerMinute int64
	TokensPerMinute   int64
}

// The ways a provider's key is sent (providers.NAME.auth).
const (
	authXAPIKey = "x-api-key"
	authBearer  = "bearer"
)

// defaultAnthropicVersion is the Messages API version the plugin speaks
// unless providers.NAME.anthropic_version says otherwise: the version
// the Messages API documents for its request and stream shapes.
const defaultAnthropicVersion = "2023-06-01"

// The request fields a turn's output limit can go in
// (models.ALIAS.token_limit_field).
const (
	fieldMaxTokens           = "max_tokens"
	fieldMaxCompletionTokens = "max_completion_tokens"
	// fieldMaxOutputTokens is the Responses API's, its only one.
	fieldMaxOutputTokens = "max_output_tokens"
)

// minResponsesTokens is the least max_output_tokens the Responses API
// takes.
const minResponsesTokens = 16

// Limits of the configuration, named so that a refusal can cite them.
const (
	maxModelTokens = 1 << 24 // max_tokens of one turn
	maxCostPerMTok = 1 << 40 // input_cost/output_cost per million tokens
	maxLimitValue  = 1 << 30 // max_concurrent, requests_per_minute, tokens_per_minute
)

// hostKeys belong to the host (docs/design.md §11): it strips them before the
// plugin sees its section. A host that passes them anyway is tolerated:
// env is then checked against every api_key_env.
var hostKeys = []string{"env", "memory_max"}

var (
	topKeys      = []string{"providers", "models"}
	providerKeys = []string{"kind", "base_url", "api_key_env", "auth", "anthropic_version"}
	modelKeys    = []string{"provider", "model", "input_cost", "output_cost", "max_tokens", "token_limit_field", "max_concurrent", "requests_per_minute", "tokens_per_minute"}
)

// configSchema is the JSON schema of the plugin's section, declared in the
// manifest: the host checks the section against it with file:line at
// config check and at start (docs/design.md §11). parseConfig checks the same and
// the cross-field rules.
const configSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "providers": {
      "type": "object",
      "additionalProperties": {
        "type": "object",
        "additionalProperties": false,
        "required": ["kind"],
        "properties": {
          "kind": {"enum": ["openai", "openai-responses", "anthropic"]},
          "base_url": {"type": "string"},
          "api_key_env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
          "auth": {"enum": ["x-api-key", "bearer"]},
          "anthropic_version": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}
        }
      }
    },
    "models": {
      "type": "object",
      "additionalProperties": {
        "type": "object",
        "additionalProperties": false,
        "required": ["provider", "model", "max_tokens"],
        "properties": {
          "provider": {"type": "string"},
          "model": {"type": "string", "minLength": 1},
          "input_cost": {"type": "integer", "minimum": 0},
          "output_cost": {"type": "integer", "minimum": 0},
          "max_tokens": {"type": "integer", "minimum": 1},
          "token_limit_field": {"enum": ["max_tokens", "max_completion_tokens", "max_output_tokens"]},
          "max_concurrent": {"type": "integer", "minimum": 0},
          "requests_per_minute": {"type": "integer", "minimum": 0},
          "tokens_per_minute": {"type": "integer", "minimum": 0}
        }
      }
    }
  }
}`

// parseConfig decodes and checks the plugin's section strictly: an
// unknown key, a wrong type, an unknown provider kind, a model naming an
// unknown provider, or an api_key_env variable missing from the
// environment is refused with the path of the key at fault. getenv reads
// the plugin's environment.
func parseConfig(raw json.RawMessage, getenv func(string) (string, bool)) (*config, error) {
	c := &config{Providers: map[string]*providerConfig{}, Models: map[string]*modelConfig{}}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return c, nil
	}
	top, err := object(raw, "llm config", append(append([]string{}, topKeys...), hostKeys...))
	if err != nil {
		return nil, err
	}
	var env []string
	envGiven := false
	if e, ok := top["env"]; ok {
		envGiven = true
		if err := json.Unmarshal(e, &env); err != nil {
			return nil, fmt.Errorf("env: want a list of variable names")
		}
	}
	if p, ok := top["providers"]; ok {
		provs, err := object(p, "providers", nil)
		if err != nil {
			return nil, err
		}
		for _, name := range sortedKeys(provs) {
			pc, err := parseProvider(name, provs[name], getenv, env, envGiven)
			if err != nil {
				return nil, err
			}
			c.Providers[name] = pc
		}
	}
	if m, ok := top["models"]; ok {
		models, err := object(m, "models", nil)
		if err != nil {
			return nil, err
		}
		for _, alias := range sortedKeys(models) {
			mc, err := parseModel(alias, models[alias], c.Providers)
			if err != nil {
				return nil, err
			}
			c.Models[alias] = mc
		}
	}
	return c, nil
}

func parseProvider(name string, raw json.RawMessage, getenv func(string) (string, bool), env []string, envGiven bool) (*providerConfig, error) {
	path := "providers." + name
	f, err := object(raw, path, providerKeys)
	if err != nil {
		return nil, err
	}
	p := &providerConfig{Name: name}
	if err := str(f, path, "kind", &p.Kind, true); err != nil {
		return nil, err
	}
	switch p.Kind {
	case kindOpenAI, kindOpenAIResponses, kindAnthropic:
	default:
		return nil, fmt.Errorf("%s.kind: unknown provider kind %q (openai, openai-responses or anthropic)", path, escape.Cut(p.Kind, 40))
	}
	if err := str(f, path, "base_url", &p.BaseURL, false); err != nil {
		return nil, err
	}
	if p.BaseURL != "" {
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%s.base_url: %q is not an http or https URL", path, p.BaseURL)
		}
	}
	if err := str(f, path, "auth", &p.Auth, false); err != nil {
		return nil, err
	}
	switch {
	case p.Auth == "" && p.Kind == kindAnthropic:
		p.Auth = authXAPIKey
	case p.Auth == "":
		p.Auth = authBearer
	case p.Auth == authXAPIKey && p.Kind != kindAnthropic:
		return nil, fmt.Errorf("%s.auth: %q is the Messages API's header; a %s provider takes its key as %q", path, p.Auth, p.Kind, authBearer)
	case p.Auth != authXAPIKey && p.Auth != authBearer:
		return nil, fmt.Errorf("%s.auth: unknown %q (%s or %s)", path, escape.Cut(p.Auth, 40), authXAPIKey, authBearer)
	}
	if err := str(f, path, "anthropic_version", &p.AnthropicVersion, false); err != nil {
		return nil, err
	}
	switch {
	case p.AnthropicVersion != "" && p.Kind != kindAnthropic:
		return nil, fmt.Errorf("%s.anthropic_version: only an anthropic provider sends one", path)
	case p.AnthropicVersion == "" && p.Kind == kindAnthropic:
		p.AnthropicVersion = defaultAnthropicVersion
	case p.AnthropicVersion != "" && !isAPIVersion(p.AnthropicVersion):
		return nil, fmt.Errorf("%s.anthropic_version: %q is not a version date YYYY-MM-DD", path, escape.Cut(p.AnthropicVersion, 40))
	}
	if err := str(f, path, "api_key_env", &p.APIKeyEnv, false); err != nil {
		return nil, err
	}
	if p.APIKeyEnv != "" {
		if envGiven && !contains(env, p.APIKeyEnv) {
			return nil, fmt.Errorf("%s.api_key_env: %s is not listed in the block's env", path, p.APIKeyEnv)
		}
		key, ok := getenv(p.APIKeyEnv)
		if !ok || key == "" {
			return nil, fmt.Errorf("%s.api_key_env: the variable %s is not set in the plugin's environment (list it in the block's env and set it where weir runs)", path, p.APIKeyEnv)
		}
		p.apiKey = key
	}
	return p, nil
}

func parseModel(alias string, raw json.RawMessage, providers map[string]*providerConfig) (*modelConfig, error) {
	path := "models." + alias
	f, err := object(raw, path, modelKeys)
	if err != nil {
		return nil, err
	}
	m := &modelConfig{Alias: alias}
	if err := str(f, path, "provider", &m.Provider, true); err != nil {
		return nil, err
	}
	if _, ok := providers[m.Provider]; !ok {
		return nil, fmt.Errorf("%s.provider: no provider %q in providers (have: %s)", path, m.Provider, strings.Join(sortedKeys(providers), ", "))
	}
	if err := str(f, path, "model", &m.Model, true); err != nil {
		return nil, err
	}
	if m.Model == "" {
		return nil, fmt.Errorf("%s.model: empty", path)
	}
	kind := providers[m.Provider].Kind
	if err := str(f, path, "token_limit_field", &m.TokenLimitField, false); err != nil {
		return nil, err
	}
	// Each kind's fields, its default first.
	fields := map[string][]string{
		kindOpenAI:          {fieldMaxCompletionTokens, fieldMaxTokens},
		kindOpenAIResponses: {fieldMaxOutputTokens},
		kindAnthropic:       {fieldMaxTokens},
	}[kind]
	switch {
	case m.TokenLimitField == "":
		m.TokenLimitField = fields[0]
	case !contains(fields, m.TokenLimitField):
		return nil, fmt.Errorf("%s.token_limit_field: %q is not a field of an %s provider (%s)", path, escape.Cut(m.TokenLimitField, 40), kind, strings.Join(fields, " or "))
	}
	minTokens := int64(1)
	if kind == kindOpenAIResponses {
		minTokens = minResponsesTokens
	}
	for _, n := range []struct {
		key      string
		dst      *int64
		min, max int64
		required bool
	}{
		{"max_tokens", &m.MaxTokens, minTokens, maxModelTokens, true},
		{"input_cost", &m.InputCost, 0, maxCostPerMTok, false},
		{"output_cost", &m.OutputCost, 0, maxCostPerMTok, false},
		{"max_concurrent", &m.MaxConcurrent, 0, maxLimitValue, false},
		{"requests_per_minute", &m.RequestsPerMinute, 0, maxLimitValue, false},
		{"tokens_per_minute", &m.TokensPerMinute, 0, maxLimitValue, false},
	} {
		v, ok := f[n.key]
		if !ok {
			if n.required {
				return nil, fmt.Errorf("%s.%s: required", path, n.key)
			}
			continue
		}
		var x int64
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, fmt.Errorf("%s.%s: want a whole number, got %s", path, n.key, v)
		}
		if x < n.min || x > n.max {
			return nil, fmt.Errorf("%s.%s: %d is outside %d..%d", path, n.key, x, n.min, n.max)
		}
		*n.dst = x
	}
	return m, nil
}

// object decodes raw as a JSON object and refuses keys outside known
// (any key when known is nil).
func object(raw json.RawMessage, path string, known []string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("%s: want an object", path)
	}
	if known != nil {
		for _, k := range sortedKeys(m) {
			if !contains(known, k) {
				return nil, fmt.Errorf("%s: unknown key %q (known: %s)", path, k, strings.Join(known, ", "))
			}
		}
	}
	return m, nil
}

func str(f map[string]json.RawMessage, path, key string, dst *string, required bool) error {
	v, ok := f[key]
	if !ok {
		if required {
			return fmt.Errorf("%s.%s: required", path, key)
		}
		return nil
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("%s.%s: want a string, got %s", path, key, v)
	}
	return nil
}

// isAPIVersion tells a version date such as 2023-06-01.
func isAPIVersion(s string) bool {
	if len(s) != len("2006-01-02") {
		return false
	}
	for i, r := range s {
		if (i == 4 || i == 7) != (r == '-') || (r != '-' && (r < '0' || r > '9')) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lookupEnv is the plugin's real environment.
func lookupEnv(k string) (string, bool) { return os.LookupEnv(k) }
