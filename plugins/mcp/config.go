package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// config is the plugin's section of weir's configuration:
//
//	plugin "mcp" {
//	  servers = {
//	    files   = { command = ["/usr/local/bin/files-mcp", "--root", "/srv/docs"], env = ["FILES_KEY"] }
//	    tickets = { url = "http://127.0.0.1:9100/mcp", token_env = "TICKETS_TOKEN" }
//	  }
//	  idempotent        = ["files-read_file"]
//	  trust_annotations = ["files"]
//	  env               = ["TICKETS_TOKEN", "FILES_KEY"] # the host's
//	}
type config struct {
	Servers map[string]*serverConfig `json:"servers"`
	// Idempotent lists weir tool parts (SERVER-TOOL) the operator vouches
	// for: their calls may be retried.
	Idempotent []string `json:"idempotent"`
	// TrustAnnotations lists servers whose tool annotations are believed:
	// readOnlyHint makes a tool read, idempotentHint (not destructive)
	// idempotent.
	TrustAnnotations []string `json:"trust_annotations"`
}

type serverConfig struct {
	// Command is the stdio server's argv; Url the streamable HTTP
	// endpoint. Exactly one is set.
	Command []string `json:"command"`
	URL     string   `json:"url"`
	// TokenEnv names the variable holding the bearer token sent to an
	// HTTP server (pass it with the block's env).
	TokenEnv string `json:"token_env"`
	// Env names the variables of the plugin's environment a stdio server
	// is started with (pass them to the plugin with the block's env);
	// besides them it gets only PATH and HOME (stdioBaseEnv).
	Env []string `json:"env"`

	name  string
	token string   // never in an error, a log line or an output
	env   []string // a stdio server's environment, KEY=value; never logged
}

// stdioBaseEnv are the variables every stdio server gets from the
// plugin's environment, when set: what finding and running a program
// needs (npx, uvx and interpreters read them), and nothing secret.
var stdioBaseEnv = []string{"PATH", "HOME"}

// maxServerEnv bounds a server's env list.
const maxServerEnv = 64

// Limits of the configuration, named so that a refusal can cite them.
const (
	maxServers    = 32 // servers one plugin block may name
	maxServerName = 24 // bytes of a server's name
	maxArgs       = 64 // elements of a command
)

