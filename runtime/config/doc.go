// Package config is the weir daemon's configuration file: HCL, the format
// operators of Nomad, Vault and Consul already write. Load reads and
// validates a file strictly (unknown blocks and attributes are refused and
// every error names its file:line), resolves it into a Config with every
// default filled in, and the daemon turns that into the engine's limits,
// the socket's mode and group, the optional TCP listener and its tokens,
// the metrics address, the retention age, each plugin's section and the
// webhooks (hook blocks, hooks.go).
//
// Each setting is one entry of Knobs, its one home: its file key, weir
// serve's flag, its environment variable, its place in the config view
// and the engine.Config field it sets. The file's schema (but for the
// listener and plugin blocks), serve's flags, the view, Default,
// EngineConfig and the configuration table of docs/operators.md are made
// from it; a new setting is added there first.
//
// A config in force has a version: Assign numbers each distinct config a
// data directory runs under, in the store, so the version recorded on a
// start event names one config content even across restarts.
//
// Reload builds a candidate with Load, checks it with RestartChanges
// against the config in force and, only if both pass, swaps it in: an
// invalid candidate never touches the running daemon.
package config
