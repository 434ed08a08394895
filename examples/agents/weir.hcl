# The daemon config of the agent example: the llm plugin with one model
# alias, "small", served by an OpenAI-compatible server. `make demo` runs
# examples/cmd/scripted-llm there and writes its own address in place of
# this one; point base_url at vLLM, Ollama or llama.cpp's server to use a
# real model instead (and add api_key_env and env for a hosted one).
plugin "llm" {
  providers = {
    local = { kind = "openai", base_url = "http://127.0.0.1:8089/v1" }
  }
  models = {
    small = { provider = "local", model = "scripted", input_cost = 100, output_cost = 400, max_tokens = 512 }
  }
}
