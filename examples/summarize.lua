-- summarize, in Lua: turn search hits into a short text with a model.
-- research calls it as a subflow; its output is what research sees as
-- ctx.results.write. The model is the llm plugin's alias "small".

local function hits_prompt(ctx)
  local lines = {}
  for i, h in ipairs(ctx.input.hits) do
    lines[i] = json.encode(h)
  end
  return "Summarize these search results in five sentences:\n" .. table.concat(lines, "\n")
end

flow{"summarize",
  doc = "Summarize search hits into a short text.",
  input = {
    type = "object",
    properties = {hits = {type = "array"}},
    required = {"hits"},
  },
  nodes = {
    agent{"draft", model = "small", prompt = hits_prompt, max_turns = 1, timeout = "2m",
      system = "You write short, plain summaries and cite the hits you used.",
      doc = "Ask the model for a first draft."},
  },
  output = function(ctx) return {text = ctx.results.draft.answer} end,
}
