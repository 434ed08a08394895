package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

func init() {
	registerCommand(func(m *Main) *cobra.Command {
		var asJSON bool
		var wait time.Duration
		cmd := &cobra.Command{
			Use:   "status",
			Short: "Show the daemon's admission state, queued and held tasks, slots and config version",
			Long: `Show the daemon's admission state (open, E_DRAINING while it stops, E_STORAGE
after a storage failure, E_DISK_FULL while the store's disk is below its
watermark, with the reason), the tasks queued and held by
workers, the worker slots and the config version in force, and each
server a plugin cannot reach (an MCP server down) and since when.

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
					printServersDown(m.Stdout, st.ServersDown, time.Now())
				}
				if !st.Open() {
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
func (m *Main) fetchStatus(ctx context.Context, wait time.Duration) (*apitypes.Status, error) {
	deadline := time.Now().Add(wait)
	c := m.api()
	for {
		st, err := c.Health(ctx)
		var ae *client.Error
		if u := m.untrusted(err); u != nil {
			return nil, u
		}
		if err != nil && !errors.As(err, &ae) {
			// No answer at all: nothing listens, or the daemon went away.
			err = &daemonDown{fmt.Errorf("no weir daemon answers on %s: start one with 'weir serve' (or pass --socket or --address)", m.daemonAt())}
		}
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

func printStatus(w io.Writer, st *apitypes.Status) {
	adm := st.Admission
	switch st.Admission {
	case "open":
	case apitypes.CodeStorage:
		adm += " (the store failed; admission stays closed until the daemon is restarted)\n                 " + st.Reason
	default:
		if st.Reason != "" {
			adm += " (" + st.Reason + ")"
		}
	}
	fmt.Fprintf(w, "admission:       %s\n", adm)
	fmt.Fprintf(w, "queued tasks:    %d\n", st.Queued)
	fmt.Fprintf(w, "parked tasks:    %d (waiting for a decision, a child run or a timer)\n", st.Parked)
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

// printServersDown prints one line per server a plugin cannot reach.
func printServersDown(w io.Writer, down []apitypes.ServerDown, now time.Time) {
	for _, d := range down {
		line := fmt.Sprintf("%s server %s down since %s (%s)", d.Plugin, d.Name, d.Since.UTC().Format(time.RFC3339), now.Sub(d.Since).Round(time.Second))
		if d.Error != "" {
			line += ": " + d.Error
		}
		fmt.Fprintf(w, "server down:     %s\n", line)
	}
}
