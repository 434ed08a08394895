package badgerstore

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/weirhq/weir/runtime/store"
)

// Key layout. Every record kind has its own prefix; every prefix ends in '/'
// so no prefix is a prefix of another. Variable parts of composite keys are
// separated by sep (0x00), which is why ids must not contain it. Times in
// keys use timeKey, whose byte order is time order.
//
//	fv/<name>\0<hash>              FlowVersion
//	fl/<name>                      latest version of a flow: seq(8) hash
//	s/<hash>                       Source
//	r/<id>                         Run
//	ro/<owner>\0<id>               index: runs by owner
//	rph/<phase>\0<id>              index: runs by phase
//	rp/<parent>\0<id>              index: runs by parent run
//	rc/<owner>\0<^created(12)><id>  index: an owner's runs, newest first (layout 2)
//	rpk/<flow>\0<version>\0<position>\0<id>  index: parked runs (PhaseWaiting) (layout 5)
//	c/<run>                        continuation bytes
//	d/<owner>\0<request>           Dedup
//	t/<id>                         Task
//	tq/<readyAt(12)><id>           index: unleased tasks by ready time (the queue)
//	tqo/<owner>\0<readyAt(12)><id> index: unleased tasks by owner, then ready time (layout 3)
//	tr/<run>\0<id>                 index: tasks by run
//	tc/<child>\0<id>               index: tasks by the child run they wait on
//	l/<task>                       Lease
//	le/<deadline(12)><task>        index: leases by deadline
//	i/<key>                        Idem
//	dl/<at(12)><task>              DeadLetter, oldest first
//	dlt/<task>                     at(12) of a task's dead letter, to replace it
//	dlo/<owner>\0<at(12)><task>    index: dead letters by owner
//	ev/<run>\0<seq(8)>             Event
//	at/<run>\0<node>\0<visit(8)><turn(8)>  AgentTurn (agent.go)
//	m/<key>                        Meta (the caller's)
//	svl/<name>                     ServiceLease
//	sch/<owner>\0<name>            Schedule
//	schd/<next(12)><owner>\0<name> index: schedules not paused, by next tick
//	oe/<owner>\0<id>               OwnerEvent (event.go)
//	oeq/<owner>\0<seq(8)><id>      index: an owner's events in Seq order
//	oea/<accepted(12)><owner>\0<id> index: events by acceptance, oldest first
//	oep/<owner>\0<seq(8)><id>      index: events whose triggers' runs are pending
//	es/<owner>\0<name>\0<key>      EventSlot
//	tg/<owner>\0<name>             Trigger
//	tge/<owner>\0<event>\0<name>   index: triggers by event
//	x/...                          the store's own bookkeeping (counters, the layout version)
const (
	pFlowVersion = "fv/"
	pFlowLatest  = "fl/"
	pSource      = "s/"
	pRun         = "r/"
	pRunOwner    = "ro/"
	pRunPhase    = "rph/"
	pRunParent   = "rp/"
	pRunCreated  = "rc/"
	pRunOwnerPh  = "rop/"
	pRunParked   = "rpk/"
	pCont        = "c/"
	pDedup       = "d/"
	pTask        = "t/"
	pTaskQueue   = "tq/"
	pTaskOwner   = "tqo/"
	pTaskRun     = "tr/"
	pTaskChild   = "tc/"
	pLease       = "l/"
	pLeaseExp    = "le/"
	pIdem        = "i/"
	pDead        = "dl/"
	pDeadTask    = "dlt/"
	pDeadOwner   = "dlo/"
	pEvent       = "ev/"
	pMeta        = "m/"
	pService     = "svl/"
	pSchedule    = "sch/"
	pScheduleDue = "schd/"
	pOwnerSpend  = "osp/"

	pOwnerEvent        = "oe/"
	pOwnerEventSeq     = "oeq/"
	pOwnerEventAt      = "oea/"
	pOwnerEventPending = "oep/"
	pEventSlot         = "es/"
	pTrigger           = "tg/"
	pTriggerEvent      = "tge/"

	kEventSeq    = "x/event-seq"
	kLayout      = "x/layout"
	kTasksQueued = "x/tasks-queued"
	kTasksLeased = "x/tasks-leased"
	// Per owner, the owner's id follows: its last event Seq and its
	// count of stored events.
	kOwnerEventSeq   = "x/owner-event-seq/"
	kOwnerEventCount = "x/owner-event-count/"
)

const sep = "\x00"

// timeKeyLen is the length of timeKey's encoding.
const timeKeyLen = 12

