package requestid

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"":                                     "",
		"order-4711":                           "",
		"é-" + strings.Repeat("r", MaxBytes-3): "",
		strings.Repeat("r", MaxBytes+1):        "at most 256 bytes",
		"order-\xff":                           "not valid UTF-8",
		"order-\ufffd":                         "U+FFFD at byte 6",
		"a\tb":                                 "control character U+0009",
		"schedule:x":                           `starts with "schedule:"`,
		"redrive:":                             `starts with "redrive:"`,
		"Schedule:x":                           "", // prefixes are exact
		"x-schedule:":                          "",
	} {
		err := Check(id)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("Check(%q) = %v, want %q", id, err, want)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	for lit, want := range map[string]string{
		`"order"`:              "",
		`"a\"b\\c\/"`:          "",
		`"\u00e9\ud83d\ude00"`: "",
		`"\uD83D\uDE00"`:       "",
		"\"order-\xff\"":       "byte 0xff at 7",
		"\"\xe2\x82\"":         "not valid UTF-8",
		`"\ud800"`:             `\ud800`,
		`"\ud800\u0041"`:       `\ud800`,
		`"\ud800\\udc00"`:      `\ud800`, // an escaped backslash, then text
		`"x\udfff"`:            `\udfff`,
		`"\\ud800"`:            "", // an escaped backslash and text
	} {
		err := CheckJSON([]byte(lit))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckJSON(%s) = %v, want %q", lit, err, want)
		}
	}
}

// Whatever a JSON decoder accepts, CheckJSON and Check together refuse
// every literal that decodes with a U+FFFD the literal did not spell:
// no two different ids that pass decode to one.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`"a"`, "\"\xff\"", `"\ud800"`, `"\ud83d\ude00"`, `"\\u"`, `"\ufffd"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		var s string
		if json.Unmarshal(lit, &s) != nil || len(lit) == 0 || lit[0] != '"' {
			return
		}
		if CheckJSON(lit) != nil || Check(s) != nil {
			return
		}
		if strings.ContainsRune(s, utf8.RuneError) {
			t.Fatalf("%q passed and decodes to %q", lit, s)
		}
		back, _ := json.Marshal(s)
		var again string
		if json.Unmarshal(back, &again) != nil || again != s {
			t.Fatalf("%q does not round-trip: %q", lit, again)
		}
	})
}

func TestDeriveIsStableAndBounded(t *testing.T) {
	t.Parallel()
	a := Derive("fork:", "run-1", "b@1", "0")
	if a != "fork:run-1:b@1:0" || a != Derive("fork:", "run-1", "b@1", "0") {
		t.Fatalf("Derive = %q", a)
	}
	long := strings.Repeat("x", MaxBytes)
	l1, l2 := Derive("redrive:", long, "1"), Derive("redrive:", long, "2")
	if len(l1) > MaxBytes || !strings.HasPrefix(l1, "redrive:sha256:") || l1 == l2 {
		t.Fatalf("long ids: %q %q", l1, l2)
	}
	// A derived id is one a user may not send.
	if Check(a) == nil || Check(l1) == nil {
		t.Fatal("a derived id passed the user check")
	}
}
