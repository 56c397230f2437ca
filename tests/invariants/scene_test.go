package invariants

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// scene is one actor system, a Memory catalog under faultinject under a
// probe, and one pchannel actor, for the table-driven tests. It is meant
// to run inside a synctest bubble; a test in real time sets realTime.
type scene struct {
	// realTime is set by tests that run outside a synctest bubble.
	realTime bool

	t     testing.TB
	sys   *actor.ActorSystem
	sub   *eventstream.Subscription
	rec   *recorder
	mem   *persistence.Memory
	fi    *faultinject.Catalog
	probe *probe
	pid   *actor.PID
}

const scenePChannel = "pch-scene"

func newScene(t testing.TB, fiOpts ...faultinject.Option) *scene {
	s := &scene{
		t:   t,
		sys: actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop()))),
		rec: newRecorder(scenePChannel),
		mem: persistence.NewMemory(),
	}
	s.fi = faultinject.Wrap(s.mem, fiOpts...)
	s.probe = newProbe(s.fi)
	s.sub = s.sys.EventStream.Subscribe(s.rec.Observe)
	t.Cleanup(s.close)
	return s
}

func (s *scene) close() {
	if s.pid != nil {
		_ = s.sys.Root.StopFuture(s.pid).Wait()
		s.pid = nil
	}
	s.sys.EventStream.Unsubscribe(s.sub)
	_ = s.probe.Close()
	s.sys.Shutdown()
	if !s.realTime {
		drainDeadLetters(s.sys)
	}
}

func (s *scene) spawn(opts ...actors.Option) {
	s.t.Helper()
	props, err := actors.NewProps(scenePChannel, wal.Kafka, s.probe, opts...)
	require.NoError(s.t, err)
	s.pid = s.sys.Root.Spawn(props)
}

// store plants v as the stored checkpoint, as another writer would.
func (s *scene) store(v int64) {
	s.t.Helper()
	require.NoError(s.t, s.mem.Save(context.Background(), scenePChannel, wal.KafkaID(v)))
}

func (s *scene) stored() wal.MessageID {
	s.t.Helper()
	id, err := s.mem.Load(context.Background(), scenePChannel)
	require.NoError(s.t, err)
	return id
}

func (s *scene) update(vchannel string, v int64) {
	s.t.Helper()
	require.NoError(s.t, actors.Request(ctxtest.Within(time.Minute), s.sys.Root, s.pid, &messages.UpdateCheckpoint{VChannel: vchannel, Checkpoint: wal.KafkaID(v)}))
}

func (s *scene) state() *messages.State {
	s.t.Helper()
	st, err := actors.GetState(ctxtest.Within(time.Minute), s.sys.Root, s.pid)
	require.NoError(s.t, err)
	return st
}

// stop stops the actor, gracefully or not, and returns how long it took.
func (s *scene) stop(graceful bool) time.Duration {
	s.t.Helper()
	fut := s.sys.Root.StopFuture
	if graceful {
		fut = s.sys.Root.PoisonFuture
	}
	began := time.Now()
	require.NoError(s.t, fut(s.pid).Wait())
	s.pid = nil
	return time.Since(began)
}

// lifecycle returns the lifecycle events from index from on, in the short
// form the tables use.
func (s *scene) lifecycle(from int) []string {
	var out []string
	for _, ev := range s.rec.Since(from) {
		if str := short(ev); str != "" {
			out = append(out, str)
		}
	}
	return out
}

