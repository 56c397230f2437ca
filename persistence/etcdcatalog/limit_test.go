package etcdcatalog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// txnGate holds every Txn the client sends until the test lets it go, and
// records how many were held at once.
type txnGate struct {
	entered chan string // the method of each call held
	release chan struct{}

	mu       sync.Mutex
	inFlight int
	most     int
}

func newTxnGate() *txnGate {
	return &txnGate{entered: make(chan string, 100), release: make(chan struct{})}
}

func (g *txnGate) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !strings.HasSuffix(method, "/Txn") {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	g.mu.Lock()
	g.inFlight++
	g.most = max(g.most, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	g.entered <- method
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (g *txnGate) mostAtOnce() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.most
}

func (g *txnGate) waitEntered(t *testing.T) {
	t.Helper()
	within(t, g.entered, "a Txn to reach etcd")
}

// within receives from ch, failing the test if nothing comes within the
// call timeout.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(callTimeout):
		t.Fatalf("waited the call timeout for %s", what)
		var zero T
		return zero
	}
}

// holdSlot starts a save of "held" and returns once g holds its Txn: with
// a bound of 1, every other call waits for it. Its result comes on the
// channel once g lets it go.
func holdSlot(t *testing.T, c *etcdcatalog.Catalog, g *txnGate) <-chan error {
	t.Helper()
	held := make(chan error, 1)
	go func() { held <- c.Save(ctxT(t), "held", wal.KafkaID(1)) }()
	g.waitEntered(t)
	return held
}

// ownGated owns pchannel for s through c, letting its claim pass g.
func ownGated(t *testing.T, c *etcdcatalog.Catalog, g *txnGate, pchannel string, s *concurrency.Session) *etcdcatalog.Owned {
	t.Helper()
	claimed := make(chan *etcdcatalog.Owned, 1)
	go func() {
		o, err := c.Own(ctxT(t), pchannel, s)
		assert.NoError(t, err)
		claimed <- o
	}()
	g.waitEntered(t)
	g.release <- struct{}{}
	o := <-claimed
	require.NotNil(t, o, "Own failed")
	return o
}

// releaseLast lets the Txn held go, and requires the call whose result
// comes on done to end with want, sending no other Txn.
func (g *txnGate) releaseLast(t *testing.T, done <-chan error, want error) {
	t.Helper()
	select {
	case g.release <- struct{}{}:
	case err := <-done: // ended in the gate, by its context or Close
		require.ErrorIs(t, err, want)
		require.Empty(t, g.entered, "another Txn went out")
		return
	}
	select {
	case err := <-done:
		require.ErrorIs(t, err, want)
	case <-g.entered:
		close(g.release)
		t.Fatal("another Txn went out")
	case <-time.After(callTimeout):
		t.Fatal("the call did not end within the call timeout")
	}
}

// waitingCtx tells when a call first asks for its Done channel: a call of
// the catalog does only once it waits for a slot.
type waitingCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func newWaitingCtx(t *testing.T) *waitingCtx {
	return &waitingCtx{Context: ctxT(t), waiting: make(chan struct{})}
}

func (w *waitingCtx) Done() <-chan struct{} {
	w.once.Do(func() { close(w.waiting) })
	return w.Context.Done()
}

func (w *waitingCtx) waitWaiting(t *testing.T) {
	t.Helper()
	within(t, w.waiting, "the call to wait for a slot")
}

// gatedCatalog opens a catalog, owning its client, whose Txns pass g.
func gatedCatalog(t *testing.T, eps []string, g *txnGate, opts ...etcdcatalog.Option) *etcdcatalog.Catalog {
	t.Helper()
	c, err := etcdcatalog.Open(gatedConfig(eps, g), opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// gatedClient is a client whose Txns pass g, for a catalog made with New:
// it outlives the catalog's Close.
func gatedClient(t *testing.T, eps []string, g *txnGate) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(gatedConfig(eps, g))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func gatedConfig(eps []string, g *txnGate) clientv3.Config {
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(g.intercept)}
	return cfg
}

// Ten saves at once on a catalog bound to three calls: etcd never has more
// than three of them, and every one lands.
func TestConcurrentCallsAreBounded(t *testing.T) {
	eps := etcdtest.Start(t)
	g := newTxnGate()
	c := gatedCatalog(t, eps, g, etcdcatalog.WithMaxConcurrentCalls(3))
	const saves = 10
	errs := make(chan error, saves)
	for i := range saves {
		go func() { errs <- c.Save(ctxT(t), fmt.Sprintf("p%d", i), wal.KafkaID(7)) }()
	}
	for range 3 {
		g.waitEntered(t)
	}
	// One out, one in: with three held, the rest wait for a slot, not for
	// etcd.
	for range saves - 3 {
		g.release <- struct{}{}
		g.waitEntered(t)
	}
	for range 3 {
		g.release <- struct{}{}
	}
	for range saves {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 3, g.mostAtOnce())
	cli := newClient(t, eps)
	for i := range saves {
		rec, _ := rawRecord(t, cli, checkpointKey(fmt.Sprintf("p%d", i)))
		require.Equal(t, wal.KafkaID(7), rec.Checkpoint)
	}
}

// A save that finds no free slot before its deadline fails with the
// deadline, and sends etcd nothing.
func TestSaveWaitingForASlotEndsWithItsContext(t *testing.T) {
	eps := etcdtest.Start(t)
	g := newTxnGate()
	c := gatedCatalog(t, eps, g, etcdcatalog.WithMaxConcurrentCalls(1))
	held := holdSlot(t, c, g)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := c.Save(ctx, "late", wal.KafkaID(1))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `etcdcatalog: save "late": waiting for one of 1 calls in flight to end`)

	g.release <- struct{}{}
	require.NoError(t, <-held)
	got, err := c.Load(ctxT(t), "late")
	require.NoError(t, err)
	require.Nil(t, got, "the save that timed out waiting wrote nothing")
	require.Equal(t, 1, g.mostAtOnce())
}

