package api

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// Identity is who a request comes from, as the transport established it:
// the peer's OS user on the Unix socket, the owner a bearer token maps to
// on TCP. Nothing else the client sends is taken into account.
type Identity struct {
	// Owner owns the runs the caller starts and is the only one who sees
	// them.
	Owner string `json:"owner"`
	// Local is true on the Unix socket, where UID is the peer's uid.
	Local bool `json:"local"`
	UID   int  `json:"-"`
}

type ctxKey int

const (
	identityKey ctxKey = iota // *Identity: established for the request
	peerKey                   // *Identity: the Unix peer of the connection
	networkKey                // bool: a TCP connection, bearer token required
)

// peerCred reads the uid of the process at the other end of a Unix socket
// connection from the kernel (SO_PEERCRED).
func peerCred(c net.Conn) (uint32, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, fmt.Errorf("not a unix socket connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return cred.Uid, nil
}

// OwnerOfUID is the owner a Unix socket peer of uid is.
func OwnerOfUID(uid int) string { return userName(uint32(uid)) }

// userName names a uid as owners are named: the user name, or "uid:N" for
// a uid with no name.
func userName(uid uint32) string {
	s := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(s); err == nil {
		return u.Username
	}
	return "uid:" + s
}

// ConnContext records what the connection says about its requests'
// identity: on a Unix socket, the peer's OS user from the kernel; on TCP,
// that each request must carry a bearer token. Any other connection gets
// no identity and every request on it is refused. Use it as
// http.Server.ConnContext for every listener the API is served on.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	// Take off what the listener wrapped the connection in: a connection
	// cap's accounting and TLS, in whichever order they were stacked.
	for unwrapped := false; !unwrapped; {
		switch w := c.(type) {
		case *limitedConn:
			c = w.NetConn()
		case *tls.Conn:
			c = w.NetConn() // a TLS listener's connection is TCP underneath
		default:
			unwrapped = true
		}
	}
	switch c.(type) {
	case *net.UnixConn:
		uid, err := peerCred(c)
		if err != nil {
			return ctx // no owner: every request on this connection is refused
		}
		return context.WithValue(ctx, peerKey, &Identity{Owner: userName(uid), Local: true, UID: int(uid)})
	case *net.TCPConn:
		return context.WithValue(ctx, networkKey, true)
	}
	return ctx
}

// BearerContext marks ctx as a request whose caller is established by its
// bearer token alone, as on TCP, whatever connection it came on. A handler
// in front of the API that sets the Authorization header itself (the web
// console, from its session) serves its requests with it, so that every
// page goes through the API's own ownership rules.
func BearerContext(ctx context.Context) context.Context {
	return context.WithValue(context.WithValue(ctx, peerKey, nil), networkKey, true)
}

// Tokens maps bearer tokens to owners. It keeps only the tokens' SHA-256
// hashes, so a memory dump or a timing difference in the map lookup
// reveals nothing usable as a token.
type Tokens struct {
	owners map[[sha256.Size]byte]string
}

// NewTokens builds a token set from secret → owner.
func NewTokens(secretToOwner map[string]string) *Tokens {
	t := &Tokens{owners: make(map[[sha256.Size]byte]string, len(secretToOwner))}
	for secret, owner := range secretToOwner {
		t.owners[sha256.Sum256([]byte(secret))] = owner
	}
	return t
}

// Owner returns the owner a token authenticates.
func (t *Tokens) Owner(token string) (string, bool) {
	if t == nil || token == "" {
		return "", false
	}
	o, ok := t.owners[sha256.Sum256([]byte(token))]
	return o, ok
}

// identify establishes the identity of r, or says why it cannot.
func (s *Server) identify(r *http.Request) (*Identity, string) {
	ctx := r.Context()
	if id, ok := ctx.Value(peerKey).(*Identity); ok {
		return id, "" // the kernel said who it is; headers are not consulted
	}
	if ctx.Value(networkKey) == nil {
		return nil, "cannot establish the caller's identity"
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, "this listener needs an Authorization: Bearer TOKEN header"
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, "the Authorization header must be Bearer TOKEN"
	}
	owner, ok := s.tokens.Load().Owner(strings.TrimSpace(token))
	if !ok {
		return nil, "unknown bearer token"
	}
	return &Identity{Owner: owner, UID: -1}, ""
}

func identityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey).(*Identity)
	return id
}

func ownerFrom(ctx context.Context) string {
	if id := identityFrom(ctx); id != nil {
		return id.Owner
	}
	return ""
}
