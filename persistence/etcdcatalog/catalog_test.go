package etcdcatalog_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/catalogtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

func TestContract(t *testing.T) {
	eps := etcdtest.Start(t)
	var n atomic.Int64
	catalogtest.Run(t, func(t *testing.T) persistence.Catalog {
		// A fresh prefix is a fresh, empty catalog on the shared server.
		c, err := etcdcatalog.Open(clientConfig(eps, nil), etcdcatalog.WithPrefix(fmt.Sprintf("contract-%d", n.Add(1))))
		require.NoError(t, err)
		return c
	})
}

// Two catalogs on one prefix, as two nodes have them, each with a client
// of its own.
func TestSharedContract(t *testing.T) {
	eps := etcdtest.Start(t)
	var n atomic.Int64
	catalogtest.RunShared(t, func(t *testing.T) (persistence.Catalog, persistence.Catalog) {
		prefix := etcdcatalog.WithPrefix(fmt.Sprintf("shared-%d", n.Add(1)))
		a, err := etcdcatalog.Open(clientConfig(eps, nil), prefix)
		require.NoError(t, err)
		b, err := etcdcatalog.Open(clientConfig(eps, nil), prefix)
		require.NoError(t, err)
		return a, b
	})
}

func TestOptionsAreValidated(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	for _, opt := range []etcdcatalog.Option{
		etcdcatalog.WithPrefix(""),
		etcdcatalog.WithPrefix("lowwater/"),
		etcdcatalog.WithPrefix("lowwater/wal/tenant-b"), // among lowwater's pchannels
		etcdcatalog.WithPrefix("lowwater/wal"),
		etcdcatalog.WithPageSize(0),
		etcdcatalog.WithPageSize(-1),
		nil, // refused, as every constructor of the project refuses one
	} {
		c, err := etcdcatalog.New(cli, opt)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument)
		require.Nil(t, c)
		c, err = etcdcatalog.Open(clientConfig(eps, nil), opt)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument)
		require.Nil(t, c)
	}
	c, err := etcdcatalog.New(nil)
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	require.Nil(t, c)
}

func TestKeyLayoutAndPrefixes(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	def := openCatalog(t, eps, nil)
	other := openCatalog(t, eps, nil, etcdcatalog.WithPrefix("tenant-a/lowwater"))
	ctx := ctxT(t)

	require.NoError(t, def.Save(ctx, "dml_0", wal.KafkaID(7)))
	require.NoError(t, other.Save(ctx, "dml_0", wal.KafkaID(9)))

	rec, _ := rawRecord(t, cli, "lowwater/wal/dml_0/consume-checkpoint")
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(7), Term: 0}, rec)
	rec, _ = rawRecord(t, cli, "tenant-a/lowwater/wal/dml_0/consume-checkpoint")
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(9), Term: 0}, rec)

	all, err := def.LoadAll(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"dml_0": wal.KafkaID(7)}, all)
	all, err = other.LoadAll(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"dml_0": wal.KafkaID(9)}, all)
}

func TestNewLeavesTheClientOpen(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	c, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	require.Same(t, cli, c.Client())
	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(1)))
	require.NoError(t, c.Close())
	require.ErrorIs(t, c.Close(), persistence.ErrClosed)
	_, err = cli.Get(ctxT(t), "k")
	require.NoError(t, err)
}

func TestSaveCompareAndSwap(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	c := openCatalog(t, eps, nil)
	ctx := ctxT(t)
	key := checkpointKey("p")

	// Absent: created.
	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(10)))
	rec, created := rawRecord(t, cli, key)
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(10)}, rec)

	// Equal: succeeds and writes nothing.
	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(10)))
	_, rev := rawRecord(t, cli, key)
	require.Equal(t, created, rev)

	// Lower: refused with the winning value, nothing written.
	err := c.Save(ctx, "p", wal.KafkaID(9))
	var ahead *persistence.StoredAheadError
	require.ErrorAs(t, err, &ahead)
	require.ErrorIs(t, err, persistence.ErrStoredAhead)
	require.Equal(t, persistence.StoredAheadError{PChannel: "p", Stored: wal.KafkaID(10), Attempted: wal.KafkaID(9)}, *ahead)
	_, rev = rawRecord(t, cli, key)
	require.Equal(t, created, rev)

	// Higher: stored.
	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(11)))
	rec, rev = rawRecord(t, cli, key)
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(11)}, rec)
	require.Greater(t, rev, created)

	// Another WAL: refused, nothing written.
	err = c.Save(ctx, "p", wal.RocksMQID(50))
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	require.ErrorIs(t, err, wal.ErrWALMismatch)
	rec, _ = rawRecord(t, cli, key)
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(11)}, rec)

	got, err := c.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(11), got)
}

