package config

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/engine"
)

// notKnobs are the fields of Config that are not knobs, each with why.
var notKnobs = map[string]string{
	"File":       "where the config was read from, not a setting",
	"Socket.GID": "resolved from socket.group as the file is read",
	"TCP":        "a listener block with tokens and tls blocks of its own (load.go's tcp)",
	"Console":    "a listener block of its own (load.go's console)",
	"Plugins":    "each plugin's section, the plugin's own settings",
	"PluginHost": "the host's keys of each plugin block (env, memory_max)",
	"Warnings":   "what the file allows but an operator should fix",
	// Owner blocks are many per file, keyed by a label: OwnerAttrs is
	// their list (TestOwnerAttrsCoverOwnerShare).
	"Owners":       "owner blocks, each attribute an OwnerAttr",
	"DefaultOwner": "the default_owner block, each attribute an OwnerAttr",
	"Hooks":        "hook blocks, many per file and keyed by a label (hooks.go)",
}

// notEngineKnobs are the fields of engine.Config no knob sets, each with why.
var notEngineKnobs = map[string]string{
	"Store":          "the daemon's part, opened from store.url",
	"Tools":          "the daemon's part, the plugin host",
	"Logger":         "the daemon's part, its log",
	"Clock":          "the wall clock in a daemon; tests stub it",
	"Scripts":        "the daemon's part, the sandbox (whose knobs are sandbox.*)",
	"DiskFree":       "the daemon's reading of its store's disk",
	"ConfigVersion":  "assigned by the store to each config content (Assign)",
	"Tick":           "the scheduler's timer: wake-ups never wait for it, so an operator has no reason to turn it",
	"FlowCacheBytes": "bounded by script.DefaultCacheBytes; no operator has needed it yet",
	"Owners":         "set from the owner blocks (OwnerAttrs; TestOwnerBlocksReachTheEngine)",
	"DefaultOwner":   "set from the default_owner block (OwnerAttrs; TestOwnerBlocksReachTheEngine)",
	"HostID":         "the daemon's part, kept in its data directory (DATA/host-id)",
	"Traces":         "the daemon's part, the exporter built from the telemetry block (telemetry.*)",
}

// knobExamples is a value of each knob other than its default, as the
// file writes it, and what else its block needs.
var knobExamples = map[string]struct{ value, extra string }{
	"log_level":                {value: `"debug"`},
	"log_format":               {value: `"json"`},
	"memory_limit":             {value: `"1GiB"`},
	"sandbox.workers":          {value: `3`},
	"sandbox.spare_workers":    {value: `2`},
	"sandbox.memory":           {value: `"256MiB"`},
	"sandbox.timeout":          {value: `"20s"`},
	"engine.workers":           {value: `8`},
	"engine.spare_workers":     {value: `2`},
	"engine.max_queued":        {value: `500`},
	"engine.queue_timeout":     {value: `"2m"`},
	"engine.budget_in_flight":  {value: `1000`},
	"engine.run_budget":        {value: `50`},
	"engine.lease_timeout":     {value: `"20s"`},
	"engine.max_attempts":      {value: `3`},
	"engine.retry_base":        {value: `"200ms"`},
	"engine.retry_max":         {value: `"1m"`},
	"drain.grace":              {value: `"45s"`},
	"plugin_ping.interval":     {value: `"10s"`},
	"plugin_ping.timeout":      {value: `"4s"`},
	"socket.mode":              {value: `"0660"`},
	"socket.group":             {value: `"0"`},
	"metrics.address":          {value: `"127.0.0.1:9411"`},
	"retention.max_age":        {value: `"30d"`},
	"event_retention":          {value: `"48h"`},
	"store.url":                {value: `"postgres://weir@db/weir"`},
	"store.shared":             {value: `true`, extra: `url = "postgres://weir@db/weir"`},
	"disk.min_free":            {value: `"1GiB"`},
	"http.idle_timeout":        {value: `"90s"`},
	"http.max_conns":           {value: `256`},
	"http.max_conns_per_peer":  {value: `16`},
	"http.read_header_timeout": {value: `"5s"`},
	"http.read_timeout":        {value: `"30s"`},
	"http.write_timeout":       {value: `"45s"`},

	"http.max_conns_per_ip":       {value: `128`},
	"http.max_requests_per_owner": {value: `32`},
	"http.max_streams_per_owner":  {value: `8`},

	"telemetry.otlp_endpoint":   {value: `"https://collector.example:4318"`},
	"telemetry.protocol":        {value: `"grpc"`, extra: telemetryEndpoint},
	"telemetry.headers":         {value: `{ "X-Team" = "weir" }`, extra: telemetryEndpoint},
	"telemetry.insecure":        {value: `true`, extra: `otlp_endpoint = "collector.example:4317"`},
	"telemetry.sample":          {value: `0.25`, extra: telemetryEndpoint},
	"telemetry.service_name":    {value: `"weir-prod"`, extra: telemetryEndpoint},
	"telemetry.capture_content": {value: `true`, extra: telemetryEndpoint},
}

