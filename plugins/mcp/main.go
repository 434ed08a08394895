// Command mcp is weir's bridge to the Model Context Protocol: it connects
// to the MCP servers named in its config section (a command spoken to on
// stdio, or a streamable HTTP endpoint) and serves each server's tools as
// weir tools, mcp.SERVER-TOOL, so that flows and agents call them like
// any other tool: checked at registration, admitted, journaled, retried
// only when that is safe.
//
// Its tools come from its config and from what the servers answer, so it
// installs with none; its manifest is made at launch (docs/design.md §11)
// and the host caches it by the binary's checksum and the config's hash.
// A server whose tool list changes after launch (it sends
// notifications/tools/list_changed, or comes back from a restart or an
// outage with another list) is listed again and the plugin's new tools
// published on the manifest stream of protocol revision 2, so weir serves
// them without a restart. A server down at launch serves the tools of its
// last list, kept in the state directory, and is retried in the
// background; a call that could
// not reach a server says not_sent, one whose answer was lost unknown
// (plugin protocol revision 2), so that weir retries what is safe.
//
// A tool's effect class is a safety decision and is never guessed: a tool
// is read only when its server is trusted (trust_annotations) and its
// annotations say read-only; it is idempotent when the operator lists it,
// or when its server is trusted and its annotations say idempotent and
// explicitly not destructive (see effect). Everything else is at most
// once.
//
// The MCP names are mapped to weir's alphabet reversibly (see toolPart);
// results, progress and cancellation are mapped as docs/plugins.md says.
package main

import (
	"log/slog"
	"os"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/wire"
)

func main() {
	// At launch the plugin's stderr is read by weir line by line, as
	// slog JSON: what the bridge has to say about its servers lands in
	// weir's log under the plugin's name.
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	b := newBridge(os.LookupEnv, logger, os.Getenv(wire.EnvStateDir))
	sdk.ServeWith(sdk.Options{Name: "mcp", ConfigSchema: configSchema, Tools: b.tools, Changes: b.changes})
}
