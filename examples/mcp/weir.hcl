# A daemon config that bridges in an MCP server: examples/cmd/demo-mcp, built
# with the official Go SDK (run.sh builds it to bin/demo-mcp and writes its
# absolute path here: plugins run in their state directory, so paths must be
# absolute).
plugin "mcp" {
  servers = {
    # A stdio server: the plugin starts it, and starts it again if it dies.
    demo = { command = ["DEMO_MCP", "-journal", "JOURNAL"] }
    # A streamable HTTP server would be:
    # tickets = { url = "http://127.0.0.1:9100/mcp", token_env = "TICKETS_TOKEN" }
  }
  # demo's annotations say echo, slow and picture are read-only and
  # Lookup.Item idempotent and not destructive: believe them.
  trust_annotations = ["demo"]
  # append has no annotations: it stays at most once unless listed here.
  # idempotent = ["demo-append"]
  # env = ["TICKETS_TOKEN"]   # the host's key: variables passed to this plugin alone
}
