package storeurl

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"postgres://weir@db:5432/weir":                 "",
		"postgresql://weir:pw@db/weir?sslmode=require": "",
		"postgres:///weir?host=/var/run/postgresql":    "",
		"mysql://weir:s3cret@db/weir":                  `scheme is "mysql"`,
		"postgres:///weir":                             "names no host",
		"postgres://weir:s3cret@db:port/weir":          "not a URL",
	} {
		err := Check(raw)
		switch {
		case want == "" && err != nil:
			t.Errorf("Check(%s): %v", Redact(raw), err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("Check(%s): %v, want an error saying %q", Redact(raw), err, want)
		case err != nil && strings.Contains(err.Error(), "s3cret"):
			t.Errorf("Check's error quotes the password: %v", err)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"":                               "",
		"postgres://weir@db/weir":        "postgres://weir@db/weir",
		"postgres://weir:s3cret@db/weir": "postgres://weir:xxxxx@db/weir",
		"postgres://weir@db/weir?password=s3cret&sslmode=disable": "postgres://weir@db/weir?password=xxxxx&sslmode=disable",
		"postgres://weir:s3cret@db:port/weir":                     "(a store URL that does not parse)",
	} {
		if got := Redact(raw); got != want {
			t.Errorf("Redact(%q) = %q, want %q", raw, got, want)
		}
	}
}