// TestSaveRoundTrips counts requests: with the revision remembered, a save is
// one transaction; when another writer moved the record, two.
func TestSaveRoundTrips(t *testing.T) {
	eps := etcdtest.Start(t)
	var calls rpcCounter
	c := openCatalog(t, eps, &calls)
	other := openCatalog(t, eps, nil)
	ctx := ctxT(t)

	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(1)))
	require.Equal(t, map[string]int{"Txn": 1}, calls.take(), "create")
	for i := 2; i <= 5; i++ {
		require.NoError(t, c.Save(ctx, "p", wal.KafkaID(i)))
		require.Equal(t, map[string]int{"Txn": 1}, calls.take(), "save %d", i)
	}

	require.NoError(t, other.Save(ctx, "p", wal.KafkaID(6)))
	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(7)))
	require.Equal(t, map[string]int{"Txn": 2}, calls.take(), "save after another writer")

	require.NoError(t, other.Save(ctx, "p", wal.KafkaID(8)))
	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(8)))
	require.Equal(t, map[string]int{"Txn": 1}, calls.take(), "equal save after another writer")

	// A Load remembers the revision, so a recovering writer saves in one.
	fresh := openCatalog(t, eps, &calls)
	got, err := fresh.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(8), got)
	require.NoError(t, fresh.Save(ctx, "p", wal.KafkaID(9)))
	require.Equal(t, map[string]int{"Range": 1, "Txn": 1}, calls.take(), "load then save")
}

// The hints are bounded: pchannels come and go, and a forgotten hint
// costs its next save one more round trip, never a wrong save.
func TestHintsAreBounded(t *testing.T) {
	eps := etcdtest.Start(t)
	var calls rpcCounter
	c := openCatalog(t, eps, &calls)
	etcdcatalog.SetHintCap(c, 3)
	ctx := ctxT(t)
	for i := range 10 {
		require.NoError(t, c.Save(ctx, fmt.Sprintf("p%d", i), wal.KafkaID(1)))
		require.LessOrEqual(t, etcdcatalog.Hints(c), 3)
	}
	calls.take()
	for i := range 10 {
		require.NoError(t, c.Save(ctx, fmt.Sprintf("p%d", i), wal.KafkaID(2)))
	}
	txns := calls.take()["Txn"]
	require.Equal(t, 3, etcdcatalog.Hints(c))
	require.GreaterOrEqual(t, txns, 10+7, "the seven saves without a hint take a second round trip")
	all, err := c.LoadAll(ctx)
	require.NoError(t, err)
	require.Len(t, all, 10)
	for p, v := range all {
		require.Equal(t, wal.KafkaID(2), v, p)
	}
}

func TestCorruptRecordIsReported(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	c := openCatalog(t, eps, nil)
	ctx := ctxT(t)
	require.NoError(t, c.Save(ctx, "good", wal.KafkaID(1)))
	_, err := cli.Put(ctx, checkpointKey("bad"), "not a record")
	require.NoError(t, err)

	var corrupt *persistence.CorruptRecordError
	_, err = c.Load(ctx, "bad")
	require.ErrorAs(t, err, &corrupt)
	require.Equal(t, "bad", corrupt.PChannel)
	// The key and what mends it, for the node's log, where it is retried.
	located := fmt.Sprintf(", under key %q (lowwater verify says how to repair it)", checkpointKey("bad"))
	require.True(t, strings.HasSuffix(err.Error(), located), "%v ends %q", err, located)

	err = c.Save(ctx, "bad", wal.KafkaID(2))
	require.ErrorIs(t, err, persistence.ErrCorruptRecord)
	require.True(t, strings.HasSuffix(err.Error(), located), "%v ends %q", err, located)
	resp, err := cli.Get(ctx, checkpointKey("bad"))
	require.NoError(t, err)
	require.Equal(t, "not a record", string(resp.Kvs[0].Value), "a corrupt record is kept")

	all, err := c.LoadAll(ctx)
	require.ErrorAs(t, err, &corrupt)
	require.Equal(t, "bad", corrupt.PChannel)
	require.True(t, strings.HasSuffix(err.Error(), located), "%v ends %q", err, located)
	require.Nil(t, all)
}

