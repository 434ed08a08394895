package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// DiagnosticsError is a registration the daemon refused (422): every
// problem found in the files. Nothing was registered.
type DiagnosticsError struct {
	Diagnostics []apitypes.Diagnostic
}

func (e *DiagnosticsError) Error() string {
	lines := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		pos := d.File
		switch {
		case d.Line != 0 && d.Col != 0:
			pos = fmt.Sprintf("%s:%d:%d", d.File, d.Line, d.Col)
		case d.Line != 0:
			pos = fmt.Sprintf("%s:%d", d.File, d.Line)
		}
		lines[i] = pos + ": " + d.Code + ": " + d.Message
	}
	return fmt.Sprintf("registration refused, %d problem(s):\n%s", len(e.Diagnostics), strings.Join(lines, "\n"))
}

// FlowRegister checks files together and registers every flow they
// declare (POST /v1/flows). Files that do not pass the checks register
// nothing and return a *DiagnosticsError.
func (c *Client) FlowRegister(ctx context.Context, files ...apitypes.SourceFile) (*apitypes.RegisterResult, error) {
	return c.postFlows(ctx, "/flows", files)
}

// FlowCheck runs registration's checks on the files in the daemon, against
// its registered flows and plugins, and stores nothing (POST
// /v1/flows/check). Diagnostics come back as a *DiagnosticsError, as from
// FlowRegister; the flows answered are the versions a registration would
// store. Warnings alone come back in the answer's Diagnostics, as they do
// from FlowRegister.
func (c *Client) FlowCheck(ctx context.Context, files ...apitypes.SourceFile) (*apitypes.RegisterResult, error) {
	return c.postFlows(ctx, "/flows/check", files)
}

func (c *Client) postFlows(ctx context.Context, path string, files []apitypes.SourceFile) (*apitypes.RegisterResult, error) {
	status, data, err := c.do(ctx, http.MethodPost, path, apitypes.RegisterRequest{Files: files}, nil)
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) && status == http.StatusUnprocessableEntity && (ae.Code == apitypes.CodeFlowInvalid || ae.Code == CodeHTTP) {
			// Diagnostics come back as the body of a 422: a
			// RegisterRefusal, or {flows, diagnostics} without a code
			// from a daemon before it.
			var res apitypes.RegisterRefusal
			if json.Unmarshal(data, &res) == nil && len(res.Diagnostics) > 0 {
				return nil, &DiagnosticsError{Diagnostics: res.Diagnostics}
			}
		}
		return nil, err
	}
	var res apitypes.RegisterResult
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("POST %s: decoding the answer: %w", path, err)
	}
	return &res, nil
}

// FlowList lists the latest version of every registered flow, paging
// through GET /v1/flows. Each flow's doc is its summary line, and an
// input schema over apitypes.MaxListedInputBytes is left out
// (InputOmitted); FlowSource reads a flow whole.
func (c *Client) FlowList(ctx context.Context) ([]apitypes.Flow, error) {
	var all []apitypes.Flow
	// The first page goes without parameters, which a daemon from before
	// paging also takes: it answers every flow, more than a page.
	var p FlowListParams
	for {
		fl, err := c.FlowListPage(ctx, p)
		if err != nil {
			return nil, err
		}
		if p.After != "" && len(fl) > 0 && fl[0].Name <= p.After {
			// Names only grow from page to page: a daemon that answers
			// otherwise would be listed forever.
			return nil, fmt.Errorf("GET /v1/flows: the page after %q starts at %q", p.After, fl[0].Name)
		}
		all = append(all, fl...)
		if len(fl) != apitypes.DefaultFlowListLimit {
			return all, nil
		}
		p.After = fl[len(fl)-1].Name
	}
}

// FlowListParams selects one page of FlowListPage.
type FlowListParams struct {
	// After is the last flow name of the page before ("": the first page).
	After string
	// Limit is the page size (0: the daemon's default), at most
	// apitypes.MaxFlowListLimit.
	Limit int
}

