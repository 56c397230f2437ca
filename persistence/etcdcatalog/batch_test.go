package etcdcatalog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/catalogtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

func openBatcher(t *testing.T, eps []string, counter *rpcCounter, opts ...etcdcatalog.BatchOption) *etcdcatalog.Batcher {
	t.Helper()
	c, err := etcdcatalog.Open(clientConfig(eps, counter))
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(c, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestBatcherContract(t *testing.T) {
	eps := etcdtest.Start(t)
	var n atomic.Int64
	catalogtest.Run(t, func(t *testing.T) persistence.Catalog {
		c, err := etcdcatalog.Open(clientConfig(eps, nil), etcdcatalog.WithPrefix(fmt.Sprintf("batch-contract-%d", n.Add(1))))
		require.NoError(t, err)
		b, err := etcdcatalog.NewBatcher(c, etcdcatalog.WithMaxBatch(3))
		require.NoError(t, err)
		return b
	})
}

// Two Batchers on one prefix, as two nodes have them: each batch compares
// every key it writes with the store, not with what its Batcher saved.
func TestBatcherSharedContract(t *testing.T) {
	eps := etcdtest.Start(t)
	var n atomic.Int64
	catalogtest.RunShared(t, func(t *testing.T) (persistence.Catalog, persistence.Catalog) {
		prefix := etcdcatalog.WithPrefix(fmt.Sprintf("batch-shared-%d", n.Add(1)))
		var pair [2]persistence.Catalog
		for i := range pair {
			c, err := etcdcatalog.Open(clientConfig(eps, nil), prefix)
			require.NoError(t, err)
			b, err := etcdcatalog.NewBatcher(c, etcdcatalog.WithMaxBatch(3))
			require.NoError(t, err)
			pair[i] = b
		}
		return pair[0], pair[1]
	})
}

// A stale compare of one key fails the batch transaction as a whole; each
// save is then decided on its own, so the key that another writer moved
// ahead is refused and the others are stored.
func TestBatcherDecidesEachKeyWhenOneCompareFails(t *testing.T) {
	eps := etcdtest.Start(t)
	b := openBatcher(t, eps, nil)
	other := openCatalog(t, eps, nil)
	ctx := ctxT(t)
	for _, p := range []string{"a", "b", "c"} {
		require.NoError(t, b.Save(ctx, p, wal.KafkaID(10)))
	}
	require.NoError(t, other.Save(ctx, "a", wal.KafkaID(30))) // b's view of "a" is now stale

	got := etcdcatalog.CommitBatch(ctx, b, map[string]wal.MessageID{"a": wal.KafkaID(20), "b": wal.KafkaID(20), "c": wal.KafkaID(10)})
	var ahead *persistence.StoredAheadError
	require.ErrorAs(t, got["a"], &ahead)
	require.Equal(t, persistence.StoredAheadError{PChannel: "a", Stored: wal.KafkaID(30), Attempted: wal.KafkaID(20)}, *ahead)
	require.NoError(t, got["b"])
	require.NoError(t, got["c"], "an equal value succeeds")

	// With "a" stale again but below the new value, every save succeeds.
	require.NoError(t, other.Save(ctx, "a", wal.KafkaID(35)))
	got = etcdcatalog.CommitBatch(ctx, b, map[string]wal.MessageID{"a": wal.KafkaID(40), "b": wal.KafkaID(40)})
	require.Equal(t, map[string]error{"a": nil, "b": nil}, got)

	all, err := other.LoadAll(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(40), "b": wal.KafkaID(40), "c": wal.KafkaID(10)}, all)
}

// Concurrent saves of many pchannels share transactions, and every
// pchannel ends at its last value, having only risen.
func TestBatcherSharesTransactions(t *testing.T) {
	const pchannels, rounds = 200, 5
	eps := etcdtest.Start(t)
	counter := &rpcCounter{}
	b := openBatcher(t, eps, counter, etcdcatalog.WithMaxInFlight(2))
	cli := newClient(t, eps)
	from := currentRevision(t, cli) + 1
	ctx := ctxT(t)
	counter.take()
	var wg sync.WaitGroup
	errs := make(chan error, pchannels*rounds)
	for i := range pchannels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 1; r <= rounds; r++ {
				errs <- b.Save(ctx, fmt.Sprintf("p%03d", i), wal.KafkaID(r))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	txns := counter.take()["Txn"]
	require.Less(t, txns, pchannels*rounds/2, "saves share transactions")
	t.Logf("%d saves in %d transactions", pchannels*rounds, txns)

	all, err := b.LoadAll(ctx)
	require.NoError(t, err)
	require.Len(t, all, pchannels)
	for p, cp := range all {
		require.Equal(t, wal.KafkaID(rounds), cp, p)
	}
	_, to := rawRecord(t, cli, checkpointKey("p007"))
	requireIncreasing(t, history(t, cli, checkpointKey("p007"), from, to))
}

func TestNewBatcherRejectsInvalidOptions(t *testing.T) {
	eps := etcdtest.Start(t)
	c := openCatalog(t, eps, nil)
	for _, opt := range []etcdcatalog.BatchOption{
		etcdcatalog.WithMaxBatch(0), etcdcatalog.WithMaxBatchBytes(0), etcdcatalog.WithMaxInFlight(0), etcdcatalog.WithBatchTimeout(0),
		nil, // refused, as every constructor of the project refuses one
	} {
		b, err := etcdcatalog.NewBatcher(c, opt)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument)
		require.Nil(t, b)
	}
	b, err := etcdcatalog.NewBatcher(nil)
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	require.Nil(t, b)
}

// TestBatcherCloseWithEtcdDown: a save whose caller's context has no
// deadline, with etcd down, held Close until etcd came back. Close waits
// the batch timeout at most, then ends it: the save returns ErrClosed.
func TestBatcherCloseWithEtcdDown(t *testing.T) {
	srv := etcdtest.StartServer(t)
	cfg := clientConfig(srv.Endpoints(), nil)
	// calls tells when a save's call to etcd has begun, once it is down.
	var down atomic.Bool
	calls := make(chan struct{}, 16)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if down.Load() {
			select {
			case calls <- struct{}{}:
			default:
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})}
	c, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	const grace = 300 * time.Millisecond
	b, err := etcdcatalog.NewBatcher(c, etcdcatalog.WithBatchTimeout(grace))
	require.NoError(t, err)
	// Two saves go out in transactions of the Batcher's; an equal one
	// through Save, which reads the key again.
	pchannels := []string{"k1", "k2", "equal"}
	want := map[string]wal.MessageID{"k1": wal.KafkaID(2), "k2": wal.KafkaID(2), "equal": wal.KafkaID(1)}
	for _, p := range pchannels {
		require.NoError(t, b.Save(ctxT(t), p, wal.KafkaID(1)))
	}
	srv.Stop()
	down.Store(true)

	type outcome struct {
		pchannel string
		err      error
	}
	saved := make(chan outcome, len(pchannels))
	for _, p := range pchannels {
		go func() { saved <- outcome{p, b.Save(context.Background(), p, want[p])} }()
	}
	for range 2 { // a transaction at least, and the equal save's read
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("the saves did not reach etcd's client")
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * grace):
		t.Fatalf("Close still waits %v after etcd went down", 10*grace)
	}
	for range pchannels {
		select {
		case o := <-saved:
			// Close's end (ErrClosed), the batch's own timeout, or the
			// connection that broke as etcd went down: an error, never
			// nil, and never a wait on etcd.
			require.Error(t, o.err, o.pchannel)
		case <-time.After(10 * grace):
			t.Fatal("a save still waits after Close returned")
		}
	}
}

