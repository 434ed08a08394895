-- brief, in Lua: agents that plan, research in parallel and review, with
-- a person approving the mail before it goes out. The same flows as
-- brief.star; register one or the other.
--
-- A planner agent splits a topic into questions; one researcher sub-agent
-- per question answers it (a fan-out of child runs that closes once three
-- quarters have answered); a critic agent turns the answers into a mail; a
-- person approves the mail; the mail is sent at most once.
--
-- Check it with:
--
--   bin/weir flow check --config examples/agents/weir.hcl examples/agents/brief.lua

flow{"researcher",
  doc = "Answer one research question, keeping a note of it.",
  input = {
    type = "object",
    required = {"question"},
    properties = {question = {type = "string"}},
  },
  nodes = {
    agent{"answer",
      model = "small",
      system = "You answer one research question in two sentences. Save what you found with notes.put first.",
      prompt = function(ctx) return "Question: " .. ctx.input.question end,
      tools = {"notes.put"},
      max_turns = 4,
      max_tokens = 256},
  },
  output = function(ctx) return {question = ctx.input.question, answer = ctx.results.answer.answer} end,
}

local QUESTIONS = {
  type = "object",
  required = {"questions"},
  properties = {questions = {type = "array", items = {type = "string"}, minItems = 1, maxItems = 6}},
}

local MAIL = {
  type = "object",
  required = {"subject", "body"},
  properties = {subject = {type = "string"}, body = {type = "string"}},
}

local function review_prompt(ctx)
  local lines = {"Review these answers and write the mail:"}
  for _, r in ipairs(ctx.results.research.results) do
    lines[#lines + 1] = "- " .. r.question .. ": " .. r.answer
  end
  return table.concat(lines, "\n")
end

local function mail(ctx) return ctx.results.critic.answer end

flow{"brief",
  doc = "Plan questions, research them with sub-agents, review, approve, mail.",
  budget = 5000,
  input = {
    type = "object",
    required = {"topic", "to"},
    properties = {topic = {type = "string"}, to = {type = "string"}},
  },
  nodes = {
    agent{"plan",
      model = "small",
      system = "You plan research: answer with JSON {\"questions\": [...]}, at most six.",
      prompt = function(ctx) return "Plan research on: " .. ctx.input.topic end,
      max_turns = 2,                 -- one more turn to correct an answer that is not the schema
      output = QUESTIONS,
      next = "research"},
    fanout{"research",
      items = function(ctx) return ctx.results.plan.answer.questions end,
      flow = "researcher",
      args = function(ctx, q) return {question = q} end,
      width = 2,                     -- researchers in flight at once
      depth = 1,                     -- they delegate no further
      max_items = 6,
      quorum = 0.75,                 -- close when three quarters have answered
      deadline = "5m", grace = "30s",
      next = "critic"},
    agent{"critic",
      model = "small",
      system = "You are an editor. Turn research answers into a short mail: JSON {\"subject\", \"body\"}.",
      prompt = review_prompt,
      max_turns = 3,
      output = MAIL,
      next = "approve"},
    wait{"approve",                  -- a person sees the mail before it goes out
      args = mail,
      timeout = "1d", next = "send", error = "shelve"},
    task{"send", tool = "mail.send",
      args = function(ctx)
        return {to = ctx.input.to, subject = mail(ctx).subject, body = mail(ctx).body}
      end,
      at_most_once = true},
    task{"shelve", tool = "notes.put",
      args = function(ctx) return {key = "shelved/" .. ctx.input.topic, text = mail(ctx).body} end},
  },
}
