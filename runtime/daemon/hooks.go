package daemon

import (
	"context"
	"errors"
	"os"

	"github.com/weirhq/weir/runtime/api"
	"github.com/weirhq/weir/runtime/engine"
	"github.com/weirhq/weir/runtime/internal/hooks"
)

// newHooks is the handler of the config's hook blocks: each delivery
// whose signature holds becomes an event of its hook's owner, sent as
// POST /v1/events would send it.
func (d *Daemon) newHooks(hs []hooks.Hook) (*hooks.Handler, error) {
	return hooks.NewHandler(d.acceptHookEvent, hs, hooks.Options{Logger: d.log.Named("hooks")})
}

func (d *Daemon) acceptHookEvent(ctx context.Context, owner string, ev hooks.Event) (bool, error) {
	if owner == "" {
		// A hook that names no owner: the daemon's own OS user, the
		// owner its socket gives the one who runs it.
		owner = api.OwnerOfUID(os.Getuid())
	}
	res, err := d.Engine.Ops().EventSend(ctx, engine.EventSendParams{Owner: owner, ID: ev.ID, Name: ev.Name, Key: ev.Key, Payload: ev.Payload})
	var e *engine.Error
	if errors.As(err, &e) {
		return false, hookRefusal{e: e}
	}
	if err != nil {
		return false, err
	}
	return res.Duplicate, nil
}

// hookRefusal is an engine refusal of a delivery's event, answered with
// the status the API gives it.
type hookRefusal struct{ e *engine.Error }

func (r hookRefusal) Error() string { return r.e.Error() }

func (r hookRefusal) HTTPStatus() int {
	status, _ := api.ErrorStatus(r.e)
	return status
}

func (r hookRefusal) Unwrap() error { return r.e }
