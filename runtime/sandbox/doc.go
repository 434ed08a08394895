// Package sandbox evaluates untrusted flow scripts in worker processes
// under OS limits, so that a script bomb kills only its own evaluation.
//
// go.starlark.net bounds a script's steps, but one step can allocate
// gigabytes ([0] * (1 << 29)) or recurse in Go until the process dies
// (a fatal stack overflow, which no recover() catches). The only sound
// bound on memory and time is a second process: a Pool keeps a few
// workers — the same binary, started with EnvWorker set — and sends each
// evaluation to one of them over its stdin and stdout. Each worker runs
// under RLIMIT_DATA (memory), RLIMIT_CPU (CPU time, an allowance per
// request) and a wall deadline per request, with a small Go stack limit so
// that deep recursion is told apart from memory. A worker that dies or
// overruns is killed and replaced; its evaluation answers a
// *flows.LimitError naming the limit (E_SCRIPT_LIMIT to users), and the
// process that asked goes on.
//
// The pool implements flows.Scripts, the boundary between the runtime and
// a flow language: registration's load and checks (Analyze) and a step's
// callables, batched into one round trip (Call), which the steps that wait
// for a worker at the same time share (DefaultBatch). Workers keep evaluators
// by source hash and ask for sources only when they lack them; a call
// ships the run's id, attempt, input and results, nothing else. The
// language a request names is looked up in the worker (Languages), so a
// second language runs in the same workers.
//
// A binary that uses a Pool must call ServeIfWorker first thing in main
// (and test binaries in TestMain): that is the worker's entry point.
package sandbox