// TestRacingWritersNeverDecrease races two writers, each with its own client,
// saving interleaved increasing values on one pchannel, and reads back every
// value the key ever held through a watch: the history is exactly the
// acknowledged values, in increasing order.
func TestRacingWritersNeverDecrease(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	writers := []*etcdcatalog.Catalog{openCatalog(t, eps, nil), openCatalog(t, eps, nil)}
	from := currentRevision(t, cli) + 1

	const perWriter = 150
	var (
		mu      sync.Mutex
		acked   []wal.MessageID
		refused int
		wg      sync.WaitGroup
	)
	for w, c := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			v := int64(0)
			for range perWriter {
				// Writer 0 saves even values, writer 1 odd ones, each
				// rising by a random step, so they keep overtaking each
				// other and no value is offered twice.
				v += 2 * (1 + rng.Int64N(3))
				id := wal.KafkaID(v + int64(w))
				err := c.Save(context.Background(), "p", id)
				var ahead *persistence.StoredAheadError
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, id)
				case errors.As(err, &ahead):
					refused++
					if !id.LT(ahead.Stored) {
						t.Errorf("Save(%s) refused by %s", id, ahead.Stored)
					}
				default:
					t.Errorf("Save(%s) = %v", id, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()

	sort.Slice(acked, func(i, j int) bool { return acked[i].LT(acked[j]) })
	final, to := rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, acked[len(acked)-1], final.Checkpoint)
	got := history(t, cli, checkpointKey("p"), from, to)
	requireIncreasing(t, got)
	require.Equal(t, acked, got)
	require.Equal(t, 2*perWriter, len(acked)+refused)
	t.Logf("%d saves acknowledged, %d refused as stored ahead", len(acked), refused)
}

func TestLoadAllThousandPChannels(t *testing.T) {
	eps := etcdtest.Start(t)
	var calls rpcCounter
	c := openCatalog(t, eps, &calls)
	writer := openCatalog(t, eps, nil)
	cli := newClient(t, eps)

	const n = 1000
	want := make(map[string]wal.MessageID, n)
	for i := range n {
		want[fmt.Sprintf("by-dev-rootcoord-dml_%04d", i)] = wal.KafkaID(int64(i) * 3)
	}
	saveAll(t, writer, want)
	// Owner keys live beside checkpoints and are not pchannels.
	_, err := cli.Put(ctxT(t), ownerKey("by-dev-rootcoord-dml_0001"), "x")
	require.NoError(t, err)
	calls.take()

	start := time.Now()
	all, err := c.LoadAll(ctxT(t))
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, want, all)
	require.Equal(t, map[string]int{"Range": 1}, calls.take(), "one round trip")
	t.Logf("LoadAll of %d pchannels: %v", n, took)
}

// saveAll saves every checkpoint of want, a few at a time.
func saveAll(t testing.TB, c *etcdcatalog.Catalog, want map[string]wal.MessageID) {
	t.Helper()
	work := make(chan string)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pchannel := range work {
				if err := c.Save(context.Background(), pchannel, want[pchannel]); err != nil {
					t.Errorf("Save(%q) = %v", pchannel, err)
				}
			}
		}()
	}
	for pchannel := range want {
		work <- pchannel
	}
	close(work)
	wg.Wait()
}

