-- issues: the flow of issues.star in Lua: a webhook's event starts it,
-- another event finishes it (see issues.star for the whole story).

flow{
  name = "issue",
  doc = "Note a new issue, wait until a release ships its fix, tell its reporter.",
  input = {
    type = "object",
    required = {"number", "title", "by"},
    properties = {number = {type = "string"}, title = {type = "string"}, by = {type = "string"}},
  },
  nodes = {
    task{"note", tool = "notes.put",
      args = function(ctx) return {key = "issue/" .. ctx.input.number, text = ctx.input.title} end,
      next = "shipped"},
    wait{"shipped", event = "release.shipped", match = function(ctx) return ctx.input.number end,
      timeout = "30d", next = "tell", error = "shelve"},
    task{"tell", tool = "mail.send",
      args = function(ctx)
        return {to = ctx.input.by .. "@example.com", subject = "Fixed: " .. ctx.input.title,
                body = "The fix of #" .. ctx.input.number .. " shipped in " .. ctx.results.shipped.version .. "."}
      end,
      at_most_once = true},
    task{"shelve", tool = "notes.put",
      args = function(ctx) return {key = "stale/" .. ctx.input.number, text = ctx.input.title} end},
  },
}

on_event{"github.issues", flow = "issue", name = "issue_opened",
  filter = function(ev) return ev.payload.action == "opened" end,
  input = function(ev)
    return {number = ev.key, title = ev.payload.issue.title, by = ev.payload.issue.user.login}
  end,
  doc = "Each issue opened starts its flow, once."}
