package pgstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/weirhq/weir/runtime/store"
	"github.com/weirhq/weir/runtime/store/storeurl"
)

// Wake-ups across daemons (a shared store): a write that makes a task
// ready, records a cancel or ends a run, adds a NOTIFY to its transaction; every
// store on the schema LISTENs on one connection of its own and passes
// what it hears to its engine. NOTIFY is delivered at COMMIT and only
// then, so an announcement never runs ahead of the write it announces.
const (
	// wakeBuffer is how many announcements wait for the engine; past it
	// "ready" ones are dropped (one pending is as good as many) and a
	// cancel waits for the engine's lease renewal, its fallback.
	wakeBuffer = 256
	// listenRetry is the wait before the listener connects again after
	// losing its connection; it then announces "ready", since what was
	// said meanwhile was not heard.
	listenRetry = time.Second
)

// The channel and the payloads: "ready", or "cancel:" or "end:" and a
// run id.
const (
	wakeReady    = "ready"
	wakeCancel   = "cancel:"
	wakeFinished = "end:"
)

// wakeChannel is the notification channel. The server delivers it
// database-wide, so every payload starts with the schema's name and "/",
// and a store passes on only its own schema's.
const wakeChannel = "weir_wake"

var _ store.Waker = (*Store)(nil)

// Wakes returns the announcements of writes committed by any store on
// the schema, this one's included. It is nil for an unshared store,
// where one engine knows every write it makes.
func (s *Store) Wakes() <-chan store.Wake {
	if s.wakes == nil {
		return nil
	}
	return s.wakes
}

// listen holds a connection that LISTENs for the schema's wake-ups until
// the store closes, connecting again when it is lost. ready receives the
// first connection's outcome, so Open fails if it cannot listen at all.
func (s *Store) listen(ready chan<- error) {
	defer close(s.listenDone)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-s.quit; cancel() }()
	defer cancel()
	first := true
	for {
		conn, err := s.listenConn(ctx)
		if first {
			ready <- err
			first = false
			if err != nil {
				return
			}
		} else if err == nil {
			s.announce(store.Wake{}) // what was said while away is lost
		}
		if err == nil {
			err = s.receive(ctx, conn)
			conn.Close(context.Background())
		}
		if ctx.Err() != nil {
			return
		}
		s.opts.Logger.Warn("listening for wake-ups from other daemons, connecting again", "error", err, "in", listenRetry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(listenRetry):
		}
	}
}

// listenConn connects and LISTENs on the schema's channel.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: listening on %s: %w", storeurl.Redact(s.rawURL), err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{wakeChannel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("pgstore: LISTEN: %w", err)
	}
	return conn, nil
}

// receive passes notifications on until the connection fails or the
// store closes. Only this schema's are passed: the server delivers a
// channel's notifications database-wide, so the payload is prefixed with
// the schema (see queueWakes).
func (s *Store) receive(ctx context.Context, conn *pgx.Conn) error {
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return err
	}
	prefix := schema + "/"
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		p, ok := strings.CutPrefix(n.Payload, prefix)
		if !ok {
			continue
		}
		if id, ok := strings.CutPrefix(p, wakeCancel); ok {
			s.announce(store.Wake{CancelRunID: id})
		} else if id, ok := strings.CutPrefix(p, wakeFinished); ok {
			s.announce(store.Wake{FinishedRunID: id})
		} else {
			s.announce(store.Wake{})
		}
	}
}

// announce passes a wake-up on without ever blocking the listener.
func (s *Store) announce(w store.Wake) {
	select {
	case s.wakes <- w:
	default:
	}
}