// A batch transaction that fails while Close waits for it, on its own
// timeout say, fails its saves with persistence.ErrClosed too, as one
// that Close's grace ends does: nothing is saved through the Batcher
// again. Its callers got only "context deadline exceeded", and tried
// once more.
func TestBatcherTransactionFailingDuringCloseSaysClosed(t *testing.T) {
	eps := etcdtest.Start(t)
	// Once hold is set, each Txn is held until the test tells it how to
	// end, through the channel it sends on entered.
	var hold atomic.Bool
	entered := make(chan chan error, 2)
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !hold.Load() || !strings.HasSuffix(method, "/Txn") {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		end := make(chan error, 1)
		entered <- end
		select {
		case err := <-end:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	})}
	c, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(c, etcdcatalog.WithBatchTimeout(time.Minute)) // never reached
	require.NoError(t, err)
	for _, p := range []string{"a", "b", "c"} { // known: a and b go out together
		require.NoError(t, b.Save(ctxT(t), p, wal.KafkaID(1)))
	}
	hold.Store(true)
	batch := make(chan map[string]error, 1)
	go func() {
		batch <- etcdcatalog.CommitBatch(context.Background(), b, map[string]wal.MessageID{"a": wal.KafkaID(2), "b": wal.KafkaID(2)})
	}()
	endBatch := within(t, entered, "the batch transaction to reach etcd")
	held := make(chan error, 1)
	go func() { held <- b.Save(context.Background(), "c", wal.KafkaID(2)) }()
	endHeld := within(t, entered, "a save Close waits for to reach etcd")
	closed := beginClose(t, b)
	endBatch <- context.DeadlineExceeded
	for p, err := range within(t, batch, "the transaction to fail") {
		require.ErrorIs(t, err, persistence.ErrClosed, p)
		require.ErrorIs(t, err, context.DeadlineExceeded, p)
		// One shape, whichever way the save went: closed, then why.
		require.Equal(t, fmt.Sprintf("persistence: catalog closed: etcdcatalog: save %q: context deadline exceeded", p), err.Error())
	}
	endHeld <- errors.New("the member is gone")
	err = within(t, held, "the save Close waited for to end")
	require.ErrorIs(t, err, persistence.ErrClosed)
	require.Equal(t, `persistence: catalog closed: etcdcatalog: save "c": the member is gone`, err.Error())
	require.NoError(t, within(t, closed, "Close to return"))
}