func TestLoadAllPages(t *testing.T) {
	eps := etcdtest.Start(t)
	var calls rpcCounter
	c := openCatalog(t, eps, &calls, etcdcatalog.WithPageSize(7))
	writer := openCatalog(t, eps, nil)
	cli := newClient(t, eps)

	want := make(map[string]wal.MessageID, 50)
	for i := range 50 {
		want[fmt.Sprintf("p%02d", i)] = wal.KafkaID(i)
	}
	saveAll(t, writer, want)
	for _, p := range []string{"p03", "p20"} {
		_, err := cli.Put(ctxT(t), ownerKey(p), "x")
		require.NoError(t, err)
	}
	calls.take()

	all, err := c.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, want, all)
	require.Equal(t, map[string]int{"Range": 8}, calls.take(), "52 keys in pages of 7")

	t.Run("OneSnapshot", func(t *testing.T) {
		// Writes between pages, ahead of and behind the read, are not seen.
		etcdcatalog.SetAfterPage(c, func(page int) {
			if page == 0 {
				require.NoError(t, writer.Save(context.Background(), "p00", wal.KafkaID(100)))
				require.NoError(t, writer.Save(context.Background(), "p45", wal.KafkaID(145)))
				require.NoError(t, writer.Save(context.Background(), "p99", wal.KafkaID(199)))
			}
		})
		defer etcdcatalog.SetAfterPage(c, nil)
		all, err := c.LoadAll(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, want, all)
	})

	t.Run("CompactedBetweenPages", func(t *testing.T) {
		// The pinned revision compacted away: the read starts over and
		// sees the state at its new revision.
		var once sync.Once
		etcdcatalog.SetAfterPage(c, func(int) {
			once.Do(func() {
				require.NoError(t, writer.Save(context.Background(), "p46", wal.KafkaID(146)))
				_, err := cli.Compact(context.Background(), currentRevision(t, cli))
				require.NoError(t, err)
			})
		})
		defer etcdcatalog.SetAfterPage(c, nil)
		all, err := c.LoadAll(ctxT(t))
		require.NoError(t, err)
		want["p00"], want["p45"], want["p46"], want["p99"] = wal.KafkaID(100), wal.KafkaID(145), wal.KafkaID(146), wal.KafkaID(199)
		require.Equal(t, want, all)
	})
}

// TestEtcdDownCallsEndAtTheirDeadline stops the server: each call fails at
// its 500 ms deadline, not later; once the server is back, saves go through.
// A write that meets the connection the stop broke fails at once, etcd
// unavailable: the client retries reads, not writes, there.
func TestEtcdDownCallsEndAtTheirDeadline(t *testing.T) {
	srv := etcdtest.StartServer(t)
	c := openCatalog(t, srv.Endpoints(), nil)
	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(1)))

	srv.Stop()
	const deadline = 500 * time.Millisecond
	calls := map[string]func(ctx context.Context) error{
		"Save": func(ctx context.Context) error { return c.Save(ctx, "p", wal.KafkaID(2)) },
		"Load": func(ctx context.Context) error { _, err := c.Load(ctx, "p"); return err },
		"LoadAll": func(ctx context.Context) error {
			_, err := c.LoadAll(ctx)
			return err
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := call(ctx)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			require.ErrorContains(t, err, "code = Unavailable", name)
		}
		require.Less(t, took, deadline+400*time.Millisecond, name)
		t.Logf("%s with etcd down: %v after %v", name, err, took)
	}

	srv.Restart()
	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(2)))
	got, err := c.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(2), got)
}

