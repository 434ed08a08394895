// Command llm is weir's model plugin: it serves llm.chat, one model turn
// in the chat contract (sdk/chat), for OpenAI-compatible Chat Completions
// endpoints (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio, gateways)
// and the Anthropic Messages API, through the providers' official SDKs.
//
// The models it serves are aliases of its config section (providers and
// models, with prices and limits); a flow names the alias, never a
// provider. llm.chat is idempotent: a turn has no effect but spend, and
// the engine journals its answer so that a completed turn is never asked
// again. The SDKs' own retries are off, so every try is the engine's:
// counted in retry amplification and in the tokens billed. Each turn's
// cost, ceil((input_tokens × input_cost + output_tokens × output_cost) /
// 1e6) budget units, is reported as the call's actual cost.
//
// A provider's key is read from the variable its api_key_env names and
// never appears in an error, a log line or an output.
package main

import "github.com/weirhq/weir/sdk"

func main() {
	sdk.Serve(newPlugin(lookupEnv).tool())
}