// The Catalog closed under a Batcher (by its owner, rather than through
// the Batcher's Close) ends the Batcher as its own Close does: the saves
// under way and every save after fail with persistence.ErrClosed at once.
// They failed each at its deadline, and the actors retried them for good.
func TestBatcherEndsWithItsCatalog(t *testing.T) {
	eps := etcdtest.Start(t)
	c, err := etcdcatalog.Open(clientConfig(eps, nil))
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(c)
	require.NoError(t, err)
	const writers = 50
	for i := range writers { // known keys: the next saves go in batches
		require.NoError(t, b.Save(ctxT(t), fmt.Sprintf("p%d", i), wal.KafkaID(1)))
	}
	stop := make(chan struct{})
	errs := make(chan error, writers)
	var saved atomic.Int64
	for i := range writers {
		go func() {
			for n := int64(2); ; n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := b.Save(ctx, fmt.Sprintf("p%d", i), wal.KafkaID(n))
				cancel()
				if err == nil {
					saved.Add(1)
				}
				select {
				case <-stop:
					errs <- err
					return
				default:
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// Closed with saves under way: once each writer has saved a few times.
	require.Eventually(t, func() bool { return saved.Load() >= 4*writers }, 10*time.Second, time.Millisecond)
	close(stop)
	require.NoError(t, c.Close())
	for range writers {
		select {
		case err := <-errs:
			if err != nil {
				require.ErrorIs(t, err, persistence.ErrClosed)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("a save under way did not end within 2 s of the close")
		}
	}
	began := time.Now()
	require.ErrorIs(t, b.Save(ctxT(t), "p0", wal.KafkaID(1000)), persistence.ErrClosed)
	require.ErrorIs(t, b.Save(ctxT(t), "new", wal.KafkaID(1)), persistence.ErrClosed)
	require.Less(t, time.Since(began), time.Second)
	require.ErrorIs(t, b.Close(), persistence.ErrClosed)
}

// A batch bound above what the cluster takes a transaction (etcd's
// --max-txn-ops, 128 by default) costs a few round trips, not saves, nor a
// transaction a save: a transaction etcd refuses goes out again as smaller
// ones, and the bound settles at the most etcd takes. Every such save
// failed once, and the actors retried them for good; then each refused
// batch was saved key by key, and the bound halved for good.
func TestBatcherTooLargeForTheClusterStillSaves(t *testing.T) {
	const n, clusterMax = 400, 128 // etcd's default --max-txn-ops
	eps := etcdtest.Start(t)
	var counter rpcCounter
	b := openBatcher(t, eps, &counter, etcdcatalog.WithMaxBatch(100_000))
	name := func(i int) string { return fmt.Sprintf("p%d", i) }
	for i := range n { // known keys: the next saves go in batches
		require.NoError(t, b.Save(ctxT(t), name(i), wal.KafkaID(1)))
	}
	for round := int64(2); round <= 3; round++ {
		counter.take()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- b.Save(ctxT(t), name(i), wal.KafkaID(round))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "round %d", round)
		}
		txns := counter.take()["Txn"]
		require.Less(t, txns, n/10, "round %d: %d transactions for %d saves", round, txns, n)
	}

	// All n in one batch, as if they had queued together: split into
	// transactions of the bound, which, learnt, is etcd's limit exactly.
	for round := int64(4); round <= 6; round++ {
		saves := make(map[string]wal.MessageID, n)
		for i := range n {
			saves[name(i)] = wal.KafkaID(round)
		}
		counter.take()
		for p, err := range etcdcatalog.CommitBatch(ctxT(t), b, saves) {
			require.NoError(t, err, "round %d, %s", round, p)
		}
		txns := counter.take()["Txn"]
		bound, _ := etcdcatalog.Bounds(b)
		t.Logf("round %d: %d transactions, bound %d", round, txns, bound)
		if round == 6 {
			require.Equal(t, clusterMax, bound)
			require.Equal(t, (n+clusterMax-1)/clusterMax, txns)
		}
	}
	all, err := b.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Len(t, all, n)
	for p, v := range all {
		require.Equal(t, wal.KafkaID(6), v, p)
	}
}

// A stale key costs its batch one more transaction, not a transaction a
// save: the saves are judged on the records the failed transaction read,
// and those still to write go out together again, the key that went
// created among them.
func TestBatcherRetriesTogetherWhatAStaleKeyHeldBack(t *testing.T) {
	const n = 30
	eps := etcdtest.Start(t)
	var counter rpcCounter
	b := openBatcher(t, eps, &counter)
	other := openCatalog(t, eps, nil)
	ctx := ctxT(t)
	name := func(i int) string { return fmt.Sprintf("p%02d", i) }
	for i := range n {
		require.NoError(t, b.Save(ctx, name(i), wal.KafkaID(10)))
	}
	require.NoError(t, other.Save(ctx, name(0), wal.KafkaID(30))) // ahead of the batch
	require.NoError(t, other.Save(ctx, name(1), wal.KafkaID(15))) // moved, still below it
	require.NoError(t, other.Delete(ctx, name(2)))                // gone

	saves := make(map[string]wal.MessageID, n)
	for i := range n {
		saves[name(i)] = wal.KafkaID(20)
	}
	counter.take()
	got := etcdcatalog.CommitBatch(ctx, b, saves)
	// The failed transaction and the one of the 29 still to write; the
	// key ahead is answered on what the failed transaction read.
	require.Equal(t, map[string]int{"Txn": 2}, counter.take())
	requireSavedBut(t, other, got, name(0), wal.KafkaID(30), wal.KafkaID(20))
}

// requireSavedBut checks the answers got to a batch of saves of want, and
// what c reads back, after another writer moved one key, ahead, to
// stored, above want: that save refused as stored ahead, every other one
// stored.
func requireSavedBut(t *testing.T, c persistence.Catalog, got map[string]error, ahead string, stored, want wal.MessageID) {
	t.Helper()
	var aheadErr *persistence.StoredAheadError
	require.ErrorAs(t, got[ahead], &aheadErr)
	require.Equal(t, persistence.StoredAheadError{PChannel: ahead, Stored: stored, Attempted: want}, *aheadErr)
	all, err := c.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Len(t, all, len(got))
	for p, err := range got {
		if p != ahead {
			require.NoError(t, err, p)
			require.Equal(t, want, all[p], p)
		}
	}
}

// The first saves of keys the Batcher knows nothing of share a
// transaction too, whether the keys exist or not: it creates the absent
// ones, and a key that exists fails that transaction's compare and is
// judged on the record read, as a stale key is. Each went through a Save
// of its own, and a key that existed cost it two round trips.
func TestBatcherCreatesKeysTogether(t *testing.T) {
	const n = 30
	eps := etcdtest.Start(t)
	var counter rpcCounter
	b := openBatcher(t, eps, &counter)
	other := openCatalog(t, eps, nil)
	ctx := ctxT(t)
	name := func(i int) string { return fmt.Sprintf("p%02d", i) }
	require.NoError(t, other.Save(ctx, name(0), wal.KafkaID(30))) // ahead of the batch
	require.NoError(t, other.Save(ctx, name(1), wal.KafkaID(20))) // equal
	require.NoError(t, other.Save(ctx, name(2), wal.KafkaID(15))) // below

	saves := make(map[string]wal.MessageID, n)
	for i := range n {
		saves[name(i)] = wal.KafkaID(20)
	}
	counter.take()
	got := etcdcatalog.CommitBatch(ctx, b, saves)
	// The failed transaction and the one of the 28 still to write.
	require.Equal(t, map[string]int{"Txn": 2}, counter.take())
	requireSavedBut(t, other, got, name(0), wal.KafkaID(30), wal.KafkaID(20))

	// Known now: the next saves go in one transaction.
	for i := range n {
		saves[name(i)] = wal.KafkaID(40)
	}
	got = etcdcatalog.CommitBatch(ctx, b, saves)
	require.Equal(t, map[string]int{"Txn": 1}, counter.take())
	for p, err := range got {
		require.NoError(t, err, p)
	}
}

// A save the Batcher hands to Catalog.Save on its own (here one it knows
// to be equal to what is stored, which Save confirms on a fresh read)
// holds no commit loop: the saves of other pchannels go on while it waits
// on etcd. A loop that waited for it held its place among WithMaxInFlight,
// and for a caller with no deadline, every save of every pchannel behind
// it for as long as etcd kept it.
func TestBatcherSaveAloneHoldsNoCommitLoop(t *testing.T) {
	eps := etcdtest.Start(t)
	cfg, held, release := holdingTxns(eps, func(txn *etcdserverpb.TxnRequest) bool {
		return isRead(txn, "/stuck/")
	})
	c, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(c, etcdcatalog.WithMaxInFlight(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	for _, p := range []string{"a", "b", "stuck"} {
		require.NoError(t, b.Save(ctxT(t), p, wal.KafkaID(1)))
	}

	stuck := make(chan error, 1)
	go func() { stuck <- b.Save(context.Background(), "stuck", wal.KafkaID(1)) }()
	within(t, held, "the save of stuck to reach etcd")
	for r := wal.KafkaID(2); r <= 4; r++ {
		var wg sync.WaitGroup
		for _, p := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, b.Save(ctxT(t), p, r), "%s at %v", p, r)
			}()
		}
		wg.Wait()
	}
	close(release)
	require.NoError(t, within(t, stuck, "the save of stuck once let go"))
	all, err := b.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(4), "b": wal.KafkaID(4), "stuck": wal.KafkaID(1)}, all)
}