// TestCloseOwnedClient: Open's client is closed by Close, New's is not.
// A client closed under a catalog (New's, by whoever owns it) fails every
// call at once with ErrClosed, where it would retry until the call's
// deadline and fail as a timeout, counted as one.
func TestClientClosedUnderTheCatalog(t *testing.T) {
	eps := etcdtest.Start(t)
	cli, err := clientv3.New(clientConfig(eps, nil)) // closed here, not at the test's end
	require.NoError(t, err)
	c, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(1)))
	require.NoError(t, cli.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.Save(ctx, "p", wal.KafkaID(2))
	require.ErrorIs(t, err, persistence.ErrClosed)
	require.ErrorContains(t, err, "its etcd client was closed")
	_, err = c.Load(ctx, "p")
	require.ErrorIs(t, err, persistence.ErrClosed)
	require.ErrorIs(t, c.Delete(ctx, "p"), persistence.ErrClosed)
	_, err = c.LoadAll(ctx)
	require.ErrorIs(t, err, persistence.ErrClosed)
	_, err = c.Inspect(ctx)
	require.ErrorIs(t, err, persistence.ErrClosed)
	_, err = c.OwnerTerm(ctx, "p")
	require.ErrorIs(t, err, persistence.ErrClosed)
	require.NoError(t, ctx.Err(), "failed at once, not at the deadline")
	require.NoError(t, c.Close())
}

func TestCloseOwnedClient(t *testing.T) {
	eps := etcdtest.Start(t)
	c, err := etcdcatalog.Open(clientConfig(eps, nil))
	require.NoError(t, err)
	cli := c.Client()
	require.NoError(t, c.Close())
	require.ErrorIs(t, cli.Ctx().Err(), context.Canceled, "the client is closed")
}

// ValidatePrefix refuses the prefixes whose keys could fall in another
// prefix's pchannel range, "<prefix>/wal/", and those that are not text
// or too long for etcd to take keys under (a 2 MiB one failed every save,
// and an actor retried them for good); its error of a long one is short.
func TestValidatePrefix(t *testing.T) {
	for _, ok := range []string{"lowwater", "tenant-a/lowwater", "lowwater/tenant-b", "wal", "wal/x", "a/walrus", "a/wall/b", "a/xwal",
		strings.Repeat("p", etcdcatalog.MaxPrefixLen), "日本/lowwater"} {
		require.NoError(t, etcdcatalog.ValidatePrefix(ok), ok)
	}
	for _, bad := range []string{"", "/", "lowwater/", "lowwater/wal", "lowwater/wal/tenant-b", "a/wal/b/c", "wal/wal",
		strings.Repeat("p", etcdcatalog.MaxPrefixLen+1), strings.Repeat("p", 2<<20), "a\x00b", "bad\xff"} {
		err := etcdcatalog.ValidatePrefix(bad)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument, bad)
		require.Less(t, len(err.Error()), 300)
	}
}

// A delete delivered late (held by a member that answered nothing, and
// applied after the pchannel was saved again) deletes nothing: it compares
// the record it read, and the save since is kept.
func TestLateDeleteOfARecordSavedSinceDeletesNothing(t *testing.T) {
	eps := etcdtest.Start(t)
	c := openCatalog(t, eps, nil)
	cli := newClient(t, eps)
	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(5)))
	_, read := rawRecord(t, cli, checkpointKey("p"))
	require.NoError(t, c.Delete(ctxT(t), "p"))
	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(7)))

	deleted, err := etcdcatalog.DeleteAt(ctxT(t), c, "p", read)
	require.NoError(t, err)
	require.False(t, deleted, "a delete of the record read before deleted the one saved since")
	got, err := c.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(7), got)
}

// A call that runs out of time while etcd is out of reach says why its
// last try failed: clientv3 tries again until the deadline and then gives
// the deadline alone, and a node's Warn line of each failed save said
// only that. The error is still the deadline's.
func TestACallOutOfTimeSaysWhyItsLastTryFailed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	c := openCatalog(t, []string{"http://" + addr}, nil)

	for _, call := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := c.Load(ctx, "p"); return err },
		func(ctx context.Context) error { return c.Save(ctx, "p", wal.KafkaID(1)) },
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err := call(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "its last try failed: ")
		require.ErrorContains(t, err, "connection refused")
	}

	// An address that takes connections and answers nothing: the last
	// try knows no more than that its time ran out ("context deadline
	// exceeded while waiting for connections to become ready"), and the
	// error says nothing of it.
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var held sync.WaitGroup
	held.Go(func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	})
	defer held.Wait()
	defer mute.Close()
	silent := openCatalog(t, []string{"http://" + mute.Addr().String()}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = silent.Load(ctx, "q")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotContains(t, err.Error(), "its last try failed")
}
