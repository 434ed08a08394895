package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/weirhq/weir/runtime/engine"
)

// Defaults of the HTTP limits of every listener the API is served on
// (docs/design.md §11, docs/operators.md "Security model"). A slow or
// silent client holds a connection, a goroutine and a file descriptor;
// these bound how long and how many.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included:
	// the largest body (MaxRegisterBody, 8 MiB) must arrive at 140 KB/s.
	DefaultReadTimeout = time.Minute
	// DefaultWriteTimeout bounds answering a request, from the end of its
	// headers. A route meant to stay open (a long-poll wait) sets its own
	// bound with HoldOpen, at most MaxHoldOpen.
	DefaultWriteTimeout = time.Minute
	// DefaultIdleTimeout closes a kept-alive connection that sends no
	// next request.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultMaxConns bounds the connections open at once on one
	// listener. Beyond it a new connection is answered 503
	// E_TOO_MANY_CONNECTIONS and closed; the daemon's own OS user is not
	// counted against it, so the operator always gets in.
	DefaultMaxConns = 512
	// DefaultMaxConnsPerPeer bounds the connections of one OS user on
	// the Unix socket, where the kernel names the caller at accept: one
	// caller cannot take every connection.
	DefaultMaxConnsPerPeer = 64
	// DefaultMaxConnsPerIP bounds the connections of one IP address on
	// TCP. Several token owners (and an MCP server or a proxy for many)
	// may share an address, and who a connection is from is known only
	// once its request is read, so this cap is larger: it stops a flood
	// from one host, while the shares between owners are counted in the
	// handler (DefaultMaxRequestsPerOwner, DefaultMaxStreamsPerOwner).
	DefaultMaxConnsPerIP = 256
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 64 << 10
	// MaxHoldOpen bounds how long a route meant to stay open may hold
	// its response (see HoldOpen).
	MaxHoldOpen = 15 * time.Minute
	// refuseWriteTimeout bounds writing the refusal of a connection over
	// a cap.
	refuseWriteTimeout = time.Second
	// maxRefusing bounds the refusals being written at once; a connection
	// over a cap beyond them is closed without an answer.
	maxRefusing = 64
)

// HTTPLimits are the timeouts and connection caps of a listener. Zero
// fields take their defaults.
type HTTPLimits struct {
	ReadHeaderTimeout time.Duration `json:"read_header_timeout"`
	ReadTimeout       time.Duration `json:"read_timeout"`
	WriteTimeout      time.Duration `json:"write_timeout"`
	IdleTimeout       time.Duration `json:"idle_timeout"`
	MaxConns          int           `json:"max_conns"`
	MaxConnsPerPeer   int           `json:"max_conns_per_peer"`
	MaxConnsPerIP     int           `json:"max_conns_per_ip"`
	// MaxRequestsPerOwner and MaxStreamsPerOwner are the shares of one
	// owner, counted once its request is read (see ownerCaps).
	MaxRequestsPerOwner int `json:"max_requests_per_owner"`
	MaxStreamsPerOwner  int `json:"max_streams_per_owner"`
}

// WithDefaults fills the zero fields.
func (l HTTPLimits) WithDefaults() HTTPLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.ReadTimeout, DefaultReadTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxConnsPerPeer <= 0 {
		l.MaxConnsPerPeer = DefaultMaxConnsPerPeer
	}
	if l.MaxConnsPerIP <= 0 {
		l.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if l.MaxRequestsPerOwner <= 0 {
		l.MaxRequestsPerOwner = DefaultMaxRequestsPerOwner
	}
	if l.MaxStreamsPerOwner <= 0 {
		l.MaxStreamsPerOwner = DefaultMaxStreamsPerOwner
	}
	return l
}