// An answer of what etcd holds (here, a value ahead) that comes while the
// Batcher closes is not said to be ErrClosed: a caller that asks
// ErrClosed first took it for a shutdown, and retried nothing it could
// have learnt from.
func TestBatcherAnswerDuringCloseIsNotClosed(t *testing.T) {
	eps := etcdtest.Start(t)
	cfg, entered, release := holdingTxns(eps, func(txn *etcdserverpb.TxnRequest) bool { return isRead(txn, "/a/") })
	c, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(c, etcdcatalog.WithBatchTimeout(time.Minute)) // never reached
	require.NoError(t, err)
	require.NoError(t, b.Save(ctxT(t), "a", wal.KafkaID(9)))
	saved := make(chan error, 1)
	// Known to be ahead: Save's, which reads "a" again to answer.
	go func() { saved <- b.Save(context.Background(), "a", wal.KafkaID(5)) }()
	within(t, entered, "the save to reach etcd")
	closed := beginClose(t, b)
	close(release)
	err = within(t, saved, "the save to be answered")
	var ahead *persistence.StoredAheadError
	require.ErrorAs(t, err, &ahead)
	require.Equal(t, persistence.StoredAheadError{PChannel: "a", Stored: wal.KafkaID(9), Attempted: wal.KafkaID(5)}, *ahead)
	require.NotErrorIs(t, err, persistence.ErrClosed)
	require.NoError(t, within(t, closed, "Close to return"))
}