// telemetryEndpoint is what the telemetry block needs for its other
// knobs to be shown.
const telemetryEndpoint = `otlp_endpoint = "https://collector.example:4318"`

// parseExample parses a file setting k to its example.
func parseExample(t *testing.T, k *Knob) *Config {
	t.Helper()
	ex, ok := knobExamples[k.HCL]
	if !ok {
		t.Fatalf("knob %s has no example in knobExamples", k.HCL)
	}
	src := fmt.Sprintf("%s = %s\n", k.attr(), ex.value)
	if b := k.block(); b != "" {
		src = fmt.Sprintf("%s {\n  %s  %s}\n", b, ex.extra+"\n", src)
	}
	c, err := Parse([]byte(src), "k.hcl")
	if err != nil {
		t.Fatalf("%s:\n%s", src, err)
	}
	return c
}

// Every field of Config is a knob or says why it is not one, and every
// knob points at a field of its own.
func TestKnobsCoverConfig(t *testing.T) {
	t.Parallel()
	var c Config
	owner := map[string]string{}
	for _, k := range Knobs {
		name := fieldName(reflect.ValueOf(&c).Elem(), reflect.ValueOf(k.field(&c)).Pointer())
		if name == "" {
			t.Errorf("knob %s points at no field of Config", k.HCL)
		} else if prev, dup := owner[name]; dup {
			t.Errorf("knobs %s and %s both set Config.%s", prev, k.HCL, name)
		}
		owner[name] = k.HCL
	}
	var walk func(t reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name := prefix + f.Name
			switch {
			case !f.IsExported():
			case notKnobs[name] != "":
				if owner[name] != "" {
					t.Errorf("Config.%s is knob %s and also listed as not a knob", name, owner[name])
				}
			case f.Type.Kind() == reflect.Struct && owner[name] == "":
				walk(f.Type, name+".")
			case owner[name] == "":
				t.Errorf("Config.%s is neither a knob (Knobs) nor listed in notKnobs with a reason", name)
			}
		}
	}
	walk(reflect.TypeOf(c), "")
}

// Every field of engine.Config is set by a knob or says why not.
func TestKnobsCoverEngineConfig(t *testing.T) {
	t.Parallel()
	set := map[string]string{}
	for _, k := range Knobs {
		if f := k.EngineField(); f != "" {
			if prev, dup := set[f]; dup {
				t.Errorf("knobs %s and %s both set engine.Config.%s", prev, k.HCL, f)
			}
			set[f] = k.HCL
		} else if k.engine != nil {
			t.Errorf("knob %s points at no field of engine.Config", k.HCL)
		}
	}
	typ := reflect.TypeOf(engine.Config{})
	for i := 0; i < typ.NumField(); i++ {
		name := typ.Field(i).Name
		switch {
		case set[name] != "" && notEngineKnobs[name] != "":
			t.Errorf("engine.Config.%s is set by %s and also listed as set by none", name, set[name])
		case set[name] == "" && notEngineKnobs[name] == "":
			t.Errorf("engine.Config.%s is set by no knob and not listed in notEngineKnobs with a reason", name)
		}
	}
}

// lookup returns the value at a dotted path of a decoded JSON object.
func lookup(v map[string]any, path string) (any, bool) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := v[p].(map[string]any)
		if !ok {
			return nil, false
		}
		v = sub
	}
	x, ok := v[parts[len(parts)-1]]
	return x, ok
}

