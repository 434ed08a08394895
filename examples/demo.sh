#!/usr/bin/env bash
# The demo `make demo` runs, from the repository root, after `make build`:
# the flow language refusing a flawed flow, then a real run end to end on
# the embedded store: plan, fan out with a quorum, a subflow, a person's
# approval given with a second command, and a mail published at most once;
# then agents on a scripted model server (offline): a planner, researcher
# sub-agents fanned out with a quorum, a critic, and a person's approval of
# the mail they wrote; a schedule that starts an agent by itself; and a
# flow that a signed GitHub webhook starts and an event finishes.
set -euo pipefail
cd "$(dirname "$0")/.."

weir=bin/weir llm=bin/scripted-llm gh=bin/github-delivery
for b in $weir $llm $gh; do
    if [[ ! -x $b ]]; then
        echo "demo: $b is missing; run 'make demo' (it builds both)" >&2
        exit 2
    fi
done

step() { printf '\n==> %s\n' "$*"; }
# phase_is RUN PHASE: the run is in that phase (no grep -q: it would cut
# weir's output short and pipefail would call that a failure).
phase_is() { "$weir" run get "$1" | grep "phase: *$2" >/dev/null; }
show() { printf '$ %s\n' "$*"; }
# want_phase RUN PHASE WHAT: the run is in that phase, or the demo stops
# saying WHAT went wrong, with the run.
want_phase() { phase_is "$1" "$2" || { echo "demo: $3" >&2; "$weir" run get "$1" >&2; exit 1; }; }
# mails N [TEXT]: the mail plugin's outbox holds N mails since the demo
# began, or the demo stops; with TEXT it first says how many, and TEXT.
mails() {
    local outbox=$data/plugin-state/mail/outbox.jsonl lines
    lines=$(wc -l < "$outbox")
    if [[ -n ${2:-} ]]; then echo "$outbox: $lines mail(s)$2"; fi
    [[ $lines -eq $1 ]] || { echo "demo: expected $1 mail(s) in all, found $lines" >&2; exit 1; }
}

step "Check the example flows together, against the example tool catalog"
show "$weir flow check --tools examples/catalog.json" examples/*.star
"$weir" flow check --tools examples/catalog.json examples/*.star

step "The same flows in Lua: the same builtins, the same checks"
show "$weir flow check --tools examples/catalog.json" examples/*.lua
"$weir" flow check --tools examples/catalog.json examples/*.lua

step "A flow with mistakes is refused: every problem, at its line, with a stable code"
show "$weir flow check --tools examples/catalog.json examples/mistakes/newsletter.star examples/summarize.star"
set +e
"$weir" flow check --tools examples/catalog.json examples/mistakes/newsletter.star examples/summarize.star 2>&1
code=$?
set -e
if [[ $code -ne 1 ]]; then
    echo "demo: expected the check to refuse the flow (exit 1), got exit $code" >&2
    exit 1
fi
echo "(exit $code: refused, as it should be)"
show "$weir flow check --tools examples/catalog.json examples/mistakes/newsletter.lua examples/summarize.lua"
set +e
"$weir" flow check --tools examples/catalog.json examples/mistakes/newsletter.lua examples/summarize.lua 2>&1
code=$?
set -e
[[ $code -eq 1 ]] || { echo "demo: expected the Lua check to refuse the flow (exit 1), got exit $code" >&2; exit 1; }
echo "(exit $code: the same three codes, at file:line)"

# A run end to end, on a fresh data directory, with the plugins make built.
data=$(mktemp -d "${TMPDIR:-/tmp}/weir-demo.XXXXXX")
export WEIR_DATA=$data WEIR_PLUGINS=$PWD/bin/plugins WEIR_SOCKET=$data/weir.sock
daemon= model=
cleanup() {
    if [[ -n $daemon ]]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
    if [[ -n $model ]]; then kill -TERM "$model" 2>/dev/null || true; wait "$model" 2>/dev/null || true; fi
    rm -rf "$data"
}
trap cleanup EXIT

step "Start a scripted model server on loopback (OpenAI's wire format), for the agents"
show "scripted-llm -addr 127.0.0.1:0 -script examples/agents/script.json &"
# The file exists before the server starts: the shell opens a background
# command's redirection in the child, after this script goes on.
: >"$data/model.out"
"$llm" -addr 127.0.0.1:0 -script examples/agents/script.json >"$data/model.out" &
model=$!
base_url=
for _ in $(seq 1 200); do
    base_url=$(sed -n 's/.*OpenAI base_url \([^)]*\)).*/\1/p' "$data/model.out")
    [[ -n $base_url ]] && break
    sleep 0.05
done
[[ -n $base_url ]] || { echo "demo: the scripted model server did not start" >&2; exit 1; }
cat "$data/model.out"
# The example config names 127.0.0.1:8089; this server took a free port.
{ sed "s#http://127.0.0.1:8089/v1#$base_url#" examples/agents/weir.hcl; echo 'log_level = "warn"'; } >"$data/weir.hcl"
# And a webhook: GitHub's deliveries, signed with this secret, become
# events (docs/operators.md, Webhooks); the events example reads them.
(umask 077; echo "demo-webhook-secret" >"$data/github.secret")
cat >>"$data/weir.hcl" <<EOF
hook "github" {
  secret_file  = "$data/github.secret"
  signature    = "github"
  event        = "github"
  event_header = "X-GitHub-Event"
  id_header    = "X-GitHub-Delivery"
  key          = "/issue/number"
}
EOF