// isRead tells whether txn is a read of a record whose key contains part
// (and, for an owner's save, of its owner key), as Catalog.Save reads a
// record before refusing or skipping a save.
func isRead(txn *etcdserverpb.TxnRequest, part string) bool {
	return len(txn.Compare) == 0 && len(txn.Success) > 0 &&
		bytes.Contains(txn.Success[0].GetRequestRange().GetKey(), []byte(part))
}

// holdingTxns is a client configuration whose Txns that hold picks wait,
// each told on entered, until release is closed or their context ends.
func holdingTxns(eps []string, hold func(*etcdserverpb.TxnRequest) bool) (cfg clientv3.Config, entered <-chan struct{}, release chan struct{}) {
	in, release := make(chan struct{}, 1), make(chan struct{})
	cfg = clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*etcdserverpb.TxnRequest); ok && hold(txn) {
			in <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})}
	return cfg, in, release
}

// beginClose starts b's Close, returns once it has begun (a save is
// refused as closed), and gives Close's result on the channel.
func beginClose(t *testing.T, b *etcdcatalog.Batcher) <-chan error {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for deadline := time.Now().Add(callTimeout); !errors.Is(b.Save(gone, "probe", wal.KafkaID(1)), persistence.ErrClosed); runtime.Gosched() {
		require.False(t, time.Now().After(deadline), "Close did not begin")
	}
	return closed
}

