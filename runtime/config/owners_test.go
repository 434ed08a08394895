package config

import (
	"encoding/json"
	"os/user"
	"reflect"
	"strings"
	"testing"

	"github.com/weirhq/weir/runtime/engine"
)

// Every field of engine.OwnerShare is one OwnerAttr, and every OwnerAttr
// one field: a quota added to the engine without a way to set it fails.
func TestOwnerAttrsCoverOwnerShare(t *testing.T) {
	t.Parallel()
	var s engine.OwnerShare
	set := map[string]string{}
	for _, a := range OwnerAttrs {
		name := fieldName(reflect.ValueOf(&s).Elem(), reflect.ValueOf(a.field(&s)).Pointer())
		if name == "" {
			t.Errorf("owner attribute %s points at no field of engine.OwnerShare", a.HCL)
		} else if prev, dup := set[name]; dup {
			t.Errorf("owner attributes %s and %s both set OwnerShare.%s", prev, a.HCL, name)
		}
		set[name] = a.HCL
	}
	typ := reflect.TypeOf(s)
	for i := 0; i < typ.NumField(); i++ {
		if set[typ.Field(i).Name] == "" {
			t.Errorf("engine.OwnerShare.%s is set by no owner attribute (OwnerAttrs)", typ.Field(i).Name)
		}
	}
}

const ownersSrc = `engine {
  max_queued = 500
}
default_owner {
  weight     = 1
  max_queued = 50
}
owner "alice" {
  weight          = 2
  max_running     = 100
  max_queued      = 400
  budget_per_hour = 50000
  storage         = "1GiB"
}
owner "0" {
  weight = 3
}
`

// Owner blocks reach the engine's config and the view, and a reload
// takes them (they are not among the restart changes).
func TestOwnerBlocksReachTheEngine(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(ownersSrc), "c.hcl")
	if err != nil {
		t.Fatal(err)
	}
	ec := c.EngineConfig(1)
	want := engine.OwnerShare{Weight: 2, MaxRunning: 100, MaxQueued: 400, BudgetPerHour: 50000, StorageBytes: 1 << 30}
	if got := ec.ShareOf("alice"); got != want {
		t.Errorf("alice's share %+v, want %+v", got, want)
	}
	if got := ec.ShareOf("0").Weight; got != 3 {
		t.Errorf("uid 0's weight %d, want 3", got)
	}
	if got := ec.ShareOf("someone"); got != (engine.OwnerShare{Weight: 1, MaxQueued: 50}) {
		t.Errorf("an owner without a block gets %+v, want the default_owner block's", got)
	}
	var view map[string]any
	if err := json.Unmarshal(mustJSON(t, c), &view); err != nil {
		t.Fatal(err)
	}
	alice, _ := lookup(view, "owners.alice")
	if m, _ := alice.(map[string]any); m["storage"] != "1GiB" || m["weight"] != 2.0 || m["budget_per_hour"] != 50000.0 {
		t.Errorf("the view shows alice as %v", alice)
	}
	if d, _ := lookup(view, "default_owner.max_queued"); d != 50.0 {
		t.Errorf("the view's default_owner.max_queued = %v", d)
	}
	if ch := RestartChanges(Default(), c); len(ch) != 0 {
		t.Errorf("owner blocks need a restart: %v", ch)
	}
	if c.Hash() == Default().Hash() {
		t.Error("owner blocks do not change the config's hash: a reload would not see them")
	}
}

// Bad owner blocks are refused with file:line, every problem at once.
func TestOwnerRefusals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"zero weight", "owner \"alice\" {\n  weight = 0\n}\n", []string{"c.hcl:2", `owner "alice": weight must be at least 1, got 0`}},
		{"negative weight", "default_owner {\n  weight = -2\n}\n", []string{"c.hcl:2", "default_owner weight must be at least 1, got -2"}},
		{"negative quota", "owner \"alice\" {\n\n  max_running = -1\n}\n", []string{"c.hcl:3", `owner "alice": max_running must be at least 0, got -1`}},
		{"negative budget", "owner \"alice\" {\n  budget_per_hour = -5\n}\n", []string{"c.hcl:2", "budget_per_hour must be at least 0"}},
		{"bad size", "owner \"alice\" {\n  storage = \"lots\"\n}\n", []string{"c.hcl:2", `owner "alice": storage: "lots" is not a size`}},
		{"bad unit", "owner \"alice\" {\n  storage = \"1 parsec\"\n}\n", []string{"c.hcl:2", "unknown unit"}},
		{"unknown attribute", "owner \"alice\" {\n  max_queue = 1\n}\n", []string{"c.hcl:2", `"max_queue" is not expected`}},
		{"two blocks", "owner \"alice\" {\n}\nowner \"alice\" {\n}\n", []string{"c.hcl:3", `owner "alice" has two blocks (the other at c.hcl:1)`}},
		{"bad name", "owner \"al ice\" {\n}\n", []string{"c.hcl:1", `owner "al ice": an owner is`}},
		{"two defaults", "default_owner {\n}\ndefault_owner {\n}\n", []string{"c.hcl:3", "default_owner"}},
		{"several at once", "owner \"a\" {\n  weight = 0\n}\nowner \"b\" {\n  storage = \"x\"\n}\n", []string{"c.hcl:2", "c.hcl:5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.src), "c.hcl")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// What the file allows but cannot do what it says is a warning with
// file:line: a max_queued above the daemon's, an owner nobody is.
func TestOwnerWarnings(t *testing.T) {
	t.Parallel()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	src := "engine {\n  max_queued = 100\n}\nowner \"alice\" {\n  max_queued = 200\n}\nowner \"" + me.Username + "\" {\n}\nowner \"1000\" {\n}\n"
	c, err := Parse([]byte(src), "c.hcl")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(c.Warnings, "\n")
	for _, w := range []string{"c.hcl:5: owner \"alice\": max_queued 200 is above engine.max_queued 100", "c.hcl:4: owner \"alice\" is no token's owner and no user of this system"} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings %q lack %q", all, w)
		}
	}
	if len(c.Warnings) != 2 {
		t.Errorf("%d warnings, want 2 (a user of this system and a uid are known owners): %q", len(c.Warnings), c.Warnings)
	}
	// A token's owner is known.
	secret := strings.Repeat("s", MinTokenLength)
	c, err = Parse([]byte("tcp {\n  token \"alice\" {\n    secret = \""+secret+"\"\n  }\n}\nowner \"alice\" {\n}\n"), "c.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(c.Warnings, "\n"), "no token's owner") {
		t.Errorf("a token's owner warned as unknown: %q", c.Warnings)
	}
}

const ownerDocBegin, ownerDocEnd = "<!-- owner-attrs:begin -->\n", "<!-- owner-attrs:end -->"

// docs/operators.md's table of owner block attributes is ownerTable's;
// -update rewrites it.
func TestDocOwnerAttrs(t *testing.T) {
	checkDocTable(t, ownerDocBegin, ownerDocEnd, ownerTable(), "owner attribute table", "TestDocOwnerAttrs")
}
