package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/weirhq/weir/sdk"
)

// config is the plugin's section of weir's configuration.
type config struct {
	// TimeoutMS bounds one request, redirects included (default 30000).
	TimeoutMS int64 `json:"timeout_ms"`
	// MaxBodyBytes bounds the response body kept (default 1 MiB); a longer
	// body is cut and the answer says truncated.
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// MaxRedirects bounds redirects followed (default 5; 0 follows none).
	MaxRedirects *int `json:"max_redirects"`
	// AllowedHosts, if not empty, is the only hosts requests may go to.
	AllowedHosts []string `json:"allowed_hosts"`
}

func loadConfig(call *sdk.Call) (config, error) {
	c := config{TimeoutMS: 30000, MaxBodyBytes: 1 << 20}
	if err := call.DecodeConfig(&c); err != nil {
		return c, err
	}
	if c.MaxRedirects == nil {
		five := 5
		c.MaxRedirects = &five
	}
	return c, nil
}

const (
	headersSchema = `{"type":"object","additionalProperties":{"type":"string"}}`
	urlSchema     = `{"type":"string","pattern":"^https?://"}`
)

// endpoint is what one http.* tool sends: its input schema and its run
// both follow from it.
type endpoint struct {
	method string
	body   bool // the input may carry a request body
	keyed  bool // weir's idempotency key goes out in a header
}

func requestSchema(e endpoint) string {
	props := `"url":` + urlSchema + `,"headers":` + headersSchema + `,"fail_on_status":{"type":"boolean"}`
	if e.body {
		props += `,"body":{"type":"string"},"body_encoding":{"enum":["utf-8","base64"]},"content_type":{"type":"string"}`
	}
	if e.keyed {
		props += `,"key_header":{"type":"string","minLength":1}`
	}
	return `{"type":"object","required":["url"],"additionalProperties":false,"properties":{` + props + `}}`
}

func tools() []sdk.Tool {
	get := endpoint{method: http.MethodGet}
	head := endpoint{method: http.MethodHead}
	post := endpoint{method: http.MethodPost, body: true}
	put := endpoint{method: http.MethodPut, body: true}
	postKeyed := endpoint{method: http.MethodPost, body: true, keyed: true}
	putKeyed := endpoint{method: http.MethodPut, body: true, keyed: true}
	return []sdk.Tool{
		{Name: "http.get", Description: "GET url; answers status, headers and body.", Effect: sdk.EffectRead,
			InputSchema: requestSchema(get), Run: do(get)},
		{Name: "http.head", Description: "HEAD url; answers status and headers.", Effect: sdk.EffectRead,
			InputSchema: requestSchema(head), Run: do(head)},
		{Name: "http.post", Description: "POST body to url. Not idempotent: at most once per logical call.", Effect: sdk.EffectAtMostOnce,
			InputSchema: requestSchema(post), Run: do(post)},
		{Name: "http.put", Description: "PUT body to url. Not idempotent: at most once per logical call.", Effect: sdk.EffectAtMostOnce,
			InputSchema: requestSchema(put), Run: do(put)},
		{Name: "http.post_keyed", Description: "POST body to url with weir's idempotency key in a header (Idempotency-Key, or key_header): idempotent if the server dedupes on it.", Effect: sdk.EffectIdempotent,
			InputSchema: requestSchema(postKeyed), Run: do(postKeyed)},
		{Name: "http.put_keyed", Description: "PUT body to url with weir's idempotency key in a header (Idempotency-Key, or key_header): idempotent if the server dedupes on it.", Effect: sdk.EffectIdempotent,
			InputSchema: requestSchema(putKeyed), Run: do(putKeyed)},
	}
}

type request struct {
	URL          string            `json:"url"`
	Headers      map[string]string `json:"headers"`
	Body         string            `json:"body"`
	BodyEncoding string            `json:"body_encoding"`
	ContentType  string            `json:"content_type"`
	KeyHeader    string            `json:"key_header"`
	// FailOnStatus turns 5xx and 429 answers into retryable errors and
	// other 4xx into permanent ones, instead of answering them.
	FailOnStatus bool `json:"fail_on_status"`
}

