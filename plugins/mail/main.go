// Command mail is weir's mail plugin. mail.send is at most once: weir
// calls it at most once per logical call and never two at a time. This
// build does not reach a mail server: every message is appended, durably,
// as one JSON line to outbox.jsonl in the plugin's state directory, which
// is what the demo and the at-most-once tests count. Because the outbox
// records each message's idempotency key, mail.send has a reconcile
// probe: asked about a call whose outcome weir lost, it answers happened
// (with the message's id and time, as the call would have) when the
// outbox holds that key, and not_happened when it does not.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weirhq/weir/sdk"
)

// OutboxFile is the outbox's name in the state directory.
const OutboxFile = "outbox.jsonl"

// config is the plugin's section of weir's configuration.
type config struct {
	// From is the sender address written on every message.
	From string `json:"from"`
}

// message is one line of the outbox.
type message struct {
	ID             string    `json:"id"`
	From           string    `json:"from"`
	To             string    `json:"to"`
	Subject        string    `json:"subject,omitempty"`
	Body           string    `json:"body"`
	RunID          string    `json:"run_id,omitempty"`
	Node           string    `json:"node,omitempty"`
	Attempt        int       `json:"attempt"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	SentAt         time.Time `json:"sent_at"`
}

var outboxMu sync.Mutex

// configSchema is the plugin's config section, declared in its manifest
// so that weir refuses a key this plugin does not read with its file:line.
const configSchema = `{"type":"object","additionalProperties":false,"properties":{"from":{"type":"string"}}}`

func main() {
	sdk.ServeWith(sdk.Options{Name: "mail", ConfigSchema: configSchema,
		Tools: func(json.RawMessage) ([]sdk.Tool, error) { return []sdk.Tool{sendTool}, nil }})
}

// sendTool is mail.send.
var sendTool = sdk.Tool{
	Name:        "mail.send",
	Description: "Send a mail. At most once per logical call, with a reconcile probe. Appends the message to outbox.jsonl in the plugin's state directory.",
	Effect:      sdk.EffectAtMostOnce,
	InputSchema: `{"type":"object","required":["to","body"],"additionalProperties":false,"properties":{
			"to":{"type":"string","minLength":3,"pattern":"^[^@\\s]+@[^@\\s]+$"},
			"subject":{"type":"string","maxLength":998},
			"body":{"type":"string"}}}`,
	OutputSchema: `{"type":"object","properties":{"id":{"type":"string"},"sent_at":{"type":"string"}}}`,
	Run:          send,
	Reconcile:    reconcile,
}

// reconcile is mail.send's probe: the outbox is the record of what was
// sent, by key. A line is written and synced before send answers, so a key
// absent from the outbox was never sent and never will be by that call.
func reconcile(ctx context.Context, call *sdk.Call) (sdk.ReconcileAnswer, error) {
	if call.StateDir == "" {
		return sdk.ReconcileAnswer{}, errors.New("mail.send's probe needs the state directory of its outbox")
	}
	m, err := findSent(ctx, filepath.Join(call.StateDir, OutboxFile), call.IdempotencyKey)
	switch {
	case err != nil:
		return sdk.ReconcileAnswer{}, err
	case m == nil:
		return sdk.ReconcileAnswer{Outcome: sdk.ReconcileNotHappened}, nil
	}
	return sdk.ReconcileAnswer{Outcome: sdk.ReconcileHappened, Output: map[string]any{"id": m.ID, "sent_at": m.SentAt}}, nil
}

// findSent returns the outbox's message sent with key, nil if none. A line
// cut short by a crash while it was written (the last one) was never
// synced, so never answered: it is skipped, not an error.
func findSent(ctx context.Context, path, key string) (*message, error) {
	outboxMu.Lock()
	defer outboxMu.Unlock()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for n := 0; sc.Scan(); n++ {
		if n%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var m message
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.IdempotencyKey == key {
			return &m, nil
		}
	}
	return nil, sc.Err()
}

func send(ctx context.Context, call *sdk.Call) (any, error) {
	var in struct {
		To      string `json:"to"`
		Subject string `json:"subject"`
		Body    string `json:"body"`
	}
	if err := call.Decode(&in); err != nil {
		return nil, err
	}
	cfg := config{From: "weir@localhost"}
	if err := call.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	if call.StateDir == "" {
		return nil, errors.New("mail.send needs a state directory for its outbox")
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	m := message{
		ID:             hex.EncodeToString(id[:]),
		From:           cfg.From,
		To:             in.To,
		Subject:        in.Subject,
		Body:           in.Body,
		RunID:          call.RunID,
		Node:           call.Node,
		Attempt:        call.Attempt,
		IdempotencyKey: call.IdempotencyKey,
		SentAt:         time.Now().UTC(),
	}
	line, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := appendLine(filepath.Join(call.StateDir, OutboxFile), line); err != nil {
		// Nothing was sent; the runtime decides what to do with a
		// non-idempotent failure.
		return nil, err
	}
	return map[string]any{"id": m.ID, "sent_at": m.SentAt}, nil
}

// appendLine appends line and a newline to path and syncs it: once send
// returns, the message is on disk.
func appendLine(path string, line []byte) error {
	outboxMu.Lock()
	defer outboxMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
