package etcd_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/internal/testkit/eventlog"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

const (
	// saveTimeout bounds each catalog call of the actors under test: an
	// unreachable etcd or a leader change costs one attempt of this length.
	saveTimeout = 500 * time.Millisecond
	// eventWait bounds every wait for an event that is not itself measured.
	eventWait = 15 * time.Second
	// callTimeout bounds the calls the tests make themselves.
	callTimeout = 10 * time.Second
	reqTimeout  = 5 * time.Second
)

func k(n int64) wal.MessageID { return wal.KafkaID(n) }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// reconnect caps gRPC's reconnection backoff at 1 s. Its default grows to
// 120 s, so that after a 10 s outage a client may take several more
// seconds to notice the server is back (attempts near 1, 2.6, 5.2, 9.3,
// 15.9 s): the catch-up would then measure gRPC, not lowwater. A deployment
// that cares about recovery time sets the same through
// clientv3.Config.DialOptions.
var reconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: time.Second,
})

func clientConfig(endpoints []string, opts ...grpc.DialOption) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: append([]grpc.DialOption{reconnect}, opts...),
	}
}

// newClient returns a raw client, closed by t.Cleanup.
func newClient(t testing.TB, endpoints []string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientConfig(endpoints, opts...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// newCatalog returns a catalog on its own client, both closed by t.Cleanup.
func newCatalog(t testing.TB, endpoints []string, opts ...grpc.DialOption) *etcdcatalog.Catalog {
	t.Helper()
	cat, err := etcdcatalog.New(newClient(t, endpoints, opts...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	return cat
}

// node is one process of a deployment: its client, catalog and session.
type node struct {
	cat     *etcdcatalog.Catalog
	session *concurrency.Session
}

func newNode(t testing.TB, endpoints []string, ttl int) *node {
	t.Helper()
	cat := newCatalog(t, endpoints)
	s, err := concurrency.NewSession(cat.Client(), concurrency.WithTTL(ttl))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return &node{cat: cat, session: s}
}

// own makes the node own pchannel, released by t.Cleanup.
func (n *node) own(t testing.TB, pchannel string) *etcdcatalog.Owned {
	t.Helper()
	o, err := n.cat.Own(ctxT(t), pchannel, n.session)
	require.NoError(t, err)
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// system is one actor system with a recorder of every lowwater event.
// Make it after the catalogs its actors use, so that t.Cleanup stops the
// actors first.
type system struct {
	t   testing.TB
	sys *actor.ActorSystem
	rec *recorder
	sub *eventstream.Subscription

	mu   sync.Mutex
	live []*actor.PID
}

func newSystem(t testing.TB) *system {
	t.Helper()
	// protoactor's own lines (dead letters, mostly) are of no use here.
	quiet := actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) })
	// Each dead letter arms a goroutine for the throttle interval (1 s by
	// default), which goleak would find if a test ended within it.
	throttle := actor.WithDeadLetterThrottleInterval(10 * time.Millisecond)
	s := &system{t: t, sys: actor.NewActorSystem(quiet, throttle), rec: newRecorder()}
	s.sub = s.sys.EventStream.Subscribe(s.rec.Observe)
	t.Cleanup(s.close)
	return s
}

// close stops every actor it spawned (a stopped one answers at once),
// unsubscribes and shuts the system down.
func (s *system) close() {
	s.mu.Lock()
	live := s.live
	s.live = nil
	s.mu.Unlock()
	futures := make([]*actor.Future, len(live))
	for i, pid := range live {
		futures[i] = s.sys.Root.PoisonFuture(pid)
	}
	for i, f := range futures {
		if err := f.Wait(); err != nil {
			s.t.Errorf("stopping %s: %v", live[i].Id, err)
		}
	}
	s.sys.EventStream.Unsubscribe(s.sub)
	s.sys.Shutdown()
}

func (s *system) spawn(pchannel string, cat persistence.Catalog, opts ...actors.Option) *actor.PID {
	s.t.Helper()
	props, err := actors.NewProps(pchannel, wal.Kafka, cat, append([]actors.Option{actors.WithSaveTimeout(saveTimeout)}, opts...)...)
	require.NoError(s.t, err)
	pid := s.sys.Root.Spawn(props)
	s.mu.Lock()
	s.live = append(s.live, pid)
	s.mu.Unlock()
	return pid
}

func (s *system) update(pid *actor.PID, vchannel string, n int64) {
	s.t.Helper()
	require.NoError(s.t, actors.Request(ctxtest.Within(reqTimeout), s.sys.Root, pid, &messages.UpdateCheckpoint{VChannel: vchannel, Checkpoint: k(n)}))
}

func (s *system) state(pid *actor.PID) *messages.State {
	s.t.Helper()
	st, err := actors.GetState(ctxtest.Within(reqTimeout), s.sys.Root, pid)
	require.NoError(s.t, err)
	return st
}

// feeder advances one vchannel of one actor every tick, fire-and-forget
// as a consumer would, from next on, until stop.
type feeder struct {
	quit chan struct{}
	done chan struct{}
	mu   sync.Mutex
	last int64
}

func startFeeder(s *system, pid *actor.PID, vchannel string, next int64, tick time.Duration) *feeder {
	f := &feeder{quit: make(chan struct{}), done: make(chan struct{}), last: next - 1}
	go func() {
		defer close(f.done)
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for n := next; ; n++ {
			select {
			case <-f.quit:
				return
			case <-ticker.C:
			}
			s.sys.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: vchannel, Checkpoint: k(n)})
			f.mu.Lock()
			f.last = n
			f.mu.Unlock()
		}
	}()
	return f
}

