// Package console serves weir's web console: pages that show a person's
// runs, flows, dead letters and the daemon's status, and let them decide
// waits, cancel runs and recover them (resolve an unknown outcome,
// redrive a dead letter, fork a run from a node visit).
//
// The console is the API, drawn. Its pages are static files embedded in
// the binary (no build step, no CDN, nothing fetched at run time) whose
// scripts call the API through the console: a sign-in turns one of the
// tcp block's bearer tokens into a session cookie (HttpOnly,
// SameSite=Strict), and each API request of a page is handed to the API
// server in-process with that session's token, so the API's own ownership
// rules decide what a page may see or do — another owner's run answers
// exactly like a missing one. Every state-changing request must carry the
// session's CSRF token in a header and, when the browser names an origin,
// come from the console's own.
//
// A run's page follows the run's event stream; while the run has not
// ended it asks that stream for turn deltas too (assets/liveturns.js), so
// a daemon streams a model turn's text only while someone has the page
// open, and the page shows it, as text, until the turn is journaled.
package console
