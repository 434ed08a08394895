package badgerstore

import (
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// badgerLogger adapts hclog to badger.Logger. Badger logs routine work
// (table opens, compactions, flushes) at info, so its info goes to Debug
// and its debug to Trace; formatting is skipped when the level is off.
type badgerLogger struct{ l hclog.Logger }

func (b badgerLogger) Errorf(f string, args ...any) {
	if b.l.IsError() {
		b.l.Error(msg(f, args))
	}
}

func (b badgerLogger) Warningf(f string, args ...any) {
	if b.l.IsWarn() {
		b.l.Warn(msg(f, args))
	}
}

func (b badgerLogger) Infof(f string, args ...any) {
	if b.l.IsDebug() {
		b.l.Debug(msg(f, args))
	}
}

func (b badgerLogger) Debugf(f string, args ...any) {
	if b.l.IsTrace() {
		b.l.Trace(msg(f, args))
	}
}

func msg(f string, args []any) string {
	return strings.TrimSpace(fmt.Sprintf(f, args...))
}
