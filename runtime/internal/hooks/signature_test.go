package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// sign is HMAC-SHA256(secret, msg) in hex, made here with crypto/hmac so
// the tests do not trust the code under test to sign.
func sign(secret, msg string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil))
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// GitHub's "Validating webhook deliveries" publishes this test vector.
func TestGitHubDocumentedVector(t *testing.T) {
	t.Parallel()
	const (
		secret  = "It's a Secret to Everybody"
		payload = "Hello, World!"
		want    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	if got := "sha256=" + sign(secret, payload); got != want {
		t.Fatalf("crypto/hmac gives %s, GitHub documents %s", got, want)
	}
	if err := VerifyGitHub([]byte(secret), header(GitHubHeader, want), []byte(payload), time.Time{}); err != nil {
		t.Fatalf("GitHub's own example refused: %v", err)
	}
	if err := VerifyGitHub([]byte(secret), header(GitHubHeader, want), []byte(payload+" "), time.Time{}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("a changed body: %v, want ErrMismatch", err)
	}
}

// stripeHeader is a Stripe-Signature in the shape Stripe documents
// (t=1492774577,v1=...,v0=...), with v1 over "<t>.<body>".
func stripeHeader(t int64, body string, secrets ...string) string {
	parts := []string{fmt.Sprintf("t=%d", t)}
	for _, s := range secrets {
		parts = append(parts, "v1="+sign(s, fmt.Sprintf("%d.%s", t, body)))
	}
	// A v0 signature (Stripe's test-mode scheme) is ignored: it must not
	// be what passes, so it is made with a secret nobody checks against.
	parts = append(parts, "v0="+sign("v0-secret", body))
	return strings.Join(parts, ",")
}

func TestVerify(t *testing.T) {
	t.Parallel()
	const secret, body = "s3cret-0123456789", `{"ok":true}`
	stripeAt := int64(1492774577) // the timestamp of Stripe's documented header
	now := time.Unix(stripeAt, 0)
	good := sign(secret, body)
	stripe := VerifyStripe(DefaultTolerance)
	tests := []struct {
		name   string
		verify Verifier
		hdr    http.Header
		at     time.Time
		want   error // nil: passes
	}{
		{"github good", VerifyGitHub, header(GitHubHeader, "sha256="+good), now, nil},
		{"github upper-case hex", VerifyGitHub, header(GitHubHeader, "sha256="+strings.ToUpper(good)), now, nil},
		{"github other secret", VerifyGitHub, header(GitHubHeader, "sha256="+sign("other", body)), now, ErrMismatch},
		{"github missing", VerifyGitHub, header("X-Hub-Signature", "sha1=abc"), now, ErrNoSignature},
		{"github empty", VerifyGitHub, header(GitHubHeader, " "), now, ErrNoSignature},
		{"github no prefix", VerifyGitHub, header(GitHubHeader, good), now, ErrMalformed},
		{"github not hex", VerifyGitHub, header(GitHubHeader, "sha256=zz"+good[2:]), now, ErrMalformed},
		{"github short", VerifyGitHub, header(GitHubHeader, "sha256="+good[:40]), now, ErrMalformed},
		{"github twice", VerifyGitHub, header(GitHubHeader, "sha256="+good, GitHubHeader, "sha256="+good), now, ErrMalformed},

		{"hmac bare hex", VerifyHMAC(DefaultSignatureHeader), header(DefaultSignatureHeader, good), now, nil},
		{"hmac prefixed", VerifyHMAC(DefaultSignatureHeader), header(DefaultSignatureHeader, "sha256="+good), now, nil},
		{"hmac own header", VerifyHMAC("X-Acme-Sig"), header("x-acme-sig", good), now, nil},
		{"hmac wrong header", VerifyHMAC("X-Acme-Sig"), header(DefaultSignatureHeader, good), now, ErrNoSignature},
		{"hmac bad", VerifyHMAC(DefaultSignatureHeader), header(DefaultSignatureHeader, sign(secret, body+"x")), now, ErrMismatch},

		{"stripe good", stripe, header(StripeHeader, stripeHeader(stripeAt, body, secret)), now, nil},
		{"stripe rotated, new first", stripe, header(StripeHeader, stripeHeader(stripeAt, body, secret, "old-secret")), now, nil},
		{"stripe rotated, new second", stripe, header(StripeHeader, stripeHeader(stripeAt, body, "old-secret", secret)), now, nil},
		{"stripe other secret", stripe, header(StripeHeader, stripeHeader(stripeAt, body, "old-secret")), now, ErrMismatch},
		{"stripe v0 only", stripe, header(StripeHeader, fmt.Sprintf("t=%d,v0=%s", stripeAt, good)), now, ErrMalformed},
		{"stripe signed other time", stripe, header(StripeHeader, strings.Replace(stripeHeader(stripeAt, body, secret), "t=1492774577", "t=1492774578", 1)), now, ErrMismatch},
		{"stripe at tolerance", stripe, header(StripeHeader, stripeHeader(stripeAt, body, secret)), now.Add(DefaultTolerance), nil},
		{"stripe too old", stripe, header(StripeHeader, stripeHeader(stripeAt, body, secret)), now.Add(DefaultTolerance + time.Second), ErrTimestamp},
		{"stripe too new", stripe, header(StripeHeader, stripeHeader(stripeAt, body, secret)), now.Add(-DefaultTolerance - time.Second), ErrTimestamp},
		{"stripe own tolerance", VerifyStripe(time.Hour), header(StripeHeader, stripeHeader(stripeAt, body, secret)), now.Add(59 * time.Minute), nil},
		{"stripe missing", stripe, header(GitHubHeader, good), now, ErrNoSignature},
		{"stripe no t", stripe, header(StripeHeader, "v1="+good), now, ErrMalformed},
		{"stripe two t", stripe, header(StripeHeader, fmt.Sprintf("t=1,t=2,v1=%s", good)), now, ErrMalformed},
		{"stripe t not a number", stripe, header(StripeHeader, "t=soon,v1="+good), now, ErrMalformed},
		{"stripe negative t", stripe, header(StripeHeader, "t=-5,v1="+good), now, ErrMalformed},
		{"stripe not key=value", stripe, header(StripeHeader, "t=1,"+good), now, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.verify([]byte(secret), tt.hdr, []byte(body), tt.at)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			var se *SignatureError
			if !errors.As(err, &se) || se.Reason == "" || strings.Contains(se.Reason, good) {
				t.Fatalf("the refusal %q must say why without quoting the expected signature", err)
			}
		})
	}
}

