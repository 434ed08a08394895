// Package requestid holds the rules for a client's request id, the
// business id that makes a start idempotent: the engine keys dedup records
// on (owner, request id), so two ids that a decoder makes equal are one
// request, and the second start's work is silently never done.
//
// Decoders do make different ids equal: encoding/json turns every invalid
// UTF-8 byte and every lone surrogate escape (\ud800) into U+FFFD, so
// "order-\xff" and "order-\xfe" arrive as the same string. The API checks
// the raw JSON literal with CheckJSON before decoding can hide this; Check
// refuses U+FFFD itself, which covers every transport that decoded before
// the engine saw the id (MCP, a client's json.Marshal).
package requestid

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxBytes bounds a request id, which becomes part of a store key.
const MaxBytes = 256

// ReservedPrefixes start the ids of runs the daemon starts itself
// (DESIGN §12: schedules, events, forks, redrives); a user's id may not
// start with one, so that no user can take or pre-empt such a run's dedup
// record.
var ReservedPrefixes = []string{"schedule:", "event:", "fork:", "redrive:"}

// Check refuses an id a user may not send: longer than MaxBytes, not
// UTF-8, holding a control character or U+FFFD, or starting with a
// reserved prefix. "" (no dedup) passes. The error's text is for the
// user and quotes only a short prefix of id.
func Check(id string) error {
	if len(id) > MaxBytes {
		return fmt.Errorf("request id of %d bytes: at most %d bytes are allowed", len(id), MaxBytes)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("request id is not valid UTF-8")
	}
	for i, r := range id {
		switch {
		case r == utf8.RuneError:
			return fmt.Errorf("request id holds U+FFFD at byte %d, what invalid UTF-8 and lone surrogates decode to: two different ids would be one", i)
		case !unicode.IsPrint(r):
			return fmt.Errorf("request id holds the control character %U at byte %d: only printable UTF-8 is allowed", r, i)
		}
	}
	for _, p := range ReservedPrefixes {
		if strings.HasPrefix(id, p) {
			return fmt.Errorf("request id %q starts with %q, which is reserved for runs the daemon starts itself (reserved: %s)",
				id[:min(len(id), 64)], p, strings.Join(ReservedPrefixes, " "))
		}
	}
	return nil
}

// CheckJSON refuses the raw JSON string literal lit (quotes included) if
// it holds an invalid UTF-8 byte or an escape of a lone surrogate, the two
// things a JSON decoder silently turns into U+FFFD. lit is a literal the
// decoder accepted; anything else in it is left to Check on the decoded
// id.
func CheckJSON(lit []byte) error {
	s := string(lit)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return fmt.Errorf("request id is not valid UTF-8 (byte %#x at %d of the JSON string)", s[i], i)
		}
		if r != '\\' {
			i += n
			continue
		}
		if i+1 < len(s) && s[i+1] != 'u' {
			i += 2
			continue
		}
		u, ok := hex4(s, i+2)
		switch {
		case !ok:
			i += 2
		case 0xD800 <= u && u < 0xDC00:
			lo, okLo := rune(0), false
			if i+7 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				lo, okLo = hex4(s, i+8)
			}
			if !okLo || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("request id holds the lone surrogate escape %s: it is no character", s[i:i+6])
			}
			i += 12
		case 0xDC00 <= u && u <= 0xDFFF:
			return fmt.Errorf("request id holds the lone surrogate escape %s: it is no character", s[i:i+6])
		default:
			i += 6
		}
	}
	return nil
}

// hex4 reads the four hex digits at s[i:i+4].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | (c - '0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | (c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Derive is the request id of a run the daemon starts itself (DESIGN §12):
// prefix (one of ReservedPrefixes) and the parts that identify what started
// it, joined by ':' ("fork:RUN:NODE@VISIT:N"). The same parts give the same
// id, so a restart, a fleet peer or a client's retry starts the run once.
// An id that would pass MaxBytes keeps its prefix and ends with the hex
// SHA-256 of the whole, so it stays unique and within bounds.
func Derive(prefix string, parts ...string) string {
	id := prefix + strings.Join(parts, ":")
	if len(id) <= MaxBytes {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return prefix + "sha256:" + hex.EncodeToString(sum[:])
}
