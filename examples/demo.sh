#!/usr/bin/env bash
# The demo `make demo` runs, from the repository root, after `make build`.
# For now it shows the flow language: checking the example flows, and a flow
# with mistakes being refused.
set -euo pipefail
cd "$(dirname "$0")/.."

weir=bin/weir
if [[ ! -x $weir ]]; then
    echo "demo: $weir is missing; run 'make build' first" >&2
    exit 2
fi

step() { printf '\n==> %s\n' "$*"; }
show() { printf '$ %s\n' "$*"; }

step "Check the example flows together, against the example tool catalog"
show "$weir flow check --tools examples/catalog.json" examples/*.star
"$weir" flow check --tools examples/catalog.json examples/*.star

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

step "Done: the example flows check clean, and a flawed flow is refused before it can run"