// Own waiting for another session to let go holds no slot: the owner's
// saves through the same catalog go on meanwhile.
func TestOwnWaitingHoldsNoSlot(t *testing.T) {
	eps := etcdtest.Start(t)
	txns := make(chan struct{}, 100)
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if strings.HasSuffix(method, "/Txn") {
				txns <- struct{}{}
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})}
	c, err := etcdcatalog.Open(cfg, etcdcatalog.WithMaxConcurrentCalls(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	sessions := make([]*concurrency.Session, 2)
	for i := range sessions {
		s, err := concurrency.NewSession(c.Client(), concurrency.WithTTL(10))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		sessions[i] = s
	}
	owner, err := c.Own(ctxT(t), "p", sessions[0])
	require.NoError(t, err)
	<-txns // the owner's claim
	waiting, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := make(chan error, 1)
	go func() {
		o, err := c.Own(waiting, "p", sessions[1])
		if err == nil {
			_ = o.Close()
		}
		next <- err
	}()
	// The second claim, refused: it waits for the owner to go.
	within(t, txns, "the second Own's claim")
	for v := int64(1); v <= 3; v++ {
		require.NoError(t, owner.Save(ctxT(t), "p", wal.KafkaID(v)))
	}
	require.NoError(t, owner.Close())
	require.NoError(t, <-next, "the waiting Own takes over once the owner lets go")
}

func TestMaxConcurrentCallsMustBePositive(t *testing.T) {
	for _, n := range []int{0, -1} {
		_, err := etcdcatalog.New(&clientv3.Client{}, etcdcatalog.WithMaxConcurrentCalls(n))
		require.ErrorIs(t, err, persistence.ErrInvalidArgument, "n=%d", n)
	}
}

// Calls waiting for a slot when the catalog closes fail with ErrClosed at
// once, as calls made after Close do, and so does the call in flight on a
// member that answers nothing: a plain save, and an owner's, whose Done
// closes with the catalog. With the caller's client, which Close leaves
// open, the call in flight ended only with its context, and with none,
// never.
func TestCallsWaitingAtCloseFail(t *testing.T) {
	for _, owns := range []bool{false, true} {
		t.Run(map[bool]string{false: "client of the caller", true: "owner"}[owns], func(t *testing.T) {
			eps := etcdtest.Start(t)
			g := newTxnGate()
			cli := gatedClient(t, eps, g)
			c, err := etcdcatalog.New(cli, etcdcatalog.WithMaxConcurrentCalls(1))
			require.NoError(t, err)
			save := c.Save
			if owns {
				s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
				save = ownGated(t, c, g, "late", s).Save
			}
			held := holdSlot(t, c, g)
			late := make(chan error, 1)
			ctx := newWaitingCtx(t)
			go func() { late <- save(ctx, "late", wal.KafkaID(1)) }()
			ctx.waitWaiting(t)

			require.NoError(t, c.Close())
			require.ErrorIs(t, within(t, late, "the waiting save to end at Close"), persistence.ErrClosed)
			require.ErrorIs(t, within(t, held, "the save in flight to end at Close"), persistence.ErrClosed)
			for _, p := range []string{"late", "held"} {
				resp, err := cli.Get(ctxT(t), checkpointKey(p))
				require.NoError(t, err)
				require.Empty(t, resp.Kvs, "save %q wrote", p)
			}
			require.Equal(t, 1, g.mostAtOnce())
		})
	}
}

// With a client of its own, Close ends the waiting calls too, before the
// client's: not one after the other as each call in flight gives up.
func TestCallsWaitingAtCloseFailWithOwnClient(t *testing.T) {
	eps := etcdtest.Start(t)
	g := newTxnGate()
	c := gatedCatalog(t, eps, g, etcdcatalog.WithMaxConcurrentCalls(1))
	held := holdSlot(t, c, g)
	const waiting = 5
	late := make(chan error, waiting)
	for i := range waiting {
		ctx := newWaitingCtx(t)
		go func() { late <- c.Save(ctx, fmt.Sprintf("late%d", i), wal.KafkaID(1)) }()
		ctx.waitWaiting(t)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for range waiting {
		require.ErrorIs(t, within(t, late, "a waiting save to end at Close"), persistence.ErrClosed)
	}
	close(g.release)
	require.ErrorIs(t, <-held, persistence.ErrClosed, "the save in flight ends at Close too")
	require.NoError(t, <-closed)
	require.Equal(t, 1, g.mostAtOnce())
}

// An owner's save waiting for a slot ends when the ownership does, fenced,
// without sending anything: here the session ends while a save of another
// pchannel holds the only slot.
func TestOwnerSaveWaitingEndsWithTheOwnership(t *testing.T) {
	eps := etcdtest.Start(t)
	g := newTxnGate()
	c := gatedCatalog(t, eps, g, etcdcatalog.WithMaxConcurrentCalls(1))
	s, err := concurrency.NewSession(c.Client(), concurrency.WithTTL(10))
	require.NoError(t, err)
	o := ownGated(t, c, g, "p", s)
	t.Cleanup(func() { _ = o.Close() })

	held := holdSlot(t, c, g)
	late := make(chan error, 1)
	ctx := newWaitingCtx(t)
	go func() { late <- o.Save(ctx, "p", wal.KafkaID(1)) }()
	ctx.waitWaiting(t)
	require.NoError(t, s.Close()) // revokes the lease: the owner key goes
	fe := requireFenced(t, within(t, late, "the waiting save to end with the ownership"))
	require.ErrorIs(t, fe.Cause, etcdcatalog.ErrSessionDone)
	close(g.release) // the held save, and the Release of o.Close
	require.NoError(t, <-held)
	require.Equal(t, 1, g.mostAtOnce())
}

// A save whose hint was stale needs a second round trip: closed during
// the first, the catalog ends it, or, should it have returned first,
// sends the second no more, and the record keeps the other writer's
// value.
func TestSecondRoundTripAfterCloseIsNotSent(t *testing.T) {
	eps := etcdtest.Start(t)
	g := newTxnGate()
	cli := gatedClient(t, eps, g)
	c, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	first := make(chan error, 1)
	go func() { first <- c.Save(ctxT(t), "p", wal.KafkaID(1)) }()
	g.waitEntered(t)
	g.release <- struct{}{}
	require.NoError(t, <-first)
	other := openCatalog(t, eps, nil)
	require.NoError(t, other.Save(ctxT(t), "p", wal.KafkaID(2))) // c's hint is stale now

	saved := make(chan error, 1)
	go func() { saved <- c.Save(ctxT(t), "p", wal.KafkaID(3)) }()
	g.waitEntered(t) // its first try, comparing with the stale value
	require.NoError(t, c.Close())
	g.releaseLast(t, saved, persistence.ErrClosed)
	got, err := other.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(2), got)
}

// A context with a cause of its own: a call that waited for a slot fails
// with both the deadline and the cause, as one that did not wait fails
// with the deadline.
func TestWaitKeepsTheDeadlineAndItsCause(t *testing.T) {
	eps := etcdtest.Start(t)
	g := newTxnGate()
	c := gatedCatalog(t, eps, g, etcdcatalog.WithMaxConcurrentCalls(1))
	held := holdSlot(t, c, g)
	budget := errors.New("budget spent")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 100*time.Millisecond, budget)
	defer cancel()
	err := c.Save(ctx, "late", wal.KafkaID(1))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, budget)
	g.release <- struct{}{}
	require.NoError(t, <-held)
}

// An owner's delete reads, then deletes: closed during the read, the
// catalog ends it, or, should it have returned first, sends the delete no
// more, and the record stays.
func TestOwnedDeleteAfterCloseIsNotSent(t *testing.T) {
	eps := etcdtest.Start(t)
	g := newTxnGate()
	cli := gatedClient(t, eps, g)
	c, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	o := ownGated(t, c, g, "p", s)
	done := make(chan error, 1)
	go func() { done <- o.Save(ctxT(t), "p", wal.KafkaID(1)) }()
	g.waitEntered(t)
	g.release <- struct{}{}
	require.NoError(t, <-done)

	go func() { done <- o.Delete(ctxT(t), "p") }()
	g.waitEntered(t) // its read
	require.NoError(t, c.Close())
	g.releaseLast(t, done, persistence.ErrClosed)
	resp, err := cli.Get(ctxT(t), checkpointKey("p"))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the record stays")
}
