package api

import (
	"net/http"

	"github.com/weirhq/weir/runtime/api/apitypes"
	"github.com/weirhq/weir/runtime/engine"
)

// statsHistory answers GET /v1/stats/history: the engine's samples of
// the last hour, as GET /v1/stats shows daemon-wide figures to every
// caller.
func (s *Server) statsHistory(w http.ResponseWriter, r *http.Request) {
	if !queryParams(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, &apitypes.StatsHistory{Interval: engine.HistoryInterval, Window: engine.HistoryWindow,
		Samples: convertAllEmpty(s.eng.StatsHistory(), sampleOf)})
}

func sampleOf(s engine.Sample) apitypes.StatsSample {
	return apitypes.StatsSample{At: s.At, Admission: s.Health.Admission, Slots: s.Health.Slots, Queued: s.Health.Queued,
		Parked: s.Health.Parked, Held: s.Health.Held, Types: convertAllEmpty(s.Types, typeStatsOf),
		Models: convertAll(s.Models, func(m engine.ModelStats) apitypes.ModelStats { return apitypes.ModelStats(m) })}
}

// convertAllEmpty is convertAll answering [] for none.
func convertAllEmpty[S, T any](in []S, f func(S) T) []T {
	if out := convertAll(in, f); out != nil {
		return out
	}
	return []T{}
}
