package engine

import (
	"github.com/weirhq/weir/runtime/engine/internal/dispatcher"
	"github.com/weirhq/weir/runtime/engine/internal/events"
	"github.com/weirhq/weir/runtime/engine/internal/pruner"
	"github.com/weirhq/weir/runtime/engine/internal/reaper"
	"github.com/weirhq/weir/runtime/engine/internal/rescuer"
	"github.com/weirhq/weir/runtime/engine/internal/rollkeeper"
	"github.com/weirhq/weir/runtime/engine/internal/sampler"
	"github.com/weirhq/weir/runtime/engine/internal/schedules"
	"github.com/weirhq/weir/runtime/engine/internal/service"
	"github.com/weirhq/weir/runtime/engine/internal/storage"
	"github.com/weirhq/weir/runtime/engine/internal/traceexport"
	"github.com/weirhq/weir/runtime/store"
)

// services lists the engine's background services in start order. Each
// is its own package under internal/ (docs/design.md §1); the engine's
// side of each is a small host type beside the code it calls. The
// dispatcher starts last and stops first: nothing new starts while the
// others wind down. New services (schedules, redrive, fair queuing,
// telemetry export) are added here.
func services(e *Engine) []service.Service {
	var out []service.Service
	cfg := e.cfg.Load()
	if w, ok := cfg.Store.(store.Waker); ok && e.st.Capabilities().Shared {
		if wakes := w.Wakes(); wakes != nil {
			out = append(out, wakeFollower(e, wakes))
			e.hearsFinishes = true
		}
	}
	if l, ok := cfg.Store.(store.LockHolder); ok {
		if lost := l.LockLost(); lost != nil {
			out = append(out, lockWatcher(e, lost))
		}
	}
	out = append(out,
		pruner.New(pruneHost{e}, e.st, e.clock, AuditStream, TraceOutbox),
		sampler.New(sampleHost{e}, e.clock, HistoryInterval),
		rescuer.New(rescueHost{e}, e.clock),
		reaper.New(reapHost{e}, e.clock),
		schedules.New(newScheduleHost(e), e.clock),
		events.New(eventsHost{e}, e.clock),
		storage.New(storageHost{e}, e.clock),
	)
	if e.st.Capabilities().Shared {
		out = append(out, rollkeeper.New(rollHost{e}, e.clock))
	}
	if cfg.Traces != nil {
		out = append(out, traceexport.New(traceHost{e}, e.st, e.clock, cfg.Traces, TraceOutbox))
	}
	return append(out, dispatcher.New(dispatchHost{e}, e.clock, e.wake))
}

// wakeFollower passes a shared store's announcements on (docs/design.md
// §10): a write another daemon made wakes the dispatcher, a cancel it
// recorded stops the work this one holds, a run's end it committed ends
// the waits held on the run here. The dispatcher's tick stays the
// fallback for a lost wake-up, the lease renewal (which reads the run)
// for a lost cancel, AwaitRun's slow look for a lost end.
func wakeFollower(e *Engine, wakes <-chan store.Wake) service.Service {
	return &service.Go{ServiceName: "wakes", Run: func(stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			case w := <-wakes:
				if w.CancelRunID != "" {
					e.held.cancelNotified(w.CancelRunID)
					continue
				}
				if w.FinishedRunID != "" {
					e.watchers.wake([]string{w.FinishedRunID})
					continue
				}
				e.wake.kick()
			}
		}
	}}
}

// lockWatcher closes admission when the store says its lock is gone
// (store.LockHolder): no start is accepted that the store could no
// longer keep.
func lockWatcher(e *Engine, lost <-chan struct{}) service.Service {
	return &service.Go{ServiceName: "lockwatch", Run: func(stop <-chan struct{}) {
		select {
		case <-lost:
			e.admission.close(CodeStorage, LockLostReason)
		case <-stop:
		}
	}}
}
