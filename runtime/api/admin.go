package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// Daemon is what the admin endpoints and the status view need from the
// process that hosts the server.
type Daemon interface {
	// Reload reads a candidate config, validates it and swaps it in. An
	// invalid candidate leaves the config in force untouched; the error
	// (an *engine.Error with code E_CONFIG or E_NO_CONFIG) says why.
	Reload(ctx context.Context) (*apitypes.ReloadResult, error)
	// ConfigInfo describes the config in force.
	ConfigInfo() apitypes.ConfigInfo
	// Audit lists the audit stream (engine.AuditStream) after seq: the
	// refused attempts on other owners' runs.
	Audit(ctx context.Context, afterSeq uint64, limit int) ([]*store.Event, error)
	// RescanPlugins re-reads the plugins directory and puts what is
	// installed there in service for new calls and registrations.
	RescanPlugins(ctx context.Context) (*apitypes.PluginRescan, error)
	// ServersDown lists the servers the plugins cannot reach, as each
	// last said (runtime/host: Host.Health).
	ServersDown() []apitypes.ServerDown
}

// isOperator reports whether r comes from the daemon's own OS user on the
// Unix socket: the operator, who may act on the daemon and see every
// owner's figures.
func (s *Server) isOperator(r *http.Request) bool {
	id := identityFrom(r.Context())
	return id != nil && id.Local && id.UID == s.adminUID
}

// adminReload is POST /v1/admin/reload: only the daemon's own OS user, on
// the Unix socket, may reload. A token holder on TCP whose owner has the
// same name is still refused: a name in the config is not an OS identity.
func (s *Server) adminReload(w http.ResponseWriter, r *http.Request) {
	if !s.admin(w, r) || !queryParams(w, r) || !emptyBody(w, r) {
		return
	}
	if s.daemon == nil {
		writeEngineErr(w, &engine.Error{Code: CodeNoConfig, Class: engine.ClassProtocol, Message: "this server has no daemon to reload"})
		return
	}
	res, err := s.daemon.Reload(r.Context())
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// adminRescan is POST /v1/admin/plugins/rescan: after `weir plugin
// install` or `rm` in the daemon's plugins directory, the daemon's own OS
// user makes the change known without a restart.
func (s *Server) adminRescan(w http.ResponseWriter, r *http.Request) {
	if !s.admin(w, r) || !queryParams(w, r) || !emptyBody(w, r) {
		return
	}
	if s.daemon == nil {
		writeEngineErr(w, &engine.Error{Code: CodeNoConfig, Class: engine.ClassProtocol, Message: "this server has no daemon whose plugins to rescan"})
		return
	}
	res, err := s.daemon.RescanPlugins(r.Context())
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// adminAudit is GET /v1/admin/audit: the audit stream, for the daemon's
// own OS user only (it names other owners and their runs).
func (s *Server) adminAudit(w http.ResponseWriter, r *http.Request) {
	if !s.admin(w, r) || !queryParams(w, r, "after", "limit") {
		return
	}
	if s.daemon == nil {
		writeEngineErr(w, &engine.Error{Code: CodeNoConfig, Class: engine.ClassProtocol, Message: "this server has no daemon to read the audit stream from"})
		return
	}
	after, limit, ok := eventPageParams(w, r)
	if !ok {
		return
	}
	evs, err := s.daemon.Audit(r.Context(), after, limit)
	if err != nil {
		writeEngineErr(w, &engine.Error{Code: engine.CodeStorage, Class: engine.ClassStorage, Message: "reading the audit stream: " + err.Error()})
		return
	}
	writeEvents(w, evs)
}

// admin refuses callers other than the daemon's own OS user.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) bool {
	if s.isOperator(r) {
		return true
	}
	id := identityFrom(r.Context())
	who := "a bearer token"
	if id != nil && id.Local {
		who = fmt.Sprintf("uid %d", id.UID)
	}
	s.log.Warn("refused an admin request", "path", r.URL.Path, "owner", ownerFrom(r.Context()), "via", who)
	refuseUnread(w, r, http.StatusForbidden, &engine.Error{Code: CodeForbidden, Class: engine.ClassProtocol,
		Message: fmt.Sprintf("admin endpoints answer only the daemon's own OS user (uid %d) on the Unix socket, not %s", s.adminUID, who)})
	return false
}
