package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/weirhq/weir/sdk"
	"github.com/weirhq/weir/sdk/dedupe"
)

// OnceLog is testkit.once's log of effects in the state directory: one
// JSON line per call that had its effect, so a test counts them.
const OnceLog = "once.jsonl"

var onceMu sync.Mutex

// onceInput is testkit.once's input; its probe is asked with the same.
type onceInput struct {
	// Value is echoed in the result.
	Value any `json:"value,omitempty"`
	// Crash exits the process after the effect is recorded and before
	// the answer: an outcome that is unknown to weir and known to the
	// probe.
	Crash bool `json:"crash,omitempty"`
	// Probe steers the probe's answer: "record" (the default) answers
	// from the record of effects, happened with the call's result or
	// not_happened; happened, not_happened and unknown answer that
	// whatever happened (happened without a result when there is no
	// record); fail answers an error, panic panics, hang ignores its
	// deadline.
	Probe string `json:"probe,omitempty"`
}

const onceSchema = `{"type":"object","additionalProperties":false,"properties":{
	"value":{},"crash":{"type":"boolean"},
	"probe":{"enum":["record","happened","not_happened","unknown","fail","panic","hang"]}}}`

// onceTool is at most once with a reconcile probe; testkit.exclusive is
// at most once without one.
var onceTool = sdk.Tool{
	Name: "testkit.once",
	Description: "At most once, with a reconcile probe: record the call's effect under its idempotency key (once.jsonl counts them) and answer value; " +
		"crash exits after the effect and before the answer. The probe answers from the record, or as probe says.",
	Effect:      sdk.EffectAtMostOnce,
	InputSchema: onceSchema,
	Run:         runOnce,
	Reconcile:   probeOnce,
}

// onceRecord is where the result of key's call is kept.
func onceRecord(stateDir, key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(stateDir, "once", hex.EncodeToString(sum[:])+".json")
}

func runOnce(ctx context.Context, call *sdk.Call) (any, error) {
	var in onceInput
	if err := call.Decode(&in); err != nil {
		return nil, err
	}
	if call.StateDir == "" || call.IdempotencyKey == "" {
		return nil, errors.New("testkit.once needs a state directory and an idempotency key")
	}
	out, err := json.Marshal(map[string]any{"value": in.Value, "key": call.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	onceMu.Lock()
	err = recordOnce(call, out)
	onceMu.Unlock()
	if err != nil {
		return nil, err
	}
	if in.Crash {
		os.Exit(3)
	}
	return json.RawMessage(out), nil
}

// recordOnce writes the effect: a line of the log — the effect itself,
// one write the process cannot be killed in the middle of — then the
// key's result, which a kill between the two leaves unwritten (the probe
// then reads the log).
func recordOnce(call *sdk.Call, out []byte) error {
	path := onceRecord(call.StateDir, call.IdempotencyKey)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(call.StateDir, OnceLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(append([]byte(nil), out...), '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return dedupe.WriteFileAtomic(path, out, 0o600)
}

func probeOnce(ctx context.Context, call *sdk.Call) (sdk.ReconcileAnswer, error) {
	var in onceInput
	if err := call.Decode(&in); err != nil {
		return sdk.ReconcileAnswer{}, err
	}
	recorded, err := os.ReadFile(onceRecord(call.StateDir, call.IdempotencyKey))
	if errors.Is(err, os.ErrNotExist) {
		// Killed after the effect and before its record: the log says.
		onceMu.Lock()
		recorded, err = loggedOnce(call.StateDir, call.IdempotencyKey)
		onceMu.Unlock()
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return sdk.ReconcileAnswer{}, err
	}
	happened := sdk.ReconcileAnswer{Outcome: sdk.ReconcileHappened}
	if err == nil {
		happened.Output = json.RawMessage(recorded)
	}
	switch in.Probe {
	case "", "record":
		if err == nil {
			return happened, nil
		}
		return sdk.ReconcileAnswer{Outcome: sdk.ReconcileNotHappened}, nil
	case "happened":
		return happened, nil
	case "not_happened":
		return sdk.ReconcileAnswer{Outcome: sdk.ReconcileNotHappened}, nil
	case "fail":
		return sdk.ReconcileAnswer{}, fmt.Errorf("the probe was told to fail")
	case "panic":
		panic("the probe was told to panic")
	case "hang":
		time.Sleep(time.Hour)
	}
	return sdk.ReconcileAnswer{Outcome: sdk.ReconcileUnknown}, nil
}

// loggedOnce is the result the log holds for key's effect, or
// os.ErrNotExist when the log holds none.
func loggedOnce(stateDir, key string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, OnceLog))
	if err != nil {
		return nil, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		var e struct {
			Key string `json:"key"`
		}
		if json.Unmarshal(line, &e) == nil && e.Key == key {
			return line, nil
		}
	}
	return nil, os.ErrNotExist
}