// stop ends the feeder and returns the last checkpoint it sent.
func (f *feeder) stop() int64 {
	select {
	case <-f.quit:
	default:
		close(f.quit)
	}
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// recorder keeps lowwater events in publishing order; see internal/testkit/eventlog.
type recorder = eventlog.Log

func newRecorder() *recorder { return eventlog.New("") }

// waitFrom waits up to timeout for the first event of type E about
// pchannel, at index >= from, that matches.
func waitFrom[E messages.Event](t testing.TB, r *recorder, pchannel string, from int, timeout time.Duration, match func(E) bool) (E, int) {
	t.Helper()
	ev, idx, ok := r.Await(from, timeout, func(ev messages.Event) bool {
		e, ok := ev.(E)
		return ok && ev.EventHeader().PChannel == pchannel && match(e)
	})
	if !ok {
		var zero E
		t.Fatalf("no %T of %s after #%d within %v; events: %s", zero, pchannel, from, timeout, describe(r.Since(0), pchannel))
	}
	return ev.(E), idx
}

// collect returns the events of type E about pchannel at index >= from.
func collect[E messages.Event](r *recorder, pchannel string, from int) []E {
	var out []E
	for _, ev := range r.Since(0)[from:] {
		if e, ok := ev.(E); ok && ev.EventHeader().PChannel == pchannel {
			out = append(out, e)
		}
	}
	return out
}

func anyEvent[E any](E) bool { return true }

// persistedIs matches the acknowledgement of v: wait for it only when v
// is the latest minimum, since saves coalesce and may skip any other.
func persistedIs(v wal.MessageID) func(*messages.CheckpointPersisted) bool {
	return func(e *messages.CheckpointPersisted) bool { return e.Value.EQ(v) }
}

// persistedAtLeast matches the acknowledgement of v or of a later value.
func persistedAtLeast(v wal.MessageID) func(*messages.CheckpointPersisted) bool {
	return func(e *messages.CheckpointPersisted) bool { return v.LTE(e.Value) }
}

func describe(evs []messages.Event, pchannel string) string {
	const max = 30
	var parts []string
	for _, ev := range evs {
		if ev.EventHeader().PChannel != pchannel {
			continue
		}
		switch e := ev.(type) {
		case *messages.Recovered:
			parts = append(parts, "Recovered("+wal.String(e.StartMessageID)+")")
		case *messages.CheckpointPersisted:
			parts = append(parts, "CheckpointPersisted("+wal.String(e.Value)+")")
		case *messages.PersistFailed:
			parts = append(parts, "PersistFailed("+wal.String(e.Value)+": "+e.Err.Error()+")")
		case *messages.OwnershipLost:
			parts = append(parts, fmt.Sprintf("OwnershipLost(%v)", e.Cause))
		case *messages.Stopped:
			parts = append(parts, "Stopped("+wal.String(e.LastPersisted)+")")
		default:
			parts = append(parts, fmt.Sprintf("%T", ev))
		}
	}
	if len(parts) > max {
		parts = append([]string{"..."}, parts[len(parts)-max:]...)
	}
	return strings.Join(parts, "; ")
}

// stored is one value written at a checkpoint key, as its history shows it.
type stored struct {
	rev int64
	rec persistence.Record
}

func checkpointKey(pchannel string) string {
	return etcdcatalog.DefaultPrefix + "/wal/" + pchannel + "/consume-checkpoint"
}

func currentRevision(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(ctxT(t), "\x00")
	require.NoError(t, err)
	return resp.Header.Revision
}

// history returns every value written at pchannel's checkpoint key from
// revision from on, up to the record stored now, read back through a
// watch. etcd keeps every revision here (nothing compacts), so the watch
// sees them all; the key is never deleted, so no delete may show up.
func history(t testing.TB, cli *clientv3.Client, pchannel string, from int64) []stored {
	t.Helper()
	key := checkpointKey(pchannel)
	resp, err := cli.Get(ctxT(t), key)
	require.NoError(t, err)
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision < from {
		return nil
	}
	to := resp.Kvs[0].ModRevision
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var out []stored
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(from)) {
		require.NoError(t, wr.Err())
		for _, ev := range wr.Events {
			require.Equal(t, mvccpb.PUT, ev.Type, "event %v at revision %d", ev.Type, ev.Kv.ModRevision)
			rec, err := persistence.DecodeRecord(pchannel, ev.Kv.Value)
			require.NoError(t, err)
			out = append(out, stored{rev: ev.Kv.ModRevision, rec: rec})
			if ev.Kv.ModRevision >= to {
				return out
			}
		}
	}
	t.Fatalf("watch of %s ended before revision %d: %v", key, to, ctx.Err())
	return nil
}

