// Package agente2e holds the end-to-end tests of agent nodes: the engine
// over a real Badger store calling the real llm plugin binary, which talks
// to the scripted model server (internal/llmtest) on loopback in both
// providers' wire formats. It has no code of its own; it is a package so
// that its TestMain can build the plugins it needs apart from the engine's
// unit tests.
package agente2e