step "Start the daemon on a fresh data directory ($data), the llm plugin configured"
show "weir serve --config weir.hcl &"
"$weir" serve --config "$data/weir.hcl" &
daemon=$!
for _ in $(seq 1 200); do
    "$weir" flow ls >/dev/null 2>&1 && break
    sleep 0.05
done
"$weir" flow ls >/dev/null

step "Register the demo flow: checked against the installed plugins first"
show "weir flow register examples/run/digest.star"
"$weir" flow register examples/run/digest.star

step "Draw it"
show "weir flow graph digest"
"$weir" flow graph digest

input='{"topic":"durable agents","questions":["what is a lease","what is a cohort","what is a wait","what is a marker"],"to":"you@example.com"}'
step "Start a run (its request id makes the start idempotent)"
show "weir run start digest --request-id demo-1 --input '$input'"
run=$("$weir" run start digest --request-id demo-1 --input "$input")
echo "$run"
show "weir run start digest --request-id demo-1 --input '...'   # sent again: the same run"
again=$("$weir" run start digest --request-id demo-1 --input "$input")
[[ $again == "$run" ]] || { echo "demo: the same request id started a second run ($again)" >&2; exit 1; }
echo "$again (the same run)"

step "The run plans, fans out four questions two at a time, summarizes, then waits for a person"
# Not "phase: waiting": a run also waits while its fan-out or a child
# works. A decision being open is the precise condition.
show "weir run wait $run --decision approve"
"$weir" run wait "$run" --decision approve --timeout 60s
show "weir run get $run"
"$weir" run get "$run"

step "Approve it, as a user would, with a second command"
show "weir run approve $run approve --payload '{\"ok\":true}'"
"$weir" run approve "$run" approve --payload '{"ok":true}'

show "weir run wait $run"
"$weir" run wait "$run" --timeout 60s
step "The result"
show "weir run get $run"
"$weir" run get "$run"
want_phase "$run" completed "the run did not complete"

step "What the system did: the run's timeline"
show "weir run events $run"
"$weir" run events "$run"

step "What the run did, drawn on its flow"
show "weir run graph $run"
"$weir" run graph "$run"

step "The mail went out once: the mail plugin's outbox"
mails 1 ", the digest's, sent once"

step "Agents: check the agent flows against the configured models and installed tools"
show "weir flow check --config examples/agents/weir.hcl examples/agents/brief.star"
"$weir" flow check --config "$data/weir.hcl" examples/agents/brief.star
"$weir" flow check --config "$data/weir.hcl" examples/agents/brief.lua

step "Register them and start a brief: a planner agent, four researcher sub-agents two at a time, a critic"
show "weir flow register examples/agents/brief.star"
"$weir" flow register examples/agents/brief.star
brief_input='{"topic":"durable agents","to":"you@example.com"}'
show "weir run start brief --request-id demo-brief --input '$brief_input'"
brief=$("$weir" run start brief --request-id demo-brief --input "$brief_input")
echo "$brief"
show "weir run wait $brief --decision approve"
"$weir" run wait "$brief" --decision approve --timeout 60s
show "weir run get $brief"
"$weir" run get "$brief"

step "The critic's mail waits for a person; approve it"
show "weir run approve $brief approve"
"$weir" run approve "$brief" approve
"$weir" run wait "$brief" --timeout 60s >/dev/null
want_phase "$brief" completed "the brief did not complete"

step "Every model turn is in the timeline, with its tokens and cost (the plan's first answer was not its schema: one correction turn)"
show "weir run events $brief | grep agent_turn"
"$weir" run events "$brief" | grep agent_turn

step "The result: each agent's turns, tokens and cost, and the mail, sent once"
show "weir run get $brief"
"$weir" run get "$brief"
mails 2 " in all since the demo began: the digest's and the critic's, each sent once"

step "The same digest written in Lua: registered as a new version of digest, run, approved, mailed once"
show "weir flow register examples/run/digest.lua"
"$weir" flow register examples/run/digest.lua
show "weir run start digest --request-id demo-lua --input '$input'"
lua_run=$("$weir" run start digest --request-id demo-lua --input "$input")
echo "$lua_run"
"$weir" run wait "$lua_run" --decision approve --timeout 60s >/dev/null
show "weir run approve $lua_run approve"
"$weir" run approve "$lua_run" approve --payload '{"ok":true}'
"$weir" run wait "$lua_run" --timeout 60s >/dev/null
want_phase "$lua_run" completed "the Lua digest did not complete"
"$weir" run get "$lua_run" | grep -E "^(flow|phase|output):"
mails 3

