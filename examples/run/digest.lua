-- The demo flow in Lua: plan, ask several workers in parallel and close
-- when enough have answered, summarize in a subflow, wait for a person's
-- approval, then publish through the non-idempotent mail tool, at most
-- once. The same flows as digest.star; register one or the other.

local function plan(ctx)
  return {key = "plan/" .. ctx.input.topic, text = "ask: " .. table.concat(ctx.input.questions, ", ")}
end

local function answer(ctx, question)
  return {question = question, answer = "notes on " .. question}
end

flow{"digest",
  doc = "Plan, fan out questions, summarize, get approval, publish by mail.",
  budget = 100,
  input = {
    type = "object",
    required = {"topic", "questions", "to"},
    properties = {
      topic = {type = "string"},
      questions = {type = "array", items = {type = "string"}, maxItems = 8},
      to = {type = "string"},
    },
  },
  nodes = {
    task{"plan", tool = "notes.put", args = plan, next = "ask", retries = 2},
    fanout{"ask",
      items = function(ctx) return ctx.input.questions end,
      tool = "testkit.echo",
      args = answer,
      width = 2,      -- children in flight at once
      depth = 1,      -- they delegate no further
      max_items = 8,
      quorum = 0.75,  -- close when three quarters have answered
      deadline = "1m", grace = "10s",
      next = "write"},
    subflow{"write", flow = "digest_summary",
      args = function(ctx) return {answers = ctx.results.ask.results} end,
      next = "approve"},
    wait{"approve", timeout = "1d", next = "publish", error = "shelve"},
    task{"publish", tool = "mail.send",
      args = function(ctx)
        return {to = ctx.input.to, subject = "Digest: " .. ctx.input.topic, body = ctx.results.write.text}
      end,
      at_most_once = true},
    task{"shelve", tool = "notes.put",
      args = function(ctx) return {key = "shelved/" .. ctx.input.topic, text = ctx.results.write.text} end},
  },
}

flow{"digest_summary",
  doc = "Join the answers into one text.",
  nodes = {
    task{"draft", tool = "testkit.echo",
      args = function(ctx)
        local answers = {}
        for i, a in ipairs(ctx.input.answers) do answers[i] = a.answer end
        return {text = table.concat(answers, "; ")}
      end},
  },
}
