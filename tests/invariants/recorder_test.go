package invariants

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/testkit/eventlog"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// recorder keeps lowwater events in publishing order; see internal/testkit/eventlog.
type recorder = eventlog.Log

func newRecorder(pchannel string) *recorder { return eventlog.New(pchannel) }

// waitEvent waits for the first event of type E at index >= from matching
// match.
func waitEvent[E messages.Event](t testing.TB, r *recorder, from int, timeout time.Duration, match func(E) bool) (E, int) {
	t.Helper()
	ev, idx, ok := r.Await(from, timeout, func(ev messages.Event) bool {
		e, ok := ev.(E)
		return ok && match(e)
	})
	if !ok {
		var zero E
		t.Fatalf("no %T after event #%d within %v; events: %s", zero, from, timeout, describe(r.Since(0)))
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
