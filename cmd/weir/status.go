package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/engine"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		var asJSON bool
		var wait time.Duration
		cmd := &cobra.Command{
			Use:   "status",
			Short: "Show the daemon's admission state, queued and held tasks, slots and config version",
			Long: `Show the daemon's admission state (open, E_DRAINING while it stops, E_STORAGE
after a storage failure, with the reason), the tasks queued and held by
workers, the worker slots and the config version in force.

Exit 0 while admission is open, 1 when it is closed or no daemon answers.
--wait DURATION waits up to DURATION for a daemon to answer (for scripts
that start one in the background).`,
			Args: exactArgs(0),
			RunE: func(cmd *cobra.Command, args []string) error {
				st, err := m.fetchStatus(cmd.Context(), wait)
				if err != nil {
					return m.apiFailure(err)
				}
				if asJSON {
					if err := printJSON(m.Stdout, st); err != nil {
						return err
					}
				} else {
					printStatus(m.Stdout, st)
				}
				if st.Admission != "open" {
					return exitCode(exitFailed)
				}
				return nil
			},
		}
		cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long for a daemon to answer")
		return cmd
	})
}

// fetchStatus reads GET /v1/health. Its answer is a status whether
// admission is open (200) or not (503).
func (m *Main) fetchStatus(ctx context.Context, wait time.Duration) (*api.Status, error) {
	deadline := time.Now().Add(wait)
	for {
		st, err := m.client().status(ctx)
		var down *daemonDown
		if err == nil || !errors.As(err, &down) || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// daemonDown says no daemon answers on the socket.
type daemonDown struct{ err error }

func (d *daemonDown) Error() string { return d.err.Error() }
func (d *daemonDown) Unwrap() error { return d.err }

func (c *client) status(ctx context.Context) (*api.Status, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://weir/v1/health", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &daemonDown{fmt.Errorf("no weir daemon answers on %s: start one with 'weir serve' (or pass --socket)", c.socket)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var st api.Status
	if (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusServiceUnavailable) && json.Unmarshal(data, &st) == nil && st.Admission != "" {
		return &st, nil
	}
	ae := &apiError{Status: resp.StatusCode}
	if json.Unmarshal(data, ae) != nil || ae.Code == "" {
		ae.Code, ae.Message = codeHTTP, fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	}
	return nil, ae
}

func printStatus(w io.Writer, st *api.Status) {
	adm := st.Admission
	switch st.Admission {
	case "open":
	case engine.CodeStorage:
		adm += " (the store failed; admission stays closed until the daemon is restarted)\n                 " + st.Reason
	default:
		if st.Reason != "" {
			adm += " (" + st.Reason + ")"
		}
	}
	fmt.Fprintf(w, "admission:       %s\n", adm)
	fmt.Fprintf(w, "queued tasks:    %d\n", st.Queued)
	fmt.Fprintf(w, "held tasks:      %d\n", st.Held)
	fmt.Fprintf(w, "slots:           %d\n", st.Slots)
	if c := st.Config; c != nil {
		src := "flags and defaults"
		if c.File != "" {
			src = c.File
		}
		fmt.Fprintf(w, "config version:  %d (%s)\n", c.Version, src)
		if len(c.Pinned) > 0 {
			fmt.Fprintf(w, "pinned by flags: %s\n", strings.Join(c.Pinned, ", "))
		}
	}
	if st.Caller != nil {
		via := "bearer token"
		if st.Caller.Local {
			via = "unix socket"
		}
		fmt.Fprintf(w, "you are:         %s (%s)\n", st.Caller.Owner, via)
	}
}