// configSchema is the JSON schema of the plugin's section, declared in the
// manifest: the host checks the section against it with file:line at
// config check and at start. parseConfig checks the same and the
// cross-field rules.
const configSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["servers"],
  "properties": {
    "servers": {
      "type": "object",
      "maxProperties": 32,
      "propertyNames": {"pattern": "^[a-z0-9][a-z0-9_]{0,23}$"},
      "additionalProperties": {
        "type": "object",
        "additionalProperties": false,
        "properties": {
          "command": {"type": "array", "minItems": 1, "maxItems": 64, "items": {"type": "string", "minLength": 1}},
          "url": {"type": "string", "pattern": "^https?://"},
          "token_env": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
          "env": {"type": "array", "maxItems": 64, "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}}
        }
      }
    },
    "idempotent": {"type": "array", "items": {"type": "string"}},
    "trust_annotations": {"type": "array", "items": {"type": "string"}}
  }
}`

// hostKeys belong to the host (docs/design.md §11), which strips them; a
// host that passes them anyway is tolerated.
var hostKeys = map[string]bool{"env": true, "memory_max": true}

// parseConfig reads and checks the section: the schema's rules (so that a
// mistake is caught even without the host's check) and the cross-field
// ones. lookupEnv reads the tokens.
func parseConfig(raw json.RawMessage, lookupEnv func(string) (string, bool)) (*config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("config: not an object: %v", err)
	}
	for k := range top {
		if hostKeys[k] {
			delete(top, k)
			continue
		}
		if k != "servers" && k != "idempotent" && k != "trust_annotations" {
			return nil, fmt.Errorf("config: unknown key %q (servers, idempotent, trust_annotations)", k)
		}
	}
	clean, _ := json.Marshal(top)
	dec := json.NewDecoder(bytes.NewReader(clean))
	dec.DisallowUnknownFields()
	var c config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %v", err)
	}
	if len(c.Servers) == 0 {
		return nil, fmt.Errorf("config: servers: name at least one MCP server")
	}
	if len(c.Servers) > maxServers {
		return nil, fmt.Errorf("config: servers: %d servers, at most %d", len(c.Servers), maxServers)
	}
	for name, s := range c.Servers {
		if s == nil {
			return nil, fmt.Errorf("config: servers.%s: empty", name)
		}
		s.name = name
		if err := checkServerName(name); err != nil {
			return nil, fmt.Errorf("config: servers.%s: %v", name, err)
		}
		switch {
		case len(s.Command) == 0 && s.URL == "":
			return nil, fmt.Errorf("config: servers.%s: set command (a stdio server) or url (streamable HTTP)", name)
		case len(s.Command) > 0 && s.URL != "":
			return nil, fmt.Errorf("config: servers.%s: set command or url, not both", name)
		case len(s.Command) > maxArgs:
			return nil, fmt.Errorf("config: servers.%s: command has %d elements, at most %d", name, len(s.Command), maxArgs)
		case len(s.Command) > 0 && s.TokenEnv != "":
			return nil, fmt.Errorf("config: servers.%s: token_env is for an HTTP server; a stdio server gets its variables from the block's env", name)
		}
		for i, a := range s.Command {
			if a == "" {
				return nil, fmt.Errorf("config: servers.%s: command[%d] is empty", name, i)
			}
		}
		if err := s.setEnv(lookupEnv); err != nil {
			return nil, fmt.Errorf("config: servers.%s: %v", name, err)
		}
		if s.URL != "" {
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("config: servers.%s: url %q: want http(s)://HOST/PATH", name, s.URL)
			}
		}
		if s.TokenEnv != "" {
			tok, ok := lookupEnv(s.TokenEnv)
			if !ok || tok == "" {
				return nil, fmt.Errorf("config: servers.%s: token_env names %s, which is not set: list it in the plugin block's env", name, s.TokenEnv)
			}
			s.token = tok
		}
	}
	for _, n := range c.TrustAnnotations {
		if c.Servers[n] == nil {
			return nil, fmt.Errorf("config: trust_annotations: %q is not a server of servers (%s)", n, strings.Join(c.serverNames(), ", "))
		}
	}
	for _, p := range c.Idempotent {
		srv, _, ok := strings.Cut(p, toolSep)
		if !ok || c.Servers[srv] == nil {
			hint := ""
			if s, t, ok := strings.Cut(p, "__"); ok && c.Servers[s] != nil {
				hint = fmt.Sprintf(": the tool is named %s%s%s (see `weir plugin ls --config`)", s, toolSep, t)
			}
			return nil, fmt.Errorf("config: idempotent: %q is not SERVER%sTOOL of a configured server (%s)%s", p, toolSep, strings.Join(c.serverNames(), ", "), hint)
		}
	}
	return &c, nil
}

// checkServerName holds what the schema's pattern says, plus what a
// pattern cannot: no "__" (a model could not be shown it).
func checkServerName(name string) error {
	if name == "" || len(name) > maxServerName {
		return fmt.Errorf("a server's name is 1 to %d bytes", maxServerName)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (i > 0 && r == '_')
		if !ok {
			return fmt.Errorf("a server's name is lower-case letters, digits and '_', starting with a letter or digit (%q separates it from the tool's)", toolSep)
		}
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("a server's name may not hold \"__\"")
	}
	return nil
}

func (c *config) serverNames() []string {
	out := make([]string, 0, len(c.Servers))
	for n := range c.Servers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// setEnv makes a stdio server's environment: PATH and HOME, then the
// variables its env names, read from the plugin's environment. Nothing
// else of the plugin's environment (other servers' secrets, weir's own
// settings, the plugin protocol's keys) reaches the server.
func (s *serverConfig) setEnv(lookupEnv func(string) (string, bool)) error {
	if len(s.Env) > 0 && s.URL != "" {
		return fmt.Errorf("env is for a stdio server; an HTTP server's token comes from token_env")
	}
	if len(s.Env) > maxServerEnv {
		return fmt.Errorf("env names %d variables, at most %d", len(s.Env), maxServerEnv)
	}
	if s.URL != "" {
		return nil
	}
	seen := map[string]bool{}
	for _, k := range stdioBaseEnv {
		if v, ok := lookupEnv(k); ok {
			s.env = append(s.env, k+"="+v)
			seen[k] = true
		}
	}
	for _, k := range s.Env {
		if !envName(k) {
			return fmt.Errorf("env: %q is not a variable name", k)
		}
		if seen[k] {
			continue
		}
		v, ok := lookupEnv(k)
		if !ok {
			return fmt.Errorf("env names %s, which is not set: list it in the plugin block's env", k)
		}
		s.env = append(s.env, k+"="+v)
		seen[k] = true
	}
	return nil
}

func envName(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
