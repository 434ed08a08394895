package apitypes

// CodeIncompatible refuses a migration whose run does not fit the latest
// version of its flow; the message names each misfit (409).
const CodeIncompatible = "E_INCOMPATIBLE"

// MigrateRequest is the body of POST /v1/runs/{id}/migrate: the version to
// move the parked run to ("latest", the default and the only one) and why.
type MigrateRequest struct {
	To     string `json:"to,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// MigrateResponse answers a migration: the run's version before and after;
// migrated is false when the run was on the latest version already.
type MigrateResponse struct {
	RunID    string `json:"run_id"`
	Flow     string `json:"flow"`
	From     string `json:"from"`
	To       string `json:"to"`
	Migrated bool   `json:"migrated"`
}
