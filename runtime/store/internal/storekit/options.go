package storekit

import "github.com/hashicorp/go-hclog"

// Default sets *v to def unless it is positive: in every backend's
// Options the zero value (or a negative one) of a size, count or duration
// means its default.
func Default[T ~int | ~int32 | ~int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// DefaultLogger sets *l to a logger that discards everything unless one is
// given.
func DefaultLogger(l *hclog.Logger) {
	if *l == nil {
		*l = hclog.NewNullLogger()
	}
}
