#!/usr/bin/env bash
# Bridge an MCP server into weir and run a flow over its tools, then offer
# that flow back to MCP clients with `weir mcp`. From the repository root,
# after `make build`.
set -euo pipefail
cd "$(dirname "$0")/../.."
weir=bin/weir
[[ -x $weir ]] || { echo "run.sh: $weir is missing; run 'make build' first" >&2; exit 2; }
go build -o bin/demo-mcp ./examples/cmd/demo-mcp

data=$(mktemp -d "${TMPDIR:-/tmp}/weir-mcp.XXXXXX")
export WEIR_DATA=$data WEIR_PLUGINS=$PWD/bin/plugins WEIR_SOCKET=$data/weir.sock
daemon=
cleanup() {
    if [[ -n $daemon ]]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
    rm -rf "$data"
}
trap cleanup EXIT
sed -e "s|DEMO_MCP|$PWD/bin/demo-mcp|" -e "s|JOURNAL|$data/journal|" examples/mcp/weir.hcl > "$data/weir.hcl"

set -x
"$weir" plugin ls --config "$data/weir.hcl" | sed -n '/^mcp/,/^$/p'
"$weir" flow check --config "$data/weir.hcl" examples/mcp/ticket.star
"$weir" flow check --config "$data/weir.hcl" examples/mcp/ticket.lua
"$weir" serve --config "$data/weir.hcl" --log-level warn &
daemon=$!
"$weir" status --wait 30s >/dev/null
"$weir" flow register examples/mcp/ticket.star
"$weir" run start ticket --request-id T-1 --input '{"key":"T-1"}' --wait
cat "$data/journal"
# The same flow, as a tool of an MCP client speaking to `weir mcp` on stdio
# (the client keeps stdin open until it has its answer: a client that hangs
# up detaches from the run).
set +x
coproc MCP { "$weir" mcp; }
printf '%s\n' \
  '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"0"}}}' \
  '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ticket","arguments":{"key":"T-2","weir_request_id":"T-2"}}}' >&"${MCP[1]}"
while read -r line <&"${MCP[0]}"; do
    if [[ $line == *'"id":2'* ]]; then echo "$line"; break; fi
done
exec {MCP[1]}>&-
wait "$MCP_PID" || true
