-- newsletter, in Lua: the same three mistakes as newsletter.star.
-- `weir flow check` refuses it and names each one at its line.
flow{"newsletter",
  nodes = {
    task{"collect", tool = "web.search", args = function(ctx) return {q = ctx.input.topic} end, next = "draft"},
    -- Mistake 1: the flow is called "summarize".
    subflow{"draft", flow = "summarise", args = function(ctx) return {hits = {ctx.results.collect}} end,
      next = "review"},
    -- Mistake 2: this loops back to draft with no max_visits anywhere on the loop.
    branch{"review", cond = function(ctx) return #ctx.results.draft.text > 100 end,
      ["then"] = "send", otherwise = "draft"},
    -- Mistake 3: mail.send is not idempotent, so it may not be retried and
    -- the node must accept at-most-once.
    task{"send", tool = "mail.send", args = function(ctx) return {body = ctx.results.draft.text} end,
      retries = 2},
  },
}