// The ids every backend refuses alike (package store).
var (
	errBadID = store.ErrBadID
	checkID  = store.CheckID
	checkRun = store.CheckRun
)

func key(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// timeKey encodes t so that byte order is time order for every time.Time,
// including the zero time: seconds since 1970 with the sign bit flipped,
// then nanoseconds, both big-endian. (UnixNano cannot represent the zero
// time.)
func timeKey(t time.Time) string {
	var b [timeKeyLen]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.Unix())^(1<<63))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
	return string(b[:])
}

func u64Key(v uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return string(b[:])
}

// prefixEnd returns the smallest key greater than every key that has
// prefix p, or nil when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// layoutV1 is the version of the key layout above: the prefixes, the index
// entries and the values without a version byte of their own (the dlt/
// pointers). A release that changes the layout writes its version under
// kLayout (absent is version 1, what every release so far wrote), and a
// weir that knows only older layouts refuses to open the directory
// (ErrLayoutNewer), as pgstore refuses a newer schema.
const layoutV1 = 1

// layoutV2 adds the rc/ index (runs by owner, newest first). Opening a
// version 1 directory writes the index for the runs it holds, then the
// version, in one transaction per batch of runs (backfillCreated).
const layoutV2 = 2

// layoutV3 adds the tqo/ index (unleased tasks by owner, then ready
// time). Opening an older directory writes the entry of every unleased
// task, under its run's owner (upgradeLayout).
const layoutV3 = 3

// layoutV4 adds the rop/ index (runs by owner, then phase), which the
// owners' quotas count at the door. Opening an older directory writes the
// entry of every run (upgradeLayout).
const layoutV4 = 4

// layoutV5 adds the rpk/ index (parked runs by flow, version and
// position), which registration reads to report on the parked runs of
// older versions. Opening an older directory writes the entry of every
// run in PhaseWaiting (upgradeLayout).
const layoutV5 = 5

// layoutNow is the layout this weir writes.
const layoutNow = layoutV5

// newestKey encodes t so that byte order is newest first: timeKey with
// every bit flipped.
func newestKey(t time.Time) string {
	b := []byte(timeKey(t))
	for i := range b {
		b[i] = ^b[i]
	}
	return string(b)
}

// ErrLayoutNewer: the data directory was written by a weir whose key
// layout is newer than this one's.
var ErrLayoutNewer = errors.New("badgerstore: the data directory's layout is newer than this weir")

// Values start with an encoding version byte so later formats can change
// without rewriting the store. A value with a version this weir does not
// know (written by a newer release) is refused, naming the record and both
// versions, never decoded by guess.
const encV1 byte = 1

var errBadValue = errors.New("badgerstore: value has an unknown encoding version")

// versionError says which record has which version b starts with.
func versionError(what string, b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: %s record is empty (this weir reads version %d)", errBadValue, what, encV1)
	}
	return fmt.Errorf("%w: %s record has format version %d, this weir reads version %d (was the data directory written by a newer weir?)",
		errBadValue, what, b[0], encV1)
}

// recordName names the record type v points to, for versionError.
func recordName(v any) string {
	n := fmt.Sprintf("%T", v)
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		n = n[i+1:]
	}
	return n
}

func encodeJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("badgerstore: encode: %w", err)
	}
	out := make([]byte, 0, len(b)+1)
	out = append(out, encV1)
	return append(out, b...), nil
}

func decodeJSON(b []byte, v any) error {
	if len(b) == 0 || b[0] != encV1 {
		return versionError(recordName(v), b)
	}
	if err := json.Unmarshal(b[1:], v); err != nil {
		return fmt.Errorf("badgerstore: decode %s: %w", recordName(v), err)
	}
	return nil
}

func encodeRaw(data []byte) []byte {
	out := make([]byte, 0, len(data)+1)
	out = append(out, encV1)
	return append(out, data...)
}

// decodeRaw returns a copy: callers may keep and change it. what names the
// record for errors.
func decodeRaw(what string, b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] != encV1 {
		return nil, versionError(what, b)
	}
	return append([]byte{}, b[1:]...), nil
}

func encodeU64(v uint64) []byte {
	b := make([]byte, 9)
	b[0] = encV1
	binary.BigEndian.PutUint64(b[1:], v)
	return b
}

func decodeU64(what string, b []byte) (uint64, error) {
	if len(b) == 0 || b[0] != encV1 {
		return 0, versionError(what, b)
	}
	if len(b) != 9 {
		return 0, fmt.Errorf("badgerstore: %s record has %d bytes, want 9", what, len(b))
	}
	return binary.BigEndian.Uint64(b[1:]), nil
}