// A header over the rotation bound keeps its first signatures: a sender
// cannot make one delivery cost many comparisons.
func TestStripeSignaturesBounded(t *testing.T) {
	t.Parallel()
	const secret, body = "s3cret-0123456789", `{}`
	var parts []string
	parts = append(parts, "t=100")
	for i := 0; i < maxSignatures; i++ {
		parts = append(parts, "v1="+sign(fmt.Sprint("other", i), "100."+body))
	}
	parts = append(parts, "v1="+sign(secret, "100."+body))
	err := VerifyStripe(DefaultTolerance)([]byte(secret), header(StripeHeader, strings.Join(parts, ",")), []byte(body), time.Unix(100, 0))
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("a good signature after %d others: %v, want ErrMismatch", maxSignatures, err)
	}
}

// Whatever a sender puts in Stripe-Signature, the check neither panics
// nor passes without the secret's signature.
func FuzzVerifyStripe(f *testing.F) {
	f.Add("t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39")
	f.Add("t=,v1=")
	f.Add(",,,=,t==1")
	f.Fuzz(func(t *testing.T, v string) {
		const secret, body = "fuzz-secret", `{}`
		err := VerifyStripe(DefaultTolerance)([]byte(secret), header(StripeHeader, v), []byte(body), time.Unix(1492774577, 0))
		if err != nil {
			return
		}
		ts, sigs, _ := parseStripe(v)
		want := sign(secret, ts+"."+body)
		if !slices.ContainsFunc(sigs, func(s string) bool { return strings.EqualFold(s, want) }) {
			t.Fatalf("%q passed without a signature made with the secret", v)
		}
	})
}