type response struct {
	Status       int                 `json:"status"`
	Headers      map[string][]string `json:"headers"`
	Body         string              `json:"body,omitempty"`
	BodyEncoding string              `json:"body_encoding,omitempty"`
	Truncated    bool                `json:"truncated,omitempty"`
	URL          string              `json:"url"`
}

func do(e endpoint) func(ctx context.Context, call *sdk.Call) (any, error) {
	return func(ctx context.Context, call *sdk.Call) (any, error) {
		var in request
		if err := call.Decode(&in); err != nil {
			return nil, err
		}
		c, err := loadConfig(call)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(in.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("url %q is not an http(s) URL", in.URL)
		}
		if err := allowed(c, u); err != nil {
			return nil, err
		}
		var body io.Reader
		if in.Body != "" {
			b := []byte(in.Body)
			if in.BodyEncoding == "base64" {
				if b, err = base64.StdEncoding.DecodeString(in.Body); err != nil {
					return nil, fmt.Errorf("body is not base64: %w", err)
				}
			}
			body = bytes.NewReader(b)
		}
		ctx, cancel := context.WithTimeout(ctx, time.Duration(c.TimeoutMS)*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, e.method, u.String(), body)
		if err != nil {
			return nil, err
		}
		// The run's trace goes on with the request (W3C Trace Context),
		// unless the flow set a traceparent of its own.
		if call.TraceParent != "" {
			req.Header.Set("traceparent", call.TraceParent)
			if call.TraceState != "" {
				req.Header.Set("tracestate", call.TraceState)
			}
		}
		for k, v := range in.Headers {
			req.Header.Set(k, v)
		}
		if in.ContentType != "" {
			req.Header.Set("Content-Type", in.ContentType)
		}
		if e.keyed {
			if call.IdempotencyKey == "" {
				return nil, errors.New("a keyed request needs an idempotency key")
			}
			h := in.KeyHeader
			if h == "" {
				h = "Idempotency-Key"
			}
			req.Header.Set(h, call.IdempotencyKey)
		}
		client := &http.Client{CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) > *c.MaxRedirects {
				return &policyError{fmt.Sprintf("stopped after %d redirects (max_redirects)", *c.MaxRedirects)}
			}
			return allowed(c, r.URL)
		}}
		resp, err := client.Do(req)
		if err != nil {
			var pe *policyError
			if errors.As(err, &pe) {
				return nil, pe
			}
			// Network failures and timeouts may go away. (If weir
			// cancelled the call, the SDK reports it as cancelled.)
			return nil, sdk.Retryable(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, c.MaxBodyBytes+1))
		if err != nil {
			return nil, sdk.Retryable(fmt.Errorf("reading the body: %w", err))
		}
		out := response{Status: resp.StatusCode, Headers: resp.Header, URL: resp.Request.URL.String()}
		if int64(len(b)) > c.MaxBodyBytes {
			b, out.Truncated = b[:c.MaxBodyBytes], true
		}
		if len(b) > 0 {
			if utf8.Valid(b) {
				out.Body, out.BodyEncoding = string(b), "utf-8"
			} else {
				out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString(b), "base64"
			}
		}
		if in.FailOnStatus {
			switch s := resp.StatusCode; {
			case s >= 500 || s == http.StatusTooManyRequests:
				return nil, sdk.Retryable(fmt.Errorf("%s %s: %s", e.method, in.URL, resp.Status))
			case s >= 400:
				return nil, fmt.Errorf("%s %s: %s", e.method, in.URL, resp.Status)
			}
		}
		return out, nil
	}
}

func allowed(c config, u *url.URL) error {
	if len(c.AllowedHosts) == 0 || slices.Contains(c.AllowedHosts, u.Hostname()) {
		return nil
	}
	return &policyError{fmt.Sprintf("host %q is not allowed (allowed_hosts)", u.Hostname())}
}

// policyError is a request refused by the configuration: permanent.
type policyError struct{ msg string }

func (e *policyError) Error() string { return e.msg }
