package hooks

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/weirhq/weir/flows"
	"github.com/weirhq/weir/internal/textbound"
)

// Bounds of a hook and of what a delivery may carry.
const (
	// MaxBody is the most a delivery's body may be, and the default of a
	// hook's max_body: the bound of an event's payload, which the body
	// becomes.
	MaxBody = 256 << 10
	// MinBody is the smallest max_body a hook may set.
	MinBody = 1 << 10
	// MaxSecretBytes bounds a secret (and the secret file read for it).
	MaxSecretBytes = 4 << 10
	// MaxKeyBytes bounds an event key taken from a body.
	MaxKeyBytes = 256
	// MaxIDBytes bounds an event id taken from a delivery.
	MaxIDBytes = 256
	// MaxTolerance bounds a Stripe tolerance: a day-old signature proves
	// little about who sends it now.
	MaxTolerance = 24 * time.Hour
)

// Hook is one configured webhook: `hook "NAME" { ... }` in the daemon's
// config, served at POST /v1/hooks/NAME.
type Hook struct {
	// Name is the hook's label, the last segment of its path.
	Name string `json:"name"`
	// Owner is the owner its events belong to ("": as the Accept function
	// decides; the daemon's is its own OS user).
	Owner string `json:"owner,omitempty"`
	// Secret is the shared secret deliveries are signed with. Never shown.
	Secret []byte `json:"-"`
	// SecretFile is where Secret was read from, for the config view.
	SecretFile string `json:"secret_file,omitempty"`
	// Scheme is the provider's signature scheme.
	Scheme Scheme `json:"signature"`
	// SignatureHeader is the hmac-sha256 scheme's header ("" : the
	// default); the other schemes' headers are their providers'.
	SignatureHeader string `json:"signature_header,omitempty"`
	// Tolerance is how far a Stripe timestamp may be from now (0 : the
	// default); the other schemes carry no timestamp.
	Tolerance time.Duration `json:"tolerance,omitempty"`
	// Event is the name of the events the hook makes; with EventHeader,
	// the prefix of it: Event "github" and EventHeader "X-GitHub-Event"
	// make "github.push" of a delivery whose header says "push".
	Event       string `json:"event"`
	EventHeader string `json:"event_header,omitempty"`
	// IDHeader names the header holding the delivery's id, which becomes
	// the event id (a provider's retry carries the same one). IDKey is the
	// alternative for providers that send no such header (Stripe): a JSON
	// pointer to the id in the body. Exactly one is set.
	IDHeader string `json:"id_header,omitempty"`
	IDKey    string `json:"id_key,omitempty"`
	// Key is a JSON pointer (RFC 6901) into the body whose string or
	// number is the event's key ("" : no key).
	Key string `json:"key,omitempty"`
	// MaxBody bounds a delivery's body (0 : MaxBody).
	MaxBody int64 `json:"max_body,omitempty"`
}

// namePattern is what a hook may be called: it is a path segment.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// headerPattern is an HTTP header name (RFC 9110's token).
var headerPattern = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")

// CheckName says what is wrong with a hook name (nil: nothing).
func CheckName(name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("hook name %q: a hook is 1-64 letters, digits and _ . -, starting with a letter or digit (it is the last segment of POST /v1/hooks/NAME)", name)
	}
	return nil
}

// CheckEventName says what is wrong with an event name (nil: nothing):
// the names flows listen for (flows.ValidEventName), so a hook never
// makes an event no on_event or wait could name.
func CheckEventName(name string) error {
	if !flows.ValidEventName(name) {
		return fmt.Errorf("event name %q: event names are dot-separated lower-case identifiers such as \"github.push\" (letters, digits and '_', at most %d bytes)",
			textbound.Quote(name), flows.MaxEventNameBytes)
	}
	return nil
}

// CheckHeaderName says what is wrong with a header name (nil: nothing).
func CheckHeaderName(name string) error {
	if !headerPattern.MatchString(name) {
		return fmt.Errorf("header name %q is not an HTTP header name", name)
	}
	return nil
}

// ParseScheme reads a signature scheme, suggesting the closest one to a
// misspelt name.
func ParseScheme(s string) (Scheme, error) {
	names := make([]string, len(Schemes))
	for i, sc := range Schemes {
		if string(sc) == s {
			return sc, nil
		}
		names[i] = string(sc)
	}
	msg := fmt.Sprintf("unknown signature scheme %q (one of %s)", s, strings.Join(names, ", "))
	if m := flows.Suggest(s, names); m != "" {
		msg += fmt.Sprintf("; did you mean %q?", m)
	}
	return "", errors.New(msg)
}

