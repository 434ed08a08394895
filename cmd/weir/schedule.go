package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/api/client"
)

// weir schedule: the schedules flow files declare, and operating them
// (ls, show, pause, resume, trigger, rm).
func init() {
	registerCommand(func(m *Main) *cobra.Command {
		cmd := &cobra.Command{Use: "schedule", Short: "List, show, pause, resume, fire and remove your schedules"}
		cmd.AddCommand(m.scheduleLsCmd(), m.scheduleShowCmd(), m.schedulePauseCmd(true), m.schedulePauseCmd(false),
			m.scheduleTriggerCmd(), m.scheduleRmCmd())
		return cmd
	})
}

func (m *Main) scheduleLsCmd() *cobra.Command {
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use: "ls", Short: "List your schedules", Args: exactArgs(0),
		Long: `List your schedules in name order: the flow each starts, its cron
expression or period, its next tick, and its latest firing with its run
and the run's phase (or why the tick was skipped). Schedules are declared
in flow files with schedule(...) and stored when the file is registered.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ss, err := m.api().Schedules(cmd.Context(), limit)
			if err != nil {
				return m.apiFailure(err)
			}
			if asJSON {
				return printJSON(m.Stdout, ss)
			}
			return printSchedules(m.Stdout, ss)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many (0: the daemon's page size, 100)")
	return cmd
}

// printSchedules prints schedules as a table, or "none".
func printSchedules(w io.Writer, ss []apitypes.Schedule) error {
	return printTable(w, "NAME\tFLOW\tWHEN\tNEXT\tLAST FIRING", ss, func(s apitypes.Schedule) string {
		next := inZone(s.Next, s.Timezone).Format(time.RFC3339)
		if s.Paused {
			next = "paused"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", s.Name, s.Flow, scheduleWhen(s), next, lastFiring(s.Firings))
	})
}

// scheduleWhen says when a schedule fires: its cron expression and zone,
// or its period.
func scheduleWhen(s apitypes.Schedule) string {
	if s.Every != "" {
		return "every " + s.Every
	}
	zone := s.Timezone
	if zone == "" {
		zone = "UTC"
	}
	return s.Cron + " " + zone
}

// inZone is t as the schedule's zone reads it (UTC when it has none, or
// when this machine does not know the zone).
func inZone(t time.Time, zone string) time.Time {
	if loc, err := time.LoadLocation(zone); err == nil {
		return t.In(loc)
	}
	return t.UTC()
}

func lastFiring(fs []apitypes.ScheduleFiring) string {
	if len(fs) == 0 {
		return "-"
	}
	return firingText(fs[len(fs)-1])
}

func firingText(f apitypes.ScheduleFiring) string {
	if f.Skipped != "" {
		return f.Tick.Format(time.RFC3339) + " skipped: " + f.Skipped
	}
	phase := f.Phase
	if phase == "" {
		phase = "no longer kept"
	}
	return f.Tick.Format(time.RFC3339) + " " + f.RunID + " (" + phase + ")"
}

func (m *Main) scheduleShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "show NAME", Short: "Show a schedule, its latest firings and its next 5 ticks", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := m.api().Schedule(cmd.Context(), args[0])
			return answer(m, s, err, asJSON, printSchedule)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printSchedule(w io.Writer, s *apitypes.Schedule) {
	fmt.Fprintf(w, "schedule %s: flow %s, %s\n", s.Name, s.Flow, scheduleWhen(*s))
	fmt.Fprintf(w, "overlap %s, catch_up %s", s.Overlap, s.CatchUp)
	if s.CatchUp == "all" {
		fmt.Fprintf(w, " (at most %d)", s.MaxCatchUp)
	}
	fmt.Fprintln(w)
	if s.Source != "" {
		fmt.Fprintf(w, "declared at %s\n", s.Source)
	}
	if s.Paused {
		fmt.Fprintf(w, "PAUSED by %s", s.PausedBy)
		if s.PauseReason != "" {
			fmt.Fprintf(w, ": %s", s.PauseReason)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "next ticks:")
	for _, t := range s.Upcoming {
		fmt.Fprintf(w, "  %s\n", t.Format(time.RFC3339))
	}
	if len(s.Firings) == 0 {
		fmt.Fprintln(w, "no firings yet")
		return
	}
	fmt.Fprintln(w, "latest firings:")
	for _, f := range s.Firings {
		fmt.Fprintf(w, "  %s\n", firingText(f))
	}
}

func (m *Main) schedulePauseCmd(pause bool) *cobra.Command {
	var reason string
	use, short := "resume NAME", "Resume a paused schedule (the ticks missed meanwhile are its catch_up policy's)"
	if pause {
		use, short = "pause NAME", "Stop a schedule's firing until it is resumed (survives restarts)"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := m.api().SchedulePause(cmd.Context(), args[0], pause, reason)
			if err != nil {
				return m.apiFailure(err)
			}
			if s.Paused {
				fmt.Fprintf(m.Stdout, "schedule %s is paused\n", s.Name)
			} else {
				fmt.Fprintf(m.Stdout, "schedule %s is running; next tick %s\n", s.Name, s.Next.Format(time.RFC3339))
			}
			return nil
		},
	}
	if pause {
		cmd.Flags().StringVar(&reason, "reason", "", "why, kept with the schedule")
	}
	return cmd
}

func (m *Main) scheduleTriggerCmd() *cobra.Command {
	var requestID string
	cmd := &cobra.Command{
		Use: "trigger NAME", Short: "Fire a schedule now (once per --request-id)", Args: exactArgs(1),
		Long: `Start a run of the schedule's flow with its input now, outside its ticks
and whether or not it is paused, admitted like any start. With
--request-id, sending it again answers the run it started.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := m.api().ScheduleTrigger(cmd.Context(), args[0], requestID)
			if err != nil {
				return m.apiFailure(err)
			}
			fmt.Fprintln(m.Stdout, res.RunID)
			return nil
		},
	}
	cmd.Flags().StringVar(&requestID, "request-id", "", "fire once per id: the same id answers the run it started")
	return cmd
}

func (m *Main) scheduleRmCmd() *cobra.Command {
	return m.rmCmd("schedule", (*client.Client).ScheduleRemove)
}
