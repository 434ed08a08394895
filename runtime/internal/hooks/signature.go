package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/weirhq/weir/internal/textbound"
)

// Scheme is how a provider signs its deliveries: the header it uses and
// what it signs.
type Scheme string

// The schemes a hook block may name in signature.
const (
	// GitHub: X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, body)>.
	// No timestamp: a replay is the same delivery id, a duplicate event.
	GitHub Scheme = "github"
	// Stripe: Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...], the
	// HMAC-SHA256 of "<t>.<body>"; any v1 may match (a secret being rolled
	// signs with both), and t must be within the hook's tolerance of now.
	Stripe Scheme = "stripe"
	// HMACSHA256 is the generic scheme: the hook's signature header holds
	// <hex> or sha256=<hex> of HMAC-SHA256(secret, body).
	HMACSHA256 Scheme = "hmac-sha256"
)

// Schemes are the schemes a hook may name, for messages and did-you-mean.
var Schemes = []Scheme{GitHub, Stripe, HMACSHA256}

// The headers of the schemes.
const (
	GitHubHeader = "X-Hub-Signature-256"
	StripeHeader = "Stripe-Signature"
	// DefaultSignatureHeader is the hmac-sha256 scheme's header when the
	// hook's block names none.
	DefaultSignatureHeader = "X-Signature-256"
)

// DefaultTolerance is how far a Stripe signature's timestamp may be from
// now, either way, when the hook's block says nothing: Stripe's own
// libraries' default.
const DefaultTolerance = 5 * time.Minute

// maxSignatures bounds the v1 entries of one Stripe-Signature header
// looked at: a rotation signs with two secrets, not hundreds.
const maxSignatures = 8

// SignatureError is a delivery whose signature does not prove it comes
// from the hook's provider. Reason is safe to show the sender: it names
// what is wrong with the header, never the expected value.
type SignatureError struct {
	Reason string
	// Kind is one of the Err* sentinels, for errors.Is.
	Kind error
}

func (e *SignatureError) Error() string { return "signature refused: " + e.Reason }

// Unwrap gives the sentinel to errors.Is.
func (e *SignatureError) Unwrap() error { return e.Kind }

// The kinds of SignatureError.
var (
	ErrNoSignature = errors.New("no signature")
	ErrMalformed   = errors.New("malformed signature")
	ErrMismatch    = errors.New("signature mismatch")
	ErrTimestamp   = errors.New("signature timestamp outside tolerance")
)

func sigErr(kind error, format string, args ...any) *SignatureError {
	return &SignatureError{Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

// Verifier checks one delivery: nil if it is signed with secret.
type Verifier func(secret []byte, h http.Header, body []byte, now time.Time) error

// VerifyGitHub checks GitHub's X-Hub-Signature-256.
func VerifyGitHub(secret []byte, h http.Header, body []byte, _ time.Time) error {
	v, err := oneHeader(h, GitHubHeader)
	if err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(v, "sha256=")
	if !ok {
		return sigErr(ErrMalformed, "%s must be sha256=<hex>", GitHubHeader)
	}
	return matchHex(mac(secret, body), hexSig, GitHubHeader)
}

// VerifyHMAC returns the generic scheme's verifier reading header.
func VerifyHMAC(header string) Verifier {
	return func(secret []byte, h http.Header, body []byte, _ time.Time) error {
		v, err := oneHeader(h, header)
		if err != nil {
			return err
		}
		v, _ = strings.CutPrefix(v, "sha256=")
		return matchHex(mac(secret, body), v, header)
	}
}

// VerifyStripe returns Stripe's verifier with the given tolerance.
func VerifyStripe(tolerance time.Duration) Verifier {
	return func(secret []byte, h http.Header, body []byte, now time.Time) error {
		v, err := oneHeader(h, StripeHeader)
		if err != nil {
			return err
		}
		t, sigs, err := parseStripe(v)
		if err != nil {
			return err
		}
		// Signed payload: the timestamp as sent, a dot, the raw body.
		want := mac(secret, []byte(t), []byte{'.'}, body)
		matched := false
		for _, s := range sigs {
			if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, want) {
				matched = true
			}
		}
		if !matched {
			return sigErr(ErrMismatch, "no v1 signature of %s matches", StripeHeader)
		}
		// Checked once the signature holds: "too old" then speaks of a
		// delivery that really came from the provider (a replay, a skewed
		// clock), never of a forgery.
		sec, _ := strconv.ParseInt(t, 10, 64)
		if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
			return sigErr(ErrTimestamp, "%s timestamp %s is %s from now; the tolerance is %s",
				StripeHeader, time.Unix(sec, 0).UTC().Format(time.RFC3339), age.Abs().Round(time.Second), tolerance)
		}
		return nil
	}
}

// parseStripe splits t=<unix>,v1=<hex>,... into the timestamp as written
// and the v1 signatures; other schemes (v0) are ignored, as Stripe says.
func parseStripe(v string) (string, []string, error) {
	var t string
	var sigs []string
	for i, part := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
			return "", nil, sigErr(ErrMalformed, "%s: element %d is not key=value", StripeHeader, i+1)
		case k == "t" && t != "":
			return "", nil, sigErr(ErrMalformed, "%s has two timestamps", StripeHeader)
		case k == "t":
			if _, err := strconv.ParseUint(val, 10, 63); err != nil || val == "" {
				return "", nil, sigErr(ErrMalformed, "%s timestamp %q is not a Unix time in seconds", StripeHeader, textbound.Quote(val))
			}
			t = val
		case k == "v1" && len(sigs) < maxSignatures:
			sigs = append(sigs, val)
		}
	}
	switch {
	case t == "":
		return "", nil, sigErr(ErrMalformed, "%s has no timestamp (t=)", StripeHeader)
	case len(sigs) == 0:
		return "", nil, sigErr(ErrMalformed, "%s has no v1 signature", StripeHeader)
	}
	return t, sigs, nil
}

// oneHeader is the signature header's one value.
func oneHeader(h http.Header, name string) (string, error) {
	switch v, n := single(h, name); n {
	case 0:
		return "", sigErr(ErrNoSignature, "the delivery has no %s header", name)
	case 1:
		return v, nil
	default:
		return "", sigErr(ErrMalformed, "the delivery has %d %s headers", n, name)
	}
}

// matchHex compares the hex signature sent with the MAC expected, in
// constant time.
func matchHex(want []byte, hexSig, header string) error {
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return sigErr(ErrMalformed, "%s does not hold a hex SHA-256 signature", header)
	}
	if !hmac.Equal(got, want) {
		return sigErr(ErrMismatch, "%s does not match the delivery", header)
	}
	return nil
}

// mac is HMAC-SHA256(secret, the parts in order).
func mac(secret []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}
