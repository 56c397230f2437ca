// Package tests holds black-box tests of lowwater's public API: actors,
// messages, persistence and persistence/faultinject, driven the way a user
// drives them (Props, commands, the EventStream, catalogs).
package tests

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/internal/testkit/eventlog"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	// pch is the pchannel every test works on.
	pch = "pch-0"
	// eventWait bounds every wait for an event; the tests that pass wait
	// far less.
	eventWait = 10 * time.Second
	// reqTimeout bounds every request.
	reqTimeout = 5 * time.Second
)

// fastBackoff keeps retries quick; its bounds are asserted where it matters.
var fastBackoff = actors.Backoff{Initial: 5 * time.Millisecond, Max: 50 * time.Millisecond, Multiplier: 1.5, Jitter: 0.2}

// k is a Kafka checkpoint.
func k(n int64) wal.MessageID { return wal.KafkaID(n) }

// harness is one actor system with an event recorder for pch.
type harness struct {
	t      testing.TB
	sys    *actor.ActorSystem
	logger *zap.Logger
	rec    *recorder
	sub    *eventstream.Subscription

	mu     sync.Mutex
	live   []*actor.PID // spawned and not yet stopped by the test
	closed bool
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	logger := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	// Dead letters (a reply to a request that timed out, say) start a
	// goroutine of protoactor's for the throttle's interval: a short one
	// ends it before goleak looks.
	sys := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(logger)),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	h := &harness{t: t, sys: sys, logger: logger, rec: newRecorder(pch)}
	h.sub = sys.EventStream.Subscribe(h.rec.Observe)
	t.Cleanup(h.close)
	return h
}

// close stops every actor still live (gracefully, so that each publishes
// Stopped), unsubscribes and shuts the system down. It is idempotent.
func (h *harness) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	live := h.live
	h.live = nil
	h.mu.Unlock()
	for _, pid := range live {
		if err := h.sys.Root.PoisonFuture(pid).Wait(); err != nil {
			h.t.Errorf("stopping %s: %v", pid.Id, err)
		}
	}
	h.sys.EventStream.Unsubscribe(h.sub)
	h.sys.Shutdown()
}

// spawn starts a pchannel actor for pch with the harness logger.
func (h *harness) spawn(walName wal.Name, cat persistence.Catalog, opts ...actors.Option) *actor.PID {
	h.t.Helper()
	props, err := actors.NewProps(pch, walName, cat, append([]actors.Option{actors.WithLogger(h.logger)}, opts...)...)
	require.NoError(h.t, err)
	pid := h.sys.Root.Spawn(props)
	h.mu.Lock()
	h.live = append(h.live, pid)
	h.mu.Unlock()
	return pid
}

func (h *harness) forget(pid *actor.PID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, p := range h.live {
		if p.Equal(pid) {
			h.live = append(h.live[:i], h.live[i+1:]...)
			return
		}
	}
}

// poison stops pid gracefully and returns its Stopped event and how long
// the stop took.
func (h *harness) poison(pid *actor.PID) (*messages.Stopped, time.Duration) {
	h.t.Helper()
	h.forget(pid)
	from := h.rec.Len()
	began := time.Now()
	require.NoError(h.t, h.sys.Root.PoisonFuture(pid).Wait())
	took := time.Since(began)
	return waitFrom(h.t, h.rec, from, func(*messages.Stopped) bool { return true }), took
}

// stop stops pid at once (Stop, no drain, no flush) and returns its Stopped
// event and how long the stop took.
func (h *harness) stop(pid *actor.PID) (*messages.Stopped, time.Duration) {
	h.t.Helper()
	h.forget(pid)
	from := h.rec.Len()
	began := time.Now()
	require.NoError(h.t, h.sys.Root.StopFuture(pid).Wait())
	took := time.Since(began)
	return waitFrom(h.t, h.rec, from, func(*messages.Stopped) bool { return true }), took
}

// request sends cmd with a sender and returns the reply.
func (h *harness) request(pid *actor.PID, cmd messages.Command) error {
	return actors.Request(ctxtest.Within(reqTimeout), h.sys.Root, pid, cmd)
}

// mustRequest sends cmd and requires it to be applied.
func (h *harness) mustRequest(pid *actor.PID, cmd messages.Command) {
	h.t.Helper()
	require.NoError(h.t, h.request(pid, cmd), "%T %+v", cmd, cmd)
}

