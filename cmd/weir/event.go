package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// weir event: sending your events and listing those kept; weir trigger:
// the triggers (on_event) flow files declare.
func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{Use: "event", Short: "Send events to your runs and triggers, and list those kept"}
		cmd.AddCommand(m.eventSendCmd(), m.eventLsCmd())
		return cmd
	})
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{Use: "trigger", Short: "List and remove your triggers (on_event)"}
		cmd.AddCommand(m.triggerLsCmd(), m.triggerRmCmd())
		return cmd
	})
}

func (m *Main) eventSendCmd() *cobra.Command {
	var id, key, payload string
	var asJSON bool
	cmd := &cobra.Command{
		Use: "send NAME", Short: "Send an event (once per --id)", Args: exactArgs(1),
		Long: `Send one of your events named NAME (ticket.updated). It wakes every run
of yours waiting for an event of that name whose match gave --key, and
starts a run of each of your triggers on NAME (on_event). An event no wait
received is kept for the daemon's event_retention (24h by default) for the
first wait to open on it. --id makes it one event: sending the same id
again starts and wakes nothing new (without it, a new id is made and
printed).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := readJSONFlag("--payload", payload)
			if err != nil {
				return err
			}
			if id == "" {
				var b [8]byte
				_, _ = rand.Read(b[:])
				id = "cli-" + hex.EncodeToString(b[:])
			}
			ev, err := m.api().SendEvent(cmd.Context(), apitypes.EventSendRequest{ID: id, Name: args[0], Key: key, Payload: body})
			return answer(m, ev, err, asJSON, printSentEvent)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "the event's id: the same id again is the same event (default: a new one)")
	cmd.Flags().StringVar(&key, "key", "", "the key a wait's match must equal")
	cmd.Flags().StringVar(&payload, "payload", "", "the event's payload as JSON, or @file (default {})")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printSentEvent says what an accepted event did.
func printSentEvent(w io.Writer, ev *apitypes.OwnerEvent) {
	verb := "accepted"
	if ev.Duplicate {
		verb = "was accepted before"
	}
	fmt.Fprintf(w, "event %s %s\n", ev.ID, verb)
	switch {
	case len(ev.Delivered) > 0:
		fmt.Fprintf(w, "delivered to %s\n", strings.Join(ev.Delivered, ", "))
	default:
		fmt.Fprintln(w, "no wait received it: kept for the first wait to open on its name and key")
	}
	for _, s := range ev.Started {
		if s.RunID != "" {
			fmt.Fprintf(w, "trigger %s started %s\n", s.Trigger, s.RunID)
		} else {
			fmt.Fprintf(w, "trigger %s started nothing: %s\n", s.Trigger, s.Skipped)
		}
	}
	if ev.TriggersPending {
		fmt.Fprintln(w, "its triggers' runs are not all started yet: the daemon starts them")
	}
}

func (m *Main) eventLsCmd() *cobra.Command {
	var o client.EventListOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use: "ls", Short: "List your kept events", Args: exactArgs(0),
		Long: `List your events kept for the event retention, in the order accepted
(SEQ), with the waits each was delivered to and the runs its triggers
started. --undelivered lists only those no wait received yet.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			evs, err := m.api().Events(cmd.Context(), o)
			if err != nil {
				return m.apiFailure(err)
			}
			if asJSON {
				return printJSON(m.Stdout, evs)
			}
			return printOwnerEvents(m.Stdout, evs)
		},
	}
	cmd.Flags().BoolVar(&o.Undelivered, "undelivered", false, "only the events no wait received")
	cmd.Flags().Uint64Var(&o.After, "after", 0, "only the events after this SEQ")
	cmd.Flags().IntVar(&o.Limit, "limit", 0, "at most this many (0: the daemon's page size, 100)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printOwnerEvents(w io.Writer, evs []apitypes.OwnerEvent) error {
	return printTable(w, "SEQ\tID\tNAME\tKEY\tACCEPTED\tDELIVERED\tSTARTED", evs, func(ev apitypes.OwnerEvent) string {
		delivered := fmt.Sprint(len(ev.Delivered))
		if len(ev.Delivered) == 0 {
			delivered = "kept"
		}
		var started []string
		for _, s := range ev.Started {
			switch {
			case s.RunID != "":
				started = append(started, s.RunID)
			case s.Skipped != "":
				started = append(started, s.Trigger+" skipped ("+s.Skipped+")")
			}
		}
		if ev.TriggersPending {
			started = append(started, "(pending)")
		}
		return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s", ev.Seq, ev.ID, ev.Name, orDash(ev.Key), ev.AcceptedAt.Local().Format(time.RFC3339),
			delivered, orDash(strings.Join(started, " ")))
	})
}

func (m *Main) triggerLsCmd() *cobra.Command {
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use: "ls", Short: "List your triggers", Args: exactArgs(0),
		Long: `List your triggers in name order: the event each listens to and the flow
it starts. Triggers are declared in flow files with on_event(...) and
stored when the file is registered.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ts, err := m.api().Triggers(cmd.Context(), limit)
			if err != nil {
				return m.apiFailure(err)
			}
			if asJSON {
				return printJSON(m.Stdout, ts)
			}
			return printTable(m.Stdout, "NAME\tEVENT\tFLOW\tSOURCE", ts, func(t apitypes.Trigger) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s", t.Name, t.Event, t.Flow, orDash(t.Source))
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (0: the daemon's page size, 100)")
	return cmd
}

func (m *Main) triggerRmCmd() *cobra.Command {
	return m.rmCmd("trigger", (*client.Client).TriggerRemove)
}
