package etcdcatalog_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

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
		etcdcatalog.WithMaxBatch(0), etcdcatalog.WithMaxInFlight(0), etcdcatalog.WithBatchTimeout(0),
	} {
		b, err := etcdcatalog.NewBatcher(c, opt)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument)
		require.Nil(t, b)
	}
	b, err := etcdcatalog.NewBatcher(nil)
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	require.Nil(t, b)
}