// short is the tables' form of a lifecycle event; "" for command events.
func short(ev messages.Event) string {
	switch e := ev.(type) {
	case *messages.Recovered:
		from := "spawn"
		if e.FromCatalog {
			from = "catalog"
		}
		return fmt.Sprintf("Recovered(%s, %s, %d)", wal.String(e.StartMessageID), from, e.Attempts)
	case *messages.RecoveryFailed:
		return fmt.Sprintf("RecoveryFailed(#%d, %s)", e.Attempt, errClass(e.Err))
	case *messages.CheckpointPersisted:
		return fmt.Sprintf("Persisted(%s, %d)", e.Value, e.Attempts)
	case *messages.PersistFailed:
		return fmt.Sprintf("PersistFailed(%s, #%d, %s)", e.Value, e.Attempt, errClass(e.Err))
	case *messages.PersisterRestarted:
		return fmt.Sprintf("PersisterRestarted(#%d)", e.Restarts)
	case *messages.Stopped:
		how := "hard"
		if e.Graceful {
			how = "graceful"
		}
		if e.Flushed {
			return fmt.Sprintf("Stopped(%s, %s, flushed)", how, wal.String(e.LastPersisted))
		}
		return fmt.Sprintf("Stopped(%s, %s, dropped %s)", how, wal.String(e.LastPersisted), wal.String(e.Dropped))
	case *messages.OwnershipLost:
		return "OwnershipLost"
	}
	return ""
}

func errClass(err error) string {
	switch {
	case err == nil:
		return "nil"
	case errors.Is(err, faultinject.ErrInjected):
		return "injected"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, persistence.ErrCorruptRecord):
		return "corrupt"
	case errors.Is(err, persistence.ErrStoredAhead):
		return "stored ahead"
	case strings.Contains(err.Error(), "panicked"):
		return "panic"
	default:
		return "other: " + err.Error()
	}
}

// backoffWindow is the range the k-th consecutive wait (from 0) of b must
// fall in, read off its promise: Initial × Multiplier^k, spread by the
// jitter, never below Initial nor above Max; at the cap, the jittered
// spread below Max. A microsecond of slack covers float rounding, never
// below Initial.
func backoffWindow(b actors.Backoff, k int) (lo, hi time.Duration) {
	grow := float64(b.Initial) * math.Pow(b.Multiplier, float64(k))
	capLo := float64(b.Max) * (1 - b.Jitter) / (1 + b.Jitter)
	lo = time.Duration(min(grow, capLo)) - time.Microsecond
	hi = time.Duration(min(grow*(1+b.Jitter)/(1-b.Jitter), float64(b.Max))) + time.Microsecond
	return max(lo, b.Initial), min(hi, b.Max)
}

// checkSchedule checks the retry schedule in calls of op: after every
// plain failure, the next call of op comes exactly the NextRetry its event
// announced later, and the k-th consecutive wait since the last success
// lies in backoffWindow(k). A panicking save crashes the persister (its
// restart is checked by the caller) unless panicFails: during a graceful
// stop's flush it is a failed save like any other.
func checkSchedule(t testing.TB, b actors.Backoff, calls []call, waits []time.Duration, op faultinject.Op, panicFails bool) {
	t.Helper()
	var ops []call
	for _, c := range calls {
		if c.op == op {
			ops = append(ops, c)
		}
	}
	k, w := 0, 0
	for i, c := range ops {
		switch o := classify(&c); o {
		case oOK, oStoredAhead:
			k = 0
			continue
		case oPanic:
			if op == faultinject.OpSave && !panicFails {
				k = 0 // a new persister, a new plan
				continue
			}
		case oCanceled:
			continue
		}
		require.Less(t, w, len(waits), "more failures than announced waits")
		wait := waits[w]
		w++
		lo, hi := backoffWindow(b, k)
		require.GreaterOrEqual(t, wait, lo, "wait #%d after %s", k, &c)
		require.LessOrEqual(t, wait, hi, "wait #%d after %s", k, &c)
		k++
		if i+1 < len(ops) {
			require.Equal(t, c.end.Add(wait), ops[i+1].start, "retry after %s: not NextRetry %v later", &c, wait)
		}
	}
}

// announcedWaits returns NextRetry of every RecoveryFailed (op Load) or
// PersistFailed with a positive NextRetry (op Save), in order.
func announcedWaits(evs []messages.Event, op faultinject.Op) []time.Duration {
	var out []time.Duration
	for _, ev := range evs {
		switch e := ev.(type) {
		case *messages.RecoveryFailed:
			if op == faultinject.OpLoad {
				out = append(out, e.NextRetry)
			}
		case *messages.PersistFailed:
			if op == faultinject.OpSave && e.NextRetry > 0 {
				out = append(out, e.NextRetry)
			}
		}
	}
	return out
}
