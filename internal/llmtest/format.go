package llmtest

// ScriptFormat describes the script file LoadScript reads, for
// `scripted-llm -h`; docs/agents.md ("Script the model") says the same
// with a worked example, and a test checks that both name every key.
const ScriptFormat = `The script is a JSON object; unknown keys are refused:

  {"steps": [STEP, ...], "loop": false}

A request takes the first step, in the script's order, that was not played
yet and whose match keys all fit it (a step without match keys fits any
request); each step is played once. "loop": true starts over when every
step was played. A request no step fits is answered 500.

Match keys (all optional; every key set must fit):
  "match"            a substring of the raw JSON request body, as encoded
                     (a quote is \" there)
  "match_last_user"  a substring of the last message a user wrote (tool
                     results are not a user's text): aim at a prompt, e.g.
                     the question one sub-agent of a fan-out was given
  "match_system"     a substring of the system prompt: a marker such as
                     "[critic]" that a flow's author puts in an agent's
                     system prompt
  "node"             the agent node's id, exactly (weir's llm plugin sends it
                     in the X-Weir-Node header); sub-agents of one fan-out
                     share it

An answer:
  "text"             the model's text (a final answer when no tool calls)
  "tool_calls"       [{"name": "notes__put", "arguments": {...}}, ...]; a
                     tool's name as the model sees it (notes.put is
                     notes__put), "id" optional, "raw_arguments" for
                     arguments that are not JSON
  "stop_reason"      "end_turn", "tool_use" or "max_tokens" (default: from
                     the tool calls)
  "usage"            {"input_tokens": N, "output_tokens": N} (default: a
                     quarter of the request's bytes in, one token per delta
                     out); "no_usage": true leaves it out of the answer

Or an error:
  "status"           an HTTP status, answered with the provider's error body
  "retry_after"      the Retry-After header, in seconds
  "error_code"       the provider's code; "context_length_exceeded" is said
                     each provider's way
  "error_message"    the message
  "malformed"        true: an answer that is not JSON
  "cut_short"        true: the stream ends after its first delta
`
