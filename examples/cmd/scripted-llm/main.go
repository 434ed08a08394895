// Command scripted-llm serves a scripted model on loopback, speaking the
// OpenAI Chat Completions and Anthropic Messages wire formats, so that the
// examples run an agent end to end offline. Point an llm provider at it:
//
//	providers = { local = { kind = "openai", base_url = "http://127.0.0.1:8089/v1" } }
//
// or, for the Anthropic format, base_url = "http://127.0.0.1:8089".
//
// Usage:
//
//	scripted-llm -addr 127.0.0.1:8089 -script script.json
//
// The script is a JSON object {"steps": [...], "loop": false}; each step is
// a text answer, tool calls, or an error, aimed at the requests its match
// keys fit. `scripted-llm -h` prints the format (internal/llmtest's
// ScriptFormat); docs/agents.md has a worked example. On SIGINT or SIGTERM
// it prints the requests served and the tokens billed.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/weirhq/weir/internal/llmtest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil))
}

// run serves until a signal arrives (or stop is closed, for tests) and
// returns the exit status.
func run(args []string, stdout, stderr io.Writer, stop <-chan struct{}) int {
	fs := flag.NewFlagSet("scripted-llm", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "loopback address to listen on")
	script := fs.String("script", "", "JSON file of the scripted answers (required)")
	usage := func(w io.Writer) {
		fmt.Fprintln(w, "Usage: scripted-llm [-addr 127.0.0.1:8089] -script script.json")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fmt.Fprintln(w)
		fmt.Fprint(w, llmtest.ScriptFormat)
	}
	// The flag package's own output is silenced: -h prints to stdout (to
	// page or grep), a mistake to stderr.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0
		}
		fmt.Fprintln(stderr, "scripted-llm:", err)
		usage(stderr)
		return 2
	}
	if *script == "" {
		fmt.Fprintln(stderr, "scripted-llm: -script is required")
		return 2
	}
	s, err := llmtest.LoadScript(*script)
	if err != nil {
		fmt.Fprintln(stderr, "scripted-llm:", err)
		return 1
	}
	srv := llmtest.NewScript(s)
	if err := srv.Start(*addr); err != nil {
		fmt.Fprintln(stderr, "scripted-llm:", err)
		return 1
	}
	fmt.Fprintf(stdout, "scripted-llm: serving %d steps on %s (OpenAI base_url %s)\n", len(s.Steps), srv.URL(), srv.OpenAIBaseURL())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-sig:
	case <-stop:
	}
	srv.Close()
	b := srv.Billed()
	fmt.Fprintf(stdout, "scripted-llm: %d requests, %d turns, billed %d input and %d output tokens, %d steps unplayed\n",
		len(srv.Requests()), srv.Turns(), b.InputTokens, b.OutputTokens, srv.Remaining())
	return 0
}
