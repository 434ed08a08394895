// Command llm is weir's model plugin: it serves llm.chat, one model turn
// in the chat contract (sdk/chat), for OpenAI-compatible Chat Completions
// endpoints (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio, gateways),
// the OpenAI Responses API and the Anthropic Messages API, through the
// providers' official SDKs.
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
// The manifest is made from the config at launch: llm.chat declares the
// chat contract and the configured models with their limits and prices,
// so registration checks a flow's model alias and the engine reserves a
// turn at its price. The config schema it declares lets weir refuse a
// wrong key with its file:line before the plugin runs.
//
// A provider's key is read from the variable its api_key_env names and
// never appears in an error, a log line or an output.
package main

import "github.com/weirhq/weir/sdk"

func main() {
	p := newPlugin(lookupEnv)
	sdk.ServeWith(sdk.Options{Name: "llm", ConfigSchema: configSchema, Tools: p.tools})
}