func (h *harness) state(pid *actor.PID, withVChannels bool) *messages.State {
	h.t.Helper()
	var opts []actors.StateOption
	if withVChannels {
		opts = append(opts, actors.IncludeCheckpoints())
	}
	s, err := actors.GetState(ctxtest.Within(reqTimeout), h.sys.Root, pid, opts...)
	require.NoError(h.t, err)
	return s
}

// statePersisted asks GetState until its Persisted is v. GetState learns
// of a save after CheckpointPersisted is published (see
// TestGetStateAfterCheckpointPersisted), so a test that waited for the
// event asks again rather than sleeping.
func (h *harness) statePersisted(pid *actor.PID, v wal.MessageID) *messages.State {
	h.t.Helper()
	return h.eventually(pid, func(s *messages.State) bool { return v.EQ(s.Persisted) })
}

// eventually asks GetState until ok holds, up to eventWait, and returns
// the state that satisfied it. It is for views the actor updates by
// message from its persister; each try is a request, not a sleep.
func (h *harness) eventually(pid *actor.PID, ok func(*messages.State) bool) *messages.State {
	h.t.Helper()
	deadline := time.Now().Add(eventWait)
	for {
		s := h.state(pid, false)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("GetState never satisfied the condition within %v; last %+v", eventWait, s)
		}
		runtime.Gosched()
	}
}

// firstLive returns the first actor spawned and not stopped yet.
func (h *harness) firstLive() *actor.PID {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.live) == 0 {
		return nil
	}
	return h.live[0]
}

func (h *harness) update(pid *actor.PID, vchannel string, n int64) {
	h.t.Helper()
	h.mustRequest(pid, &messages.UpdateCheckpoint{VChannel: vchannel, Checkpoint: k(n)})
}

// recorder keeps lowwater events in publishing order; see internal/testkit/eventlog.
type recorder = eventlog.Log

func newRecorder(pchannel string) *recorder { return eventlog.New(pchannel) }

// waitFor waits for the first event of type E matching match.
func waitFor[E messages.Event](t testing.TB, r *recorder, match func(E) bool) E {
	t.Helper()
	return waitFrom(t, r, 0, match)
}

// waitFrom waits for the first event of type E at index >= from matching
// match.
func waitFrom[E messages.Event](t testing.TB, r *recorder, from int, match func(E) bool) E {
	t.Helper()
	ev, _, ok := r.Await(from, eventWait, func(ev messages.Event) bool {
		e, ok := ev.(E)
		return ok && match(e)
	})
	if !ok {
		var zero E
		t.Fatalf("no %T event after #%d within %v; events: %s", zero, from, eventWait, describe(r.Since(0)))
	}
	return ev.(E)
}

// waitCount waits until n events of type E matching match were published.
func waitCount[E messages.Event](t testing.TB, r *recorder, n int, match func(E) bool) []E {
	t.Helper()
	var got []E
	from := 0
	for len(got) < n {
		ev, idx, ok := r.Await(from, eventWait, func(ev messages.Event) bool {
			e, ok := ev.(E)
			return ok && match(e)
		})
		if !ok {
			var zero E
			t.Fatalf("%d of %d %T events within %v; events: %s", len(got), n, zero, eventWait, describe(r.Since(0)))
		}
		got = append(got, ev.(E))
		from = idx + 1
	}
	return got
}

// collect returns every event of type E published so far.
func collect[E messages.Event](r *recorder) []E {
	var out []E
	for _, ev := range r.Since(0) {
		if e, ok := ev.(E); ok {
			out = append(out, e)
		}
	}
	return out
}

func persistedIs(v wal.MessageID) func(*messages.CheckpointPersisted) bool {
	return func(e *messages.CheckpointPersisted) bool { return e.Value.EQ(v) }
}

func any1[E any](E) bool { return true }

func describe(evs []messages.Event) string {
	const max = 40
	var b []byte
	start := 0
	if len(evs) > max {
		start = len(evs) - max
		b = append(b, "... "...)
	}
	for _, ev := range evs[start:] {
		b = append(b, eventString(ev)...)
		b = append(b, "; "...)
	}
	return string(b)
}

