package etcd_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// TestRecoverThousandPChannels recovers 1,000 pchannels the way a node
// taking over many of them does: one LoadAll (one range read), then 1,000
// actors spawned with WithPreloaded, none of which reads the catalog.
func TestRecoverThousandPChannels(t *testing.T) {
	const n = 1000
	eps := etcdtest.Start(t)
	name := func(i int) string { return fmt.Sprintf("pch-%04d", i) }
	want := make(map[string]wal.MessageID, n)
	for i := range n {
		want[name(i)] = k(int64(1000 + i))
	}
	seed(t, newCatalog(t, eps), want)

	// A fresh node: its own client, counting its calls.
	var counter rpcCounter
	cat := newCatalog(t, eps, grpc.WithChainUnaryInterceptor(counter.intercept))
	s := newSystem(t)
	recovered := newRecoveryCounter(n, want)
	sub := s.sys.EventStream.Subscribe(recovered.observe)
	defer s.sys.EventStream.Unsubscribe(sub)
	counter.take()

	began := time.Now()
	all, err := cat.LoadAll(ctxT(t))
	require.NoError(t, err)
	loaded := time.Now()
	require.Equal(t, map[string]int64{"Range": 1}, counter.take(), "LoadAll is one range read")
	require.Equal(t, want, all)

	props := make([]*actor.Props, n)
	for i := range n {
		p, err := actors.NewProps(name(i), wal.Kafka, cat, actors.WithSaveTimeout(saveTimeout),
			actors.WithPreloaded(all[name(i)]), actors.WithVChannels(map[string]wal.MessageID{"v": k(0)}))
		require.NoError(t, err)
		props[i] = p
	}
	built := time.Now()
	pids := make([]*actor.PID, n)
	for i := range n {
		pids[i] = s.sys.Root.Spawn(props[i])
	}
	spawned := time.Now()
	s.mu.Lock()
	s.live = append(s.live, pids...) // stopped by the cleanup should the test fail
	s.mu.Unlock()
	select {
	case <-recovered.done:
	case <-time.After(eventWait):
		t.Fatalf("%d of %d pchannels recovered within %v", recovered.count.Load(), n, eventWait)
	}
	done := time.Now()
	require.Zero(t, recovered.wrong.Load(), "pchannels recovered from something other than their stored checkpoint")
	require.Empty(t, counter.take(), "a preloaded pchannel reads nothing at recovery")

	t.Logf("%d pchannels: LoadAll %v (one Range); props %v; spawn %v; all Recovered %v after the first spawn; total %v",
		n, loaded.Sub(began).Round(time.Microsecond), built.Sub(loaded).Round(time.Microsecond),
		spawned.Sub(built).Round(time.Microsecond), done.Sub(built).Round(time.Microsecond), done.Sub(began).Round(time.Microsecond))

	// Stop them all at once, then wait: nothing is pending, so each stop
	// is quick.
	stopBegan := time.Now()
	futures := make([]*actor.Future, n)
	for i, pid := range pids {
		futures[i] = s.sys.Root.PoisonFuture(pid)
	}
	for _, f := range futures {
		require.NoError(t, f.Wait())
	}
	t.Logf("stopped %d pchannels in %v", n, time.Since(stopBegan).Round(time.Microsecond))
}

// seed stores every checkpoint of want, a few saves at a time.
func seed(t testing.TB, cat interface {
	Save(context.Context, string, wal.MessageID) error
}, want map[string]wal.MessageID) {
	t.Helper()
	const workers = 8
	names := make(chan string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for name := range names {
				if err := cat.Save(ctxT(t), name, want[name]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
feed:
	for name := range want {
		select {
		case names <- name:
		case err := <-errs:
			t.Errorf("seeding: %v", err)
			break feed
		}
	}
	close(names)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("seeding: %v", err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// recoveryCounter counts Recovered events, checking each start against the
// stored checkpoint, and closes done at n. Its handler runs on the actors'
// goroutines: atomics only.
type recoveryCounter struct {
	n     int64
	want  map[string]wal.MessageID // read only
	count atomic.Int64
	wrong atomic.Int64
	done  chan struct{}
}

func newRecoveryCounter(n int, want map[string]wal.MessageID) *recoveryCounter {
	return &recoveryCounter{n: int64(n), want: want, done: make(chan struct{})}
}

func (c *recoveryCounter) observe(e any) {
	r, ok := e.(*messages.Recovered)
	if !ok {
		return
	}
	if w, ok := c.want[r.PChannel]; !ok || !r.FromCatalog || !w.EQ(r.StartMessageID) || r.Attempts != 1 {
		c.wrong.Add(1)
	}
	if c.count.Add(1) == c.n {
		close(c.done)
	}
}

// rpcCounter counts the unary gRPC calls a client makes, by method.
type rpcCounter struct {
	mu    sync.Mutex
	calls map[string]int64
}

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = make(map[string]int64)
	}
	c.calls[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the counts so far and starts again from zero.
func (c *rpcCounter) take() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	if calls == nil {
		calls = map[string]int64{}
	}
	return calls
}