// NewHTTPServer returns an http.Server for handler with l's timeouts.
// Serve it on a listener wrapped by LimitListener.
func NewHTTPServer(handler http.Handler, connContext func(context.Context, net.Conn) context.Context, l HTTPLimits) *http.Server {
	l = l.WithDefaults()
	return &http.Server{
		Handler:           handler,
		ConnContext:       connContext,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// HoldOpen lets a handler whose response is meant to stay open (a
// long-poll wait, an event stream) hold it for up to d (at most
// MaxHoldOpen) beyond the server's write timeout. The request's body must
// have been read: its read deadline is lifted too, so the connection is
// bounded by d alone.
func HoldOpen(w http.ResponseWriter, d time.Duration) error {
	d = min(d, MaxHoldOpen)
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return err
	}
	return rc.SetWriteDeadline(time.Now().Add(d))
}

// LimitListener caps ln's connections as l says: in total (except the
// connections of adminUID on a Unix socket) and per peer (an OS user on
// a Unix socket, max_conns_per_peer; an IP address on TCP,
// max_conns_per_ip). A connection
// over a cap is answered 503 E_TOO_MANY_CONNECTIONS and closed at once,
// so it costs a descriptor for one write, not for as long as its client
// likes.
func LimitListener(ln net.Listener, l HTTPLimits, adminUID int, log hclog.Logger) net.Listener {
	l = l.WithDefaults()
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &limitListener{Listener: ln, limits: l, adminUID: adminUID, log: log, peers: map[string]int{}, refusing: make(chan struct{}, maxRefusing)}
}

type limitListener struct {
	net.Listener
	limits   HTTPLimits
	adminUID int
	log      hclog.Logger

	mu    sync.Mutex
	total int
	peers map[string]int

	refusing chan struct{} // refusals being written
	// lastWarn and unsaid space the log lines about refusals: a flood of
	// connections is one line a second, with a count.
	lastWarn time.Time
	unsaid   int
}

// Accept returns the next connection within the caps; the ones over them
// are refused on the side.
func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer, admin, byIP := peerOf(c, ll.adminUID)
		limit, knob := ll.limits.MaxConnsPerPeer, "max_conns_per_peer"
		if byIP {
			limit, knob = ll.limits.MaxConnsPerIP, "max_conns_per_ip"
		}
		ll.mu.Lock()
		why := ""
		switch {
		case ll.peers[peer] >= limit:
			why = fmt.Sprintf("%s already has %d connections open, the most one peer may have (%s)", peer, ll.peers[peer], knob)
		case !admin && ll.total >= ll.limits.MaxConns:
			why = fmt.Sprintf("the daemon already has %d connections open on this listener, the most it takes (max_conns)", ll.total)
		default:
			ll.peers[peer]++
			if !admin {
				ll.total++
			}
		}
		say, unsaid := false, 0
		if why != "" {
			if now := time.Now(); now.Sub(ll.lastWarn) >= time.Second {
				say, unsaid, ll.lastWarn, ll.unsaid = true, ll.unsaid, now, 0
			} else {
				ll.unsaid++
			}
		}
		ll.mu.Unlock()
		if why != "" {
			if say {
				ll.log.Warn("refused a connection", "peer", peer, "reason", why, "refused_since_last_said", unsaid)
			}
			select {
			case ll.refusing <- struct{}{}:
				go func() {
					defer func() { <-ll.refusing }()
					refuseConn(c, why)
				}()
			default:
				c.Close() // a flood: no answer for this one
			}
			continue
		}
		return &limitedConn{Conn: c, release: func() { ll.release(peer, admin) }}, nil
	}
}

func (ll *limitListener) release(peer string, admin bool) {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	if ll.peers[peer]--; ll.peers[peer] <= 0 {
		delete(ll.peers, peer)
	}
	if !admin {
		ll.total--
	}
}

// peerOf names the peer a connection's cap is counted against: the OS
// user on a Unix socket, the IP address on TCP (byIP). admin is set for
// adminUID's connections on a Unix socket.
func peerOf(c net.Conn, adminUID int) (peer string, admin, byIP bool) {
	switch c.(type) {
	case *net.UnixConn:
		uid, err := peerCred(c)
		if err != nil {
			return "an unidentified local peer", false, false
		}
		return "uid " + strconv.FormatUint(uint64(uid), 10), int(uid) == adminUID, false
	}
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		return host, false, true
	}
	return c.RemoteAddr().String(), false, true
}

// refuseConn answers a connection over a cap and closes it.
func refuseConn(c net.Conn, why string) {
	defer c.Close()
	body, _ := json.Marshal(&engine.Error{Code: CodeTooManyConnections, Class: engine.ClassProtocol, Message: why + "; try again when some have closed"})
	_ = c.SetWriteDeadline(time.Now().Add(refuseWriteTimeout))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// limitedConn gives its place back when it closes (once).
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// NetConn returns the connection under c (ConnContext reads the peer's
// identity from it).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }
