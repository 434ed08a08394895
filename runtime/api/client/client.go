package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"

	"go.opentelemetry.io/otel/propagation"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// DefaultMaxAnswer bounds the body of one answer the client reads (see
// WithMaxAnswer): a page of MaxListLimit runs carrying large inputs fits.
const DefaultMaxAnswer = 256 << 20

// CodeHTTP is the code of an *Error made from an answer that is not the
// API's: a proxy's error page, or a body that is not the API's JSON.
const CodeHTTP = "E_HTTP"

// ErrNoDaemon is in the chain of an error when nothing listens at the
// client's address (no socket file, connection refused): the request was
// not sent.
var ErrNoDaemon = errors.New("no weir daemon answers")

// ErrTooLarge is in the chain of an error when an answer is larger than
// the client's limit (WithMaxAnswer).
var ErrTooLarge = errors.New("answer larger than the client's limit")

// Error is an answer of the API that refuses a request.
type Error struct {
	// Code is the API's stable code, e.g. apitypes.CodeNotFound, or
	// CodeHTTP for an answer that is not the API's.
	Code    string `json:"code"`
	Message string `json:"message"`
	// Class is whose error it is: apitypes.ClassProtocol,
	// apitypes.ClassRun or apitypes.ClassStorage ("" for CodeHTTP).
	Class string `json:"class"`
	// HTTPStatus is the answer's status code.
	HTTPStatus int `json:"-"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ErrorCode returns the code of an *Error in err's chain, or "" if err is
// not an answer of the API.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Client talks to one daemon. It is safe for concurrent use and keeps
// connections open between requests; Close releases them.
type Client struct {
	addr      string // as given to New, for messages
	base      string // scheme://host, the prefix of every request URL
	token     string
	maxAnswer int64
	tr        *http.Transport
	http      *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sets the bearer token sent with every request. The daemon
// consults it on TCP only: on the Unix socket the kernel says who the
// caller is.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTLSConfig sets the TLS config of an https:// address: the CA
// certificates that verify the daemon's (tlscert.ClientConfig), say.
// Without it the system's roots verify it.
func WithTLSConfig(cfg *tls.Config) Option {
	return func(c *Client) { c.tr.TLSClientConfig = cfg }
}

// WithMaxAnswer bounds the body of one answer (DefaultMaxAnswer if n is 0
// or less); a larger answer is an error wrapping ErrTooLarge.
func WithMaxAnswer(n int64) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxAnswer = n
		}
	}
}

// WithMaxIdleConns sets how many idle connections the client keeps open
// (default 2, net/http's per-host default); a client that sends many
// requests at once keeps more.
func WithMaxIdleConns(n int) Option {
	return func(c *Client) { c.tr.MaxIdleConns, c.tr.MaxIdleConnsPerHost = n, n }
}

// New returns a client of the daemon at addr: "unix:///path/to/socket" (or
// just the socket's path), or "http://host:port" for a TCP listener (with
// WithToken), "https://host:port" for one that speaks TLS. Nothing is
// dialled before the first request.
func New(addr string, opts ...Option) (*Client, error) {
	if !strings.HasPrefix(addr, "http://") && !strings.HasPrefix(addr, "https://") {
		sock := strings.TrimPrefix(addr, "unix://")
		if sock == "" {
			return nil, fmt.Errorf("client: address %q names no socket", addr)
		}
		return NewUnix(sock, opts...), nil
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("client: address %q: %v", addr, err)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("client: address %q: want scheme://host:port and nothing else", addr)
	}
	c := &Client{addr: addr, base: u.Scheme + "://" + u.Host, tr: &http.Transport{Proxy: http.ProxyFromEnvironment}}
	return c.init(opts), nil
}

// NewUnix returns a client of the daemon listening on the Unix socket at
// path. Nothing is dialled before the first request.
func NewUnix(path string, opts ...Option) *Client {
	c := &Client{addr: path, base: "http://weir", // the host is not consulted: every connection goes to the socket
		tr: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}
	return c.init(opts)
}

func (c *Client) init(opts []Option) *Client {
	c.maxAnswer = DefaultMaxAnswer
	for _, o := range opts {
		o(c)
	}
	c.http = &http.Client{Transport: c.tr}
	return c
}

// Addr is the address the client talks to: the socket's path, or the TCP
// listener's URL.
func (c *Client) Addr() string { return c.addr }

// Close closes the client's idle connections. The client stays usable: a
// later request opens a new one.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// do sends method /v1+path with body (nil: none) and returns the answer's
// status and body. Statuses that ok does not accept become an *Error.
func (c *Client) do(ctx context.Context, method, path string, body any, ok func(status int) bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/"+apitypes.Version+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// The caller's trace, if ctx carries one: a run it starts joins it.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist) {
			return 0, nil, fmt.Errorf("%w on %s: %w", ErrNoDaemon, c.addr, err)
		}
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.maxAnswer+1))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if int64(len(data)) > c.maxAnswer {
		return 0, nil, fmt.Errorf("%s %s: %w of %d bytes", method, path, ErrTooLarge, c.maxAnswer)
	}
	if ok == nil {
		ok = func(s int) bool { return s < 300 }
	}
	if !ok(resp.StatusCode) {
		return resp.StatusCode, data, errorOf(resp.StatusCode, data)
	}
	return resp.StatusCode, data, nil
}

// errorOf reads an error answer: the API's JSON, or what came instead.
func errorOf(status int, data []byte) *Error {
	e := &Error{HTTPStatus: status}
	if json.Unmarshal(data, e) != nil || e.Code == "" {
		e.Code, e.Class = CodeHTTP, ""
		e.Message = fmt.Sprintf("%d %s: %s", status, http.StatusText(status), bytes.TrimSpace(data))
	}
	return e
}

// queryString is q as a path's query: "" when it is empty, else "?"
// and q encoded.
func queryString(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// callOne is call with its answer decoded into a new T.
func callOne[T any](ctx context.Context, c *Client, method, path string, body any) (*T, error) {
	var out T
	if err := c.call(ctx, method, path, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// callList is call with its answer decoded into a list of T.
func callList[T any](ctx context.Context, c *Client, method, path string, body any) ([]T, error) {
	var out []T
	if err := c.call(ctx, method, path, body, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// call sends a request and decodes a 2xx answer into out (nil: ignored).
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	_, data, err := c.do(ctx, method, path, body, nil)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// escape escapes one path segment.
func escape(s string) string { return url.PathEscape(s) }