step "A scheduled agent: morning_digest starts the morning flow by itself (every 2s for the demo; a weekday cron in earnest)"
show "weir flow register examples/agents/morning.star"
"$weir" flow check --config "$data/weir.hcl" examples/agents/morning.star >/dev/null
"$weir" flow register examples/agents/morning.star
show "weir schedule show morning_digest"
"$weir" schedule show morning_digest
# The first firing's run: named in the schedule's firings once its tick
# fired (bounded: the first tick is at most 2 s away, a pass once a second).
scheduled=
for _ in $(seq 1 100); do
    scheduled=$("$weir" schedule show morning_digest --json | sed -n 's/.*"run_id": *"\([^"]*\)".*/\1/p' | head -n 1)
    [[ -n $scheduled ]] && break
    sleep 0.1
done
[[ -n $scheduled ]] || { echo "demo: morning_digest fired no run within 10 s" >&2; "$weir" schedule show morning_digest >&2; exit 1; }
show "weir run wait $scheduled"
"$weir" run wait "$scheduled" --timeout 60s >/dev/null
want_phase "$scheduled" completed "the scheduled run did not complete"
show "weir run get $scheduled"
"$weir" run get "$scheduled"
"$weir" run get "$scheduled" | grep "started by: *schedule:morning_digest" >/dev/null ||
    { echo "demo: the scheduled run does not name its schedule" >&2; exit 1; }
show "weir schedule rm morning_digest"
"$weir" schedule rm morning_digest

step "The run becomes a test: exported as a recording, replayed offline against the flow's code"
show "weir run export $scheduled > morning.weirrun"
"$weir" run export "$scheduled" >"$data/morning.weirrun"
show "weir test morning.weirrun --flow examples/agents/morning.star"
"$weir" test "$data/morning.weirrun" --flow examples/agents/morning.star
sed 's/three short lines/two short lines/' examples/agents/morning.star >"$data/morning-changed.star"
show "weir test morning.weirrun --flow morning-changed.star   # the system prompt changed"
set +e
"$weir" test "$data/morning.weirrun" --flow "$data/morning-changed.star"
code=$?
set -e
[[ $code -eq 1 ]] || { echo "demo: expected the changed prompt to diverge (exit 1), got exit $code" >&2; exit 1; }
echo "(exit $code: the model would be asked something it never answered)"

step "Events: a signed GitHub webhook starts a flow, and an event it waits for finishes it"
show "weir flow register examples/events/issues.star"
"$weir" flow register examples/events/issues.star
opened='{"action":"opened","issue":{"number":42,"title":"Leases expire early","user":{"login":"ada"}}}'
show "github-delivery -event issues -id d-1 '$opened'   # as GitHub posts it to /v1/hooks/github"
"$gh" -secret-file "$data/github.secret" -event issues -id d-1 "$opened"
show "github-delivery -event issues -id d-1 '...'   # GitHub redelivers it: the same event, nothing new starts"
"$gh" -secret-file "$data/github.secret" -event issues -id d-1 "$opened"
show "github-delivery -event issues -id d-2 '{\"action\":\"labeled\",...}'   # the trigger's filter says no"
"$gh" -secret-file "$data/github.secret" -event issues -id d-2 "${opened/opened/labeled}"
show "github-delivery -secret-file wrong.secret -event issues -id d-3 '...'   # a forged delivery: refused, nothing stored"
echo "not-the-secret" >"$data/wrong.secret"
if "$gh" -secret-file "$data/wrong.secret" -event issues -id d-3 "$opened"; then
    echo "demo: a delivery signed with the wrong secret was accepted" >&2
    exit 1
fi
show "weir event ls"
"$weir" event ls
issue=$("$weir" event ls --json | sed -n 's/.*"run_id": *"\([^"]*\)".*/\1/p' | head -n 1)
[[ -n $issue ]] || { echo "demo: the opened issue started no run" >&2; "$weir" event ls --json >&2; exit 1; }
# The run notes the issue, then parks until its fix ships (bounded: two
# tool calls away).
for _ in $(seq 1 200); do
    phase_is "$issue" waiting && break
    sleep 0.05
done
want_phase "$issue" waiting "the issue's run is not waiting for its release"
show "weir run get $issue"
"$weir" run get "$issue"
show "weir event send release.shipped --key 42 --payload '{\"version\":\"v1.4.0\"}'   # what the release job sends"
"$weir" event send release.shipped --key 42 --payload '{"version":"v1.4.0"}'
"$weir" run wait "$issue" --timeout 60s >/dev/null
want_phase "$issue" completed "the issue's run did not complete"
show "weir run get $issue"
"$weir" run get "$issue"
mails 4 " in all: the reporter was told once"

step "Stop the daemon: admission closes, held work drains, every record is written"
show "kill -TERM $daemon"
kill -TERM "$daemon"
wait "$daemon"
daemon=

step "What the model server billed (the turns weir journaled above, none sent twice)"
kill -TERM "$model"
wait "$model" || true
model=
tail -n 1 "$data/model.out"

step "Done: a flawed flow was refused before it could run, a real run planned, fanned out, waited for you and published once — in Starlark and in Lua — and agents did the same on a model, one of them started by a schedule, and a webhook started a flow that an event finished"
