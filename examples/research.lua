-- research, in Lua: plan queries for a topic, search them in parallel,
-- have the summarize flow write a summary (rewriting it at most three
-- times), wait for a human to approve it, then mail it. The same flow as
-- research.star; either may be registered beside either summarize.
--
-- Check it with:  bin/weir flow check --tools examples/catalog.json examples/research.lua examples/summarize.lua

local function plan_args(ctx)
  return {topic = ctx.input.topic}
end

flow{"research",
  doc = "Research a topic and publish a reviewed summary.",
  max_depth = 4,
  budget = 200,
  nodes = {
    task{"plan", tool = "notes.plan", args = plan_args, next = "search", retries = 3},
    fanout{"search",
      items = function(ctx) return ctx.results.plan.queries end,
      tool = "web.search",
      args = function(ctx, item) return {q = item} end,
      width = 4, depth = 1, max_items = 32,
      quorum = 0.75, deadline = "10m", grace = "30s",
      next = "write"},
    subflow{"write", flow = "summarize",
      args = function(ctx) return {hits = ctx.results.search.results} end,
      next = "check", error = "give_up", max_visits = 3},
    branch{"check", cond = function(ctx) return #ctx.results.write.text > 0 end,
      ["then"] = "approve", otherwise = "write"},
    wait{"approve", timeout = "30d", next = "publish", error = "give_up"},
    task{"publish", tool = "mail.send",
      args = function(ctx) return {body = ctx.results.write.text} end,
      at_most_once = true},
    task{"give_up", tool = "mail.send", args = {body = "failed"}, at_most_once = true},
  },
}
