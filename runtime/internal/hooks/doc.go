// Package hooks turns a provider's signed HTTP delivery (a GitHub push, a
// Stripe payment) into an event of its owner. Its own package because a
// webhook is the one request the daemon takes from someone who is no
// owner: the sender proves itself with a shared secret rather than a
// token or a socket peer, so what it checks (a signature, before the body
// is even parsed) and what it trusts (nothing in the body but what the
// hook's block names) are different from every other route's.
//
// A Hook is one `hook "NAME" { ... }` block of the daemon's config
// (runtime/config reads it; this package may not import config). The
// signature schemes are pure functions over (secret, headers, body, now),
// so a table test covers each without a server. Handler serves
// POST /v1/hooks/{name}: it checks a delivery and hands the event to an
// Accept function, so it plugs into whatever accepts events without
// knowing the engine. Deduplication is not here: the provider's delivery
// id becomes the event id, and the event's acceptance deduplicates on it,
// so a provider's retry (or a replayed delivery, whose signature is as
// good as the first's) starts nothing twice.
package hooks