func eventString(ev messages.Event) string {
	switch e := ev.(type) {
	case *messages.Recovered:
		return "Recovered(" + wal.String(e.StartMessageID) + ")"
	case *messages.RecoveryFailed:
		return "RecoveryFailed(" + e.Err.Error() + ")"
	case *messages.MinimumAdvanced:
		return "MinimumAdvanced(" + wal.String(e.From) + "→" + wal.String(e.To) + ")"
	case *messages.CheckpointPersisted:
		return "CheckpointPersisted(" + wal.String(e.Value) + ")"
	case *messages.PersistFailed:
		return "PersistFailed(" + wal.String(e.Value) + ": " + e.Err.Error() + ")"
	case *messages.CommandRejected:
		return "CommandRejected(" + e.Err.Error() + ")"
	case *messages.Stopped:
		return "Stopped(persisted " + wal.String(e.LastPersisted) + ", dropped " + wal.String(e.Dropped) + ")"
	case *messages.PersisterRestarted:
		return "PersisterRestarted"
	case *messages.VChannelAdded:
		return "VChannelAdded(" + e.VChannel + ")"
	case *messages.VChannelDropped:
		return "VChannelDropped(" + e.VChannel + ")"
	default:
		return "?"
	}
}

// gated wraps a catalog so that a test can hold a chosen call until it
// releases it: faultinject's Hang ends only with the context or Close, and
// some tests need to let the call through at a moment of their choosing.
// A held call honours its context, as a real store would.
type gated struct {
	persistence.Catalog

	mu    sync.Mutex
	holds map[faultinject.Op][]*hold
}

// hold is one held call: entered is closed when the call arrives; the call
// proceeds to the wrapped catalog once release is called.
type hold struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *hold) Release() { h.once.Do(func() { close(h.release) }) }

// waitEntered waits until the held call has arrived.
func (h *hold) waitEntered(t testing.TB) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(eventWait):
		t.Fatalf("held call never arrived within %v", eventWait)
	}
}

func newGated(inner persistence.Catalog) *gated {
	return &gated{Catalog: inner, holds: make(map[faultinject.Op][]*hold)}
}

// holdNext holds the next call of op that is not already held. The hold is
// released at the end of the test at the latest.
func (g *gated) holdNext(t testing.TB, op faultinject.Op) *hold {
	h := &hold{entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(h.Release)
	g.mu.Lock()
	g.holds[op] = append(g.holds[op], h)
	g.mu.Unlock()
	return h
}

func (g *gated) take(op faultinject.Op) *hold {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.holds[op]
	if len(q) == 0 {
		return nil
	}
	g.holds[op] = q[1:]
	return q[0]
}

func (g *gated) wait(ctx context.Context, op faultinject.Op) error {
	h := g.take(op)
	if h == nil {
		return nil
	}
	close(h.entered)
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if err := g.wait(ctx, faultinject.OpLoad); err != nil {
		return nil, err
	}
	return g.Catalog.Load(ctx, pchannel)
}

func (g *gated) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if err := g.wait(ctx, faultinject.OpSave); err != nil {
		return err
	}
	return g.Catalog.Save(ctx, pchannel, checkpoint)
}

// requireStrictlyIncreasing fails unless ids rise strictly.
func requireStrictlyIncreasing(t testing.TB, ids []wal.MessageID, what string) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		require.True(t, ids[i-1].LT(ids[i]), "%s not strictly increasing at %d: %s then %s (all: %v)", what, i, ids[i-1], ids[i], ids)
	}
}

// loadNow reads the stored checkpoint straight from a catalog.
func loadNow(t testing.TB, cat persistence.Catalog) wal.MessageID {
	t.Helper()
	id, err := cat.Load(context.Background(), pch)
	require.NoError(t, err)
	return id
}

// isRejection reports whether ev is the rejection of cmd with target.
func isRejection(cmd messages.Command, target error) func(*messages.CommandRejected) bool {
	return func(e *messages.CommandRejected) bool { return e.Command == cmd && errors.Is(e.Err, target) }
}

// persisterBug is what a logger that crashes the persister panics with:
// since a catalog's panic is a failed save, a bug on the persister's own
// goroutine, such as one in a logger, is what crashes it.
type persisterBug struct{ n int64 }

// crashingLogger is the harness logger, except that its first n "save
// failed" lines panic, on the persister's goroutine, after being written.
func (h *harness) crashingLogger(n int64) actors.Option {
	var left atomic.Int64
	left.Store(n)
	return actors.WithLogger(h.logger.WithOptions(zap.Hooks(func(e zapcore.Entry) error {
		if e.Message == "save failed" {
			if k := left.Add(-1); k >= 0 {
				panic(persisterBug{n: n - k})
			}
		}
		return nil
	})))
}