// requireIncreasing checks that the stored values strictly increase and
// their terms never decrease.
func requireIncreasing(t testing.TB, h []stored) {
	t.Helper()
	for i := 1; i < len(h); i++ {
		require.True(t, h[i-1].rec.Checkpoint.LT(h[i].rec.Checkpoint),
			"stored value goes from %s to %s at revision %d", h[i-1].rec.Checkpoint, h[i].rec.Checkpoint, h[i].rev)
		require.LessOrEqual(t, h[i-1].rec.Term, h[i].rec.Term, "stored term goes down at revision %d", h[i].rev)
	}
}

// requireAcknowledgedStored checks that every acknowledged value was stored
// at some revision: an acknowledgement with no write behind it would be a
// lost checkpoint.
func requireAcknowledgedStored(t testing.TB, h []stored, acks []*messages.CheckpointPersisted) {
	t.Helper()
	seen := make(map[wal.KafkaID]bool, len(h))
	for _, s := range h {
		seen[s.rec.Checkpoint.(wal.KafkaID)] = true
	}
	for _, a := range acks {
		require.True(t, seen[a.Value.(wal.KafkaID)], "acknowledged %s was never stored", a.Value)
	}
}

// minWait is the least wait the backoff can draw before retry number
// i+1 (i counts from 0): Backoff.New shifts the jitter so that the low end
// of each draw is Initial×Multiplier^i, until the centre reaches its cap of
// Max/(1+Jitter).
func minWait(b actors.Backoff, i int) time.Duration {
	grown := float64(b.Initial) * math.Pow(b.Multiplier, float64(i))
	capped := float64(b.Max) * (1 - b.Jitter) / (1 + b.Jitter)
	return max(b.Initial, time.Duration(min(grown, capped)))
}

// maxAttempts is how many attempts can start within a window of d under
// b, if every wait drew its least value and every attempt took no time:
// the first at the window's start, each next one minWait later.
func maxAttempts(b actors.Backoff, d time.Duration) int {
	n, at := 1, time.Duration(0)
	for i := 0; ; i++ {
		at += minWait(b, i)
		if at > d {
			return n
		}
		n++
	}
}

// maxWait is the largest wait the backoff can draw before retry number
// i+1: the high end of the same draw, Initial×(1+J)/(1−J)×Multiplier^i,
// never above Max.
func maxWait(b actors.Backoff, i int) time.Duration {
	grown := float64(b.Initial) * (1 + b.Jitter) / (1 - b.Jitter) * math.Pow(b.Multiplier, float64(i))
	return time.Duration(min(grown, float64(b.Max)))
}

// minAttempts is how many attempts must start within a window of d that
// opens with a failure, if every wait drew its largest value and every
// attempt took attempt: a lower bound on the failures, so that a persister
// that gave up would be noticed.
func minAttempts(b actors.Backoff, d, attempt time.Duration) int {
	n, at := 1, time.Duration(0)
	for i := 0; ; i++ {
		at += maxWait(b, i) + attempt
		if at > d {
			return n
		}
		n++
	}
}

// within fails unless d <= bound.
func within(t testing.TB, d, bound time.Duration, what string) {
	t.Helper()
	require.LessOrEqual(t, d, bound, "%s took %v, bound %v", what, d, bound)
}