// Each knob's file key sets its field, its engine field and its place in
// the view, and nothing else; a reload applies it exactly when it says.
func TestEveryKnobFromFileToEngineAndView(t *testing.T) {
	t.Parallel()
	for key := range knobExamples {
		if KnobByHCL(key) == nil {
			t.Errorf("knobExamples has %s, which is no knob", key)
		}
	}
	for _, k := range Knobs {
		t.Run(k.HCL, func(t *testing.T) {
			t.Parallel()
			c := parseExample(t, k)
			def := Default()
			if reflect.DeepEqual(k.Get(c), k.Get(def)) {
				t.Fatalf("%s = %s leaves the default %v", k.HCL, knobExamples[k.HCL].value, k.Get(def))
			}
			k.Copy(def, c)
			if ex := knobExamples[k.HCL].extra; ex == "" {
				def.File, def.Socket.GID = c.File, c.Socket.GID
				if !reflect.DeepEqual(c, def) {
					t.Errorf("%s sets more than its field:\n%+v\nwant\n%+v", k.HCL, c, def)
				}
			}
			if f := k.EngineField(); f != "" {
				ec := c.EngineConfig(1)
				if got := reflect.ValueOf(ec).FieldByName(f).Interface(); got != k.Get(c) {
					t.Errorf("engine.Config.%s = %v, want %v", f, got, k.Get(c))
				}
			}
			var view map[string]any
			if err := json.Unmarshal(mustJSON(t, c), &view); err != nil {
				t.Fatal(err)
			}
			want, _ := k.view(c)
			wb, _ := json.Marshal(want)
			got, ok := lookup(view, k.JSON)
			gb, _ := json.Marshal(got)
			if !ok || string(gb) != string(wb) {
				t.Errorf("view %s = %s (present %t), want %s", k.JSON, gb, ok, wb)
			}
			if rc := RestartChanges(Default(), c); k.Reload != (len(rc) == 0) {
				t.Errorf("%s says reload=%t, but RestartChanges lists %q", k.HCL, k.Reload, rc)
			}
		})
	}
}

// The view shows knobs and the blocks of their own structure, nothing else.
func TestViewHoldsOnlyKnobs(t *testing.T) {
	t.Parallel()
	c, err := Load("testdata/full.hcl")
	if err != nil {
		t.Fatal(err)
	}
	c.Store = Store{URL: "postgres://weir@db/weir", Shared: true}
	paths := map[string]bool{}
	for _, k := range Knobs {
		paths[k.JSON] = true
	}
	structured := map[string]bool{"file": true, "tcp": true, "console": true, "plugins": true, "plugin_host": true, "owners": true, "default_owner": true, "hooks": true}
	var view map[string]any
	if err := json.Unmarshal(mustJSON(t, c), &view); err != nil {
		t.Fatal(err)
	}
	seen := 0
	var walk func(v map[string]any, prefix string)
	walk = func(v map[string]any, prefix string) {
		for key, x := range v {
			p := prefix + key
			switch sub, isObj := x.(map[string]any); {
			case prefix == "" && structured[key]:
			case paths[p]:
				seen++
			case isObj:
				walk(sub, p+".")
			default:
				t.Errorf("the view's %s is no knob's JSON path", p)
			}
		}
	}
	walk(view, "")
	if seen != len(Knobs) {
		t.Errorf("the view of a config setting every knob shows %d knobs, want %d", seen, len(Knobs))
	}
}

var update = flag.Bool("update", false, "rewrite docs/operators.md's configuration table")

const (
	docPath  = "../../docs/operators.md"
	docBegin = "<!-- knobs:begin -->\n"
	docEnd   = "<!-- knobs:end -->"
)

// docs/operators.md's configuration table is knobTable's; -update
// rewrites it.
func TestDocKnobs(t *testing.T) {
	checkDocTable(t, docBegin, docEnd, knobTable(), "configuration table", "TestDocKnobs")
}

// checkDocTable checks that docs/operators.md holds table between the
// markers begin and end, or with -update writes it there; what names the
// table and test the test that rewrites it.
func checkDocTable(t *testing.T, begin, end, table, what, test string) {
	t.Helper()
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q markers", docPath, begin, end)
	}
	want := doc[:i+len(begin)] + table + doc[j:]
	if want == doc {
		return
	}
	if *update {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's %s is stale: run go test ./runtime/config -run %s -update", docPath, what, test)
}
