// Package storeurl reads the store a daemon is pointed at: a --store
// flag, WEIR_STORE or a config file's store block. Empty means the
// embedded Badger store in the data directory; otherwise it is the URL of
// a PostgreSQL database. It is its own small package because the config
// checker, the command line and the PostgreSQL store all need to check
// such a URL and to write it for logs and output without its password.
package storeurl

import (
	"errors"
	"fmt"
	"net/url"
)

// Redacted stands for a password in a written URL.
const Redacted = "xxxxx"

// Check refuses a value that is not a postgres:// or postgresql:// URL
// naming a host or a socket directory. Its error never quotes the value:
// the value may hold a password.
func Check(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("the store is not a URL: write postgres://USER@HOST:PORT/DATABASE (leave it out for the embedded store in the data directory)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("the store URL's scheme is %q; only postgres:// (PostgreSQL) is supported (leave it out for the embedded store in the data directory)", u.Scheme)
	}
	if u.Host == "" && u.Query().Get("host") == "" {
		return errors.New("the store URL names no host: write postgres://USER@HOST:PORT/DATABASE")
	}
	return nil
}

// Redact returns raw with its password, in the user part or as a password
// parameter, replaced by Redacted. A value that does not parse as a URL
// is not shown at all.
func Redact(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "(a store URL that does not parse)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", Redacted)
		u.RawQuery = q.Encode()
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), Redacted)
	}
	return u.String()
}
