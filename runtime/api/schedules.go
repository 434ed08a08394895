package api

import (
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/store"
)

// routeSchedules registers the operations on the caller's schedules
// (engine.Ops): list, show, pause, resume, fire now and remove. A
// schedule is registered with the flow file that declares it.
func (s *Server) routeSchedules() {
	s.handle("GET /v1/schedules", s.scheduleList)
	s.handle("GET /v1/schedules/{name}", s.scheduleGet)
	s.handle("DELETE /v1/schedules/{name}", s.scheduleRemove)
	s.handle("POST /v1/schedules/{name}/pause", s.schedulePause)
	s.handle("POST /v1/schedules/{name}/resume", s.scheduleResume)
	s.handle("POST /v1/schedules/{name}/trigger", s.scheduleTrigger)
}

// MaxScheduleBody bounds the body of a schedule's operation: a reason
// or a request id.
const MaxScheduleBody = 16 << 10

func (s *Server) scheduleList(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r, "limit") {
		return
	}
	limit, ok := limitParam(w, r.URL.Query().Get("limit"), 100, MaxListLimit)
	if !ok {
		return
	}
	vs, err := s.eng.Ops().Schedules(r.Context(), ownerFrom(r.Context()), limit)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	out := convertAll(vs, scheduleOf)
	if out == nil {
		out = []*apitypes.Schedule{}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) scheduleGet(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	v, err := s.eng.Ops().Schedule(r.Context(), ownerFrom(r.Context()), r.PathValue("name"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, scheduleOf(v))
}

func (s *Server) scheduleRemove(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	if err := s.eng.Ops().ScheduleRemove(r.Context(), ownerFrom(r.Context()), r.PathValue("name")); err != nil {
		writeEngineErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) schedulePause(w http.ResponseWriter, r *http.Request) { s.pauseSchedule(w, r, true) }

func (s *Server) scheduleResume(w http.ResponseWriter, r *http.Request) { s.pauseSchedule(w, r, false) }

func (s *Server) pauseSchedule(w http.ResponseWriter, r *http.Request, pause bool) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.SchedulePauseRequest
	if _, ok := decodeBody(w, r, MaxScheduleBody, &req); !ok {
		return
	}
	sc, err := s.eng.Ops().SchedulePause(r.Context(), engine.SchedulePauseParams{Owner: ownerFrom(r.Context()),
		Name: r.PathValue("name"), Pause: pause, Reason: req.Reason})
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, scheduleOf(&engine.ScheduleView{Schedule: sc}))
}

// scheduleTrigger is POST /v1/schedules/{name}/trigger: 201 with the run
// it started, 200 when the request id started it before.
func (s *Server) scheduleTrigger(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	var req apitypes.ScheduleTriggerRequest
	if !decodeStart(w, r, &req) {
		return
	}
	res, err := s.eng.Ops().ScheduleTrigger(r.Context(), ownerFrom(r.Context()), r.PathValue("name"), req.RequestID)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeStarted(w, res.RunID, res.Existing, startResultOf(res))
}

func scheduleOf(v *engine.ScheduleView) *apitypes.Schedule {
	sc := v.Schedule
	out := &apitypes.Schedule{Name: sc.Name, Flow: sc.Flow, Cron: sc.Cron, Timezone: sc.Zone, Input: sc.Input,
		Overlap: sc.Overlap, CatchUp: sc.CatchUp, MaxCatchUp: sc.MaxCatchUp, Next: sc.Next, Paused: sc.Paused,
		PausedBy: sc.PausedBy, PauseReason: sc.PauseReason, Source: sc.Source, Firings: []apitypes.ScheduleFiring{},
		CreatedAt: sc.CreatedAt, UpdatedAt: sc.UpdatedAt, Upcoming: v.Upcoming}
	if sc.Every != 0 {
		out.Every = sc.Every.String()
	}
	for _, f := range sc.Firings {
		out.Firings = append(out.Firings, apitypes.ScheduleFiring{Tick: f.Tick, RunID: f.RunID, Phase: phaseOf(v.Phases, f.RunID),
			Skipped: f.Skipped, At: f.At})
	}
	return out
}

func phaseOf(phases map[string]store.Phase, runID string) string {
	if p, ok := phases[runID]; ok {
		return string(p)
	}
	return ""
}