// Problem is one thing wrong with a hook: the block key it concerns
// ("signature", "secret", "tolerance", ...) and what is wrong, so the
// config can place it at that key's line.
type Problem struct {
	Key     string
	Message string
}

// Check says what is wrong with h (nil: nothing). The config reads a
// block into a Hook and reports these at the keys' positions; the
// handler refuses a hook that fails them.
func (h *Hook) Check() []Problem {
	var out []Problem
	add := func(key string, err error) {
		if err != nil {
			out = append(out, Problem{key, err.Error()})
		}
	}
	add("name", CheckName(h.Name))
	_, err := ParseScheme(string(h.Scheme))
	add("signature", err)
	switch n := len(h.Secret); {
	case n == 0:
		add("secret", errors.New("the secret is empty"))
	case n > MaxSecretBytes:
		add("secret", fmt.Errorf("the secret is %d bytes; at most %d", n, MaxSecretBytes))
	}
	out = append(out, h.checkScheme()...)
	add("event", CheckEventName(h.Event))
	if h.EventHeader != "" {
		add("event_header", CheckHeaderName(h.EventHeader))
	}
	out = append(out, h.checkID()...)
	if _, err := ParsePointer(h.Key); err != nil {
		add("key", fmt.Errorf("key: %w", err))
	}
	if h.MaxBody != 0 && (h.MaxBody < MinBody || h.MaxBody > MaxBody) {
		add("max_body", fmt.Errorf("max_body %d is outside %d to %d bytes (an event's payload is at most %d)", h.MaxBody, MinBody, MaxBody, MaxBody))
	}
	return out
}

// checkScheme refuses the keys a scheme does not read: a tolerance on a
// scheme without a timestamp would promise a check that never happens.
func (h *Hook) checkScheme() []Problem {
	var out []Problem
	if h.SignatureHeader != "" {
		if h.Scheme != HMACSHA256 {
			out = append(out, Problem{"signature_header", fmt.Sprintf("signature_header applies to signature = %q only (%s signs in its own header)", HMACSHA256, h.Scheme)})
		} else if err := CheckHeaderName(h.SignatureHeader); err != nil {
			out = append(out, Problem{"signature_header", "signature_header: " + err.Error()})
		}
	}
	switch {
	case h.Tolerance != 0 && h.Scheme != Stripe:
		out = append(out, Problem{"tolerance", fmt.Sprintf("tolerance applies to signature = %q only (%s signatures carry no timestamp; a replay is a duplicate delivery id)", Stripe, h.Scheme)})
	case h.Tolerance != 0 && (h.Tolerance < time.Second || h.Tolerance > MaxTolerance):
		out = append(out, Problem{"tolerance", fmt.Sprintf("tolerance %s is outside 1s to %s", h.Tolerance, MaxTolerance)})
	}
	return out
}

func (h *Hook) checkID() []Problem {
	switch {
	case (h.IDHeader == "") == (h.IDKey == ""):
		return []Problem{{"id_header", "a hook needs exactly one of id_header (the header of the delivery id, e.g. \"X-GitHub-Delivery\") or id_key (a JSON pointer to it in the body, e.g. \"/id\"): the delivery id is the event id that makes a provider's retry a duplicate"}}
	case h.IDHeader != "":
		if err := CheckHeaderName(h.IDHeader); err != nil {
			return []Problem{{"id_header", "id_header: " + err.Error()}}
		}
	default:
		if _, err := ParsePointer(h.IDKey); err != nil {
			return []Problem{{"id_key", "id_key: " + err.Error()}}
		}
	}
	return nil
}

// verifier is the hook's signature check.
func (h *Hook) verifier() Verifier {
	switch h.Scheme {
	case GitHub:
		return VerifyGitHub
	case Stripe:
		return VerifyStripe(h.tolerance())
	default:
		header := h.SignatureHeader
		if header == "" {
			header = DefaultSignatureHeader
		}
		return VerifyHMAC(header)
	}
}

func (h *Hook) tolerance() time.Duration {
	if h.Tolerance == 0 {
		return DefaultTolerance
	}
	return h.Tolerance
}

func (h *Hook) maxBody() int64 {
	if h.MaxBody == 0 {
		return MaxBody
	}
	return h.MaxBody
}

// Verify checks a delivery's signature against the hook's secret.
func (h *Hook) Verify(hdr http.Header, body []byte, now time.Time) error {
	return h.verifier()(h.Secret, hdr, body, now)
}
