-- ticket, in Lua: a flow over an MCP server's tools (see weir.hcl). The
-- same flow as ticket.star; register one or the other. Look an item up
-- (idempotent on a trusted server's word, so retried), note it in a
-- journal (not idempotent: at most once, its error wire taken if weir
-- cannot know whether it ran), then echo what the journal says.
flow{"ticket",
  doc = "Look a ticket up and note it, through an MCP server.",
  input = {type = "object", properties = {key = {type = "string"}}, required = {"key"}},
  nodes = {
    task{"look", tool = "mcp.demo-lookup-item", args = function(ctx) return {key = ctx.input.key} end,
      retries = 2, next = "note"},
    task{"note", tool = "mcp.demo-append", args = function(ctx) return {line = ctx.input.key} end,
      at_most_once = true, next = "done", error = "unsure"},
    task{"done", tool = "mcp.demo-echo", args = function(ctx) return {text = "noted: " .. ctx.results.note} end},
    task{"unsure", tool = "mcp.demo-echo", args = {text = "check the journal by hand"}},
  },
}