// A key whose record cannot be decoded fails the compare of every batch it
// joins; once a batch has read it so, its saves go to Catalog.Save on
// their own, and the others of their batches go out in one transaction,
// until the Catalog sees another record there.
func TestBatcherSendsAnUndecodableKeyAlone(t *testing.T) {
	const n = 10
	eps := etcdtest.Start(t)
	// txns counts the transactions that write "p0"'s key, in a batch.
	var txns atomic.Int64
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*etcdserverpb.TxnRequest); ok && len(txn.Success) > 1 &&
			slices.ContainsFunc(txn.Success, func(op *etcdserverpb.RequestOp) bool {
				return string(op.GetRequestPut().GetKey()) == checkpointKey("p0")
			}) {
			txns.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})}
	c, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	cli := newClient(t, eps)
	names := []string{"bad"}
	for i := range n {
		names = append(names, fmt.Sprintf("p%d", i))
	}
	for _, p := range names {
		require.NoError(t, b.Save(ctxT(t), p, wal.KafkaID(1)))
	}
	_, err = cli.Put(ctxT(t), checkpointKey("bad"), "not a record")
	require.NoError(t, err)

	// commit saves every pchannel at v in one batch, and returns the
	// answers and how many transactions wrote "p0".
	commit := func(v wal.MessageID) (map[string]error, int64) {
		saves := make(map[string]wal.MessageID, len(names))
		for _, p := range names {
			saves[p] = v
		}
		txns.Store(0)
		got := etcdcatalog.CommitBatch(ctxT(t), b, saves)
		for _, p := range names[1:] {
			require.NoError(t, got[p], p)
		}
		return got, txns.Load()
	}
	for v, want := range []int64{2, 1, 1} { // found undecodable, then alone
		got, txns := commit(wal.KafkaID(2 + v))
		require.ErrorIs(t, got["bad"], persistence.ErrCorruptRecord, "round %d", v)
		require.Equal(t, want, txns, "round %d: transactions of the others", v)
	}

	// Repaired: Save, on its own once more, reads the new record, and the
	// next batch takes it in.
	raw, err := persistence.EncodeRecord("bad", persistence.Record{Checkpoint: wal.KafkaID(1)})
	require.NoError(t, err)
	_, err = cli.Put(ctxT(t), checkpointKey("bad"), string(raw))
	require.NoError(t, err)
	for v := range 2 {
		got, txns := commit(wal.KafkaID(5 + v))
		require.NoError(t, got["bad"], "round %d", v)
		require.Equal(t, int64(1), txns, "round %d", v)
	}
	all, err := b.LoadAll(ctxT(t))
	require.NoError(t, err)
	for _, p := range names {
		require.Equal(t, wal.KafkaID(6), all[p], p)
	}
}

// TestBatcherSaveEndedByItsContextNamesThePChannel: a save whose context
// ends while etcd answers nothing fails with an error wrapping the
// context's that names the pchannel, as Catalog.Save's does; the bare
// deadline told, in a log of thousands of pchannels, neither which nor
// where.
func TestBatcherSaveEndedByItsContextNamesThePChannel(t *testing.T) {
	eps := etcdtest.Start(t)
	f := etcdtest.NewFreezer(t, strings.TrimPrefix(eps[0], "http://"))
	c := openCatalog(t, []string{f.Endpoint()}, nil)
	b, err := etcdcatalog.NewBatcher(c, etcdcatalog.WithBatchTimeout(100*time.Millisecond))
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Save(ctxT(t), "p-7", wal.KafkaID(1)))
	f.Freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = b.Save(ctx, "p-7", wal.KafkaID(2))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `etcdcatalog: save "p-7"`)
	err = b.Save(ctx, "p-7", wal.KafkaID(3)) // ended before it is queued
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `etcdcatalog: save "p-7"`)
}
