package invariants

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// recorder keeps the lowwater events of one pchannel in publishing order.
// Its handler runs on the publishing actor's goroutine: it only appends and
// signals.
type recorder struct {
	pchannel string
	// paused drops events, for tests that measure the heap.
	paused atomic.Bool

	mu     sync.Mutex
	events []messages.Event
	// changed is closed, and replaced, on every event.
	changed chan struct{}
}

func newRecorder(pchannel string) *recorder {
	return &recorder{pchannel: pchannel, changed: make(chan struct{})}
}

func (r *recorder) observe(e any) {
	ev, ok := e.(messages.Event)
	if !ok || ev.EventHeader().PChannel != r.pchannel || r.paused.Load() {
		return
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *recorder) since(from int) []messages.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]messages.Event(nil), r.events[from:]...)
}

// await returns the first event at index >= from that matches, waiting up
// to timeout; ok is false on timeout.
func (r *recorder) await(from int, timeout time.Duration, match func(messages.Event) bool) (ev messages.Event, idx int, ok bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	next := from
	for {
		r.mu.Lock()
		for ; next < len(r.events); next++ {
			if match(r.events[next]) {
				ev := r.events[next]
				r.mu.Unlock()
				return ev, next, true
			}
		}
		changed := r.changed
		r.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return nil, -1, false
		}
	}
}

// waitEvent waits for the first event of type E at index >= from matching
// match.
func waitEvent[E messages.Event](t testing.TB, r *recorder, from int, timeout time.Duration, match func(E) bool) (E, int) {
	t.Helper()
	ev, idx, ok := r.await(from, timeout, func(ev messages.Event) bool {
		e, ok := ev.(E)
		return ok && match(e)
	})
	if !ok {
		var zero E
		t.Fatalf("no %T after event #%d within %v; events: %s", zero, from, timeout, describe(r.since(0)))
	}
	return ev.(E), idx
}

func ofType[E messages.Event](evs []messages.Event) []E {
	var out []E
	for _, ev := range evs {
		if e, ok := ev.(E); ok {
			out = append(out, e)
		}
	}
	return out
}

func describe(evs []messages.Event) string {
	const keep = 60
	var parts []string
	if len(evs) > keep {
		parts = append(parts, fmt.Sprintf("(%d earlier)", len(evs)-keep))
		evs = evs[len(evs)-keep:]
	}
	for _, ev := range evs {
		parts = append(parts, eventString(ev))
	}
	return strings.Join(parts, "; ")
}

func eventString(ev messages.Event) string {
	switch e := ev.(type) {
	case *messages.Recovered:
		return fmt.Sprintf("Recovered(%s, fromCatalog=%v, attempts=%d)", wal.String(e.StartMessageID), e.FromCatalog, e.Attempts)
	case *messages.RecoveryFailed:
		return fmt.Sprintf("RecoveryFailed(#%d, next %v: %v)", e.Attempt, e.NextRetry, e.Err)
	case *messages.MinimumAdvanced:
		return fmt.Sprintf("MinimumAdvanced(%s→%s)", wal.String(e.From), wal.String(e.To))
	case *messages.CheckpointPersisted:
		return fmt.Sprintf("CheckpointPersisted(%s, attempts=%d)", wal.String(e.Value), e.Attempts)
	case *messages.PersistFailed:
		return fmt.Sprintf("PersistFailed(%s, #%d, next %v: %v)", wal.String(e.Value), e.Attempt, e.NextRetry, e.Err)
	case *messages.CommandRejected:
		return fmt.Sprintf("CommandRejected(%T: %v)", e.Command, e.Err)
	case *messages.Stopped:
		return fmt.Sprintf("Stopped(graceful=%v, persisted %s, flushed=%v, dropped %s)", e.Graceful, wal.String(e.LastPersisted), e.Flushed, wal.String(e.Dropped))
	case *messages.PersisterRestarted:
		return fmt.Sprintf("PersisterRestarted(#%d: %v)", e.Restarts, e.Reason)
	case *messages.VChannelAdded:
		return fmt.Sprintf("VChannelAdded(%s@%s)", e.VChannel, wal.String(e.Checkpoint))
	case *messages.VChannelDropped:
		return fmt.Sprintf("VChannelDropped(%s)", e.VChannel)
	case *messages.OwnershipLost:
		return fmt.Sprintf("OwnershipLost(%v)", e.Cause)
	default:
		return fmt.Sprintf("%T", ev)
	}
}
