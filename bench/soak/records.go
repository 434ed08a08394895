package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/weirhq/weir/runtime/api/apitypes"
)

// records is what the plugins themselves wrote in their state directories:
// the witnesses of side effects, read after the daemon has stopped.
type records struct {
	// mails counts outbox lines per request id (from the body "soak ID"),
	// and mailRuns per run id (the plugin records the caller's run id).
	mails    map[string]int
	mailRuns map[string]int
	// notes holds every stored note's text by note key; applied counts,
	// per note key, the idempotency keys under which notes.put applied it
	// (one dedupe record each).
	notes   map[string]string
	applied map[string]int
	// once counts testkit.once's effects per call, by the value the call
	// carried (each ask-kind call carries its own).
	once map[string]int
	// onceKeys lists, by the value a testkit.once call carried, the
	// idempotency key of each of its effects.
	onceKeys map[string][]string
	// hostOf maps a fleet's lease holders to the slot of their daemon:
	// each slot is a host whose plugins keep state of their own.
	hostOf map[string]int
}

// hostsLeasing counts the hosts whose daemons leased node in a timeline
// (0 for a lone daemon's, whose holders are not mapped).
func (o *records) hostsLeasing(evs []apitypes.Event, node string) int {
	hosts := map[int]bool{}
	for _, e := range evs {
		if e.Type != "leased" || e.Node != node {
			continue
		}
		h, _ := e.Detail["holder"].(string)
		if slot, ok := o.hostOf[h]; ok {
			hosts[slot] = true
		}
	}
	return len(hosts)
}

// readRecords reads the plugin state under each data directory: a fleet's
// daemons each keep their own. A note applied on two hosts under one
// idempotency key has one dedupe record on each, named by the key: it
// counts once.
func readRecords(datas ...string) (*records, error) {
	o := &records{mails: map[string]int{}, mailRuns: map[string]int{}, notes: map[string]string{}, applied: map[string]int{}, once: map[string]int{}, onceKeys: map[string][]string{}}
	dedupes := map[string]bool{} // dedupe records seen, by file name
	for _, data := range datas {
		if err := o.read(filepath.Join(data, "plugin-state"), dedupes); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// read adds the records of one plugin-state directory to o.
func (o *records) read(state string, dedupes map[string]bool) error {
	if err := eachOnce(filepath.Join(state, "testkit", "once.jsonl"), func(e onceEffect, _ []byte) bool {
		o.once[fmt.Sprint(e.Value)]++
		o.onceKeys[fmt.Sprint(e.Value)] = append(o.onceKeys[fmt.Sprint(e.Value)], e.Key)
		return true
	}); err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(state, "mail", "outbox.jsonl"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m struct {
				Body  string `json:"body"`
				RunID string `json:"run_id"`
			}
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				return fmt.Errorf("outbox line %q: %w", sc.Text(), err)
			}
			o.mails[strings.TrimPrefix(m.Body, "soak ")]++
			o.mailRuns[m.RunID]++
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}

	if err := eachJSON(filepath.Join(state, "notes", "notes"), func(_ string, b []byte) error {
		var n struct{ Key, Text string }
		if err := json.Unmarshal(b, &n); err != nil {
			return err
		}
		o.notes[n.Key] = n.Text
		return nil
	}); err != nil {
		return err
	}
	return eachJSON(filepath.Join(state, "notes", "dedupe"), func(name string, b []byte) error {
		if dedupes[name] {
			return nil
		}
		dedupes[name] = true
		var r struct {
			Output json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		var out struct{ Key string }
		if err := json.Unmarshal(r.Output, &out); err != nil {
			return err
		}
		o.applied[out.Key]++
		return nil
	})
}

// onceEffect is a line of testkit.once's log: one effect, with the result
// the call answered.
type onceEffect struct {
	Value any    `json:"value"`
	Key   string `json:"key"`
}

// eachOnce calls fn with every complete line of the testkit.once log at
// path (none if there is no log) until fn returns false. The log may be
// read while the plugin appends to it: a last line without its newline is
// not complete yet.
func eachOnce(path string, fn func(e onceEffect, line []byte) bool) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	lines := bytes.Split(b, []byte("\n"))
	for _, line := range lines[:len(lines)-1] {
		var e onceEffect
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("%s: line %q: %w", path, line, err)
		}
		if !fn(e, line) {
			break
		}
	}
	return nil
}

// onceLogged finds the effect of the testkit.once call with idempotency
// key in the logs under the daemons' data directories: its result, and
// whether it happened.
func onceLogged(datas []string, key string) (json.RawMessage, bool, error) {
	var found json.RawMessage
	for _, data := range datas {
		if err := eachOnce(filepath.Join(data, "plugin-state", "testkit", "once.jsonl"), func(e onceEffect, line []byte) bool {
			if e.Key == key {
				found = append(json.RawMessage(nil), line...)
			}
			return found == nil
		}); err != nil || found != nil {
			return found, found != nil, err
		}
	}
	return nil, false, nil
}

// mailLogged is mail.send's answer to the call with key if a daemon's
// outbox holds its mail (the result its probe would give), or not
// happened when none does.
func mailLogged(datas []string, key string) (json.RawMessage, bool, error) {
	for _, data := range datas {
		f, err := os.Open(filepath.Join(data, "plugin-state", "mail", "outbox.jsonl"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m struct {
				ID     string          `json:"id"`
				SentAt json.RawMessage `json:"sent_at"`
				Key    string          `json:"idempotency_key"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Key == key {
				f.Close()
				return json.RawMessage(`{"id":"` + m.ID + `","sent_at":` + string(m.SentAt) + `}`), true, nil
			}
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, false, err
		}
	}
	return nil, false, nil
}

// eachJSON calls fn with the name and content of every *.json file in dir
// (none if dir does not exist), skipping temporary files.
func eachJSON(dir string, fn func(name string, b []byte) error) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if err := fn(e.Name(), b); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	return nil
}