// FlowListPage lists one page of the registered flows by name (GET
// /v1/flows): a page shorter than its limit is the last.
func (c *Client) FlowListPage(ctx context.Context, p FlowListParams) ([]apitypes.Flow, error) {
	q := url.Values{}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.Limit != 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return callList[apitypes.Flow](ctx, c, http.MethodGet, "/flows"+queryString(q), nil)
}

// FlowGraph draws the latest version of the flow name (GET
// /v1/flows/{name}/graph) in format (FormatMermaid if "").
func (c *Client) FlowGraph(ctx context.Context, name, format string) (string, error) {
	return c.text(ctx, "/flows/"+escape(name)+"/graph", format)
}

// DeadLetterList lists the caller's tasks that exhausted their retries,
// with every attempt's error (GET /v1/deadletters); limit 0 leaves the
// count to the daemon (100), at most apitypes.MaxListLimit.
func (c *Client) DeadLetterList(ctx context.Context, limit int) ([]apitypes.DeadLetter, error) {
	return c.DeadLetters(ctx, DeadLetterFilter{Limit: limit})
}

// Stats reads the four figures per task type and the engine's counters
// (GET /v1/stats).
func (c *Client) Stats(ctx context.Context) (*apitypes.Stats, error) {
	return callOne[apitypes.Stats](ctx, c, http.MethodGet, "/stats", nil)
}

// StatsOwners reads each owner's use of the daemon and its share (GET
// /v1/stats/owners): every owner for the daemon's own OS user on the
// socket, the caller's own otherwise.
func (c *Client) StatsOwners(ctx context.Context) (*apitypes.OwnerStatsList, error) {
	return callOne[apitypes.OwnerStatsList](ctx, c, http.MethodGet, "/stats/owners", nil)
}

// StatsHistory reads the daemon's figures sampled over the last hour
// (GET /v1/stats/history), oldest first; the daemon keeps them in memory
// only.
func (c *Client) StatsHistory(ctx context.Context) (*apitypes.StatsHistory, error) {
	return callOne[apitypes.StatsHistory](ctx, c, http.MethodGet, "/stats/history", nil)
}

// Health reads the daemon's status (GET /v1/health): admission, queued and
// held tasks, slots, the config in force and who the caller is. A daemon
// whose admission is closed (draining, or its store failed) answers 503
// with its status; Health returns that status with a nil error too: check
// Status.Open.
func (c *Client) Health(ctx context.Context) (*apitypes.Status, error) {
	status, data, err := c.do(ctx, http.MethodGet, "/health", nil, func(s int) bool {
		return s == http.StatusOK || s == http.StatusServiceUnavailable
	})
	if err != nil {
		return nil, err
	}
	var st apitypes.Status
	if json.Unmarshal(data, &st) != nil || st.Admission == "" {
		// A 503 from something other than the daemon's status view.
		return nil, errorOf(status, data)
	}
	return &st, nil
}

// AdminReload asks the daemon to re-read its config file, validate it and
// swap it in (POST /v1/admin/reload). Only the daemon's own OS user on the
// Unix socket may (apitypes.CodeForbidden otherwise); an invalid candidate
// answers apitypes.CodeConfig and changes nothing.
func (c *Client) AdminReload(ctx context.Context) (*apitypes.ReloadResult, error) {
	return callOne[apitypes.ReloadResult](ctx, c, http.MethodPost, "/admin/reload", nil)
}

// AdminRescanPlugins asks the daemon to re-read its plugins directory and
// put what is installed there in service (POST /v1/admin/plugins/rescan):
// `weir plugin install` and `rm` call it. Only the daemon's own OS user on
// the Unix socket may.
func (c *Client) AdminRescanPlugins(ctx context.Context) (*apitypes.PluginRescan, error) {
	return callOne[apitypes.PluginRescan](ctx, c, http.MethodPost, "/admin/plugins/rescan", nil)
}

// AdminAudit lists one page of the audit stream (GET /v1/admin/audit): the
// refused attempts on other owners' runs. Only the daemon's own OS user on
// the Unix socket may read it.
func (c *Client) AdminAudit(ctx context.Context, p EventListParams) ([]apitypes.Event, error) {
	return callList[apitypes.Event](ctx, c, http.MethodGet, "/admin/audit"+p.query(), nil)
}
