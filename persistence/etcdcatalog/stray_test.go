package etcdcatalog_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// rangeLog records, for each range read a client sends, whether it asked
// for keys only.
type rangeLog struct {
	mu       sync.Mutex
	keysOnly []bool
}

func (l *rangeLog) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*etcdserverpb.RangeRequest); ok {
		l.mu.Lock()
		l.keysOnly = append(l.keysOnly, r.KeysOnly)
		l.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the reads so far and starts again from none.
func (l *rangeLog) take() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	got := l.keysOnly
	l.keysOnly = nil
	return got
}

// Keys under <prefix>/wal/ that are neither a record nor an owner key
// (another tool given the same prefix, a hand edit) were passed over by
// every read, so that nothing could report them. StrayKeys lists them in
// key order, reading keys only, page by page; keys outside <prefix>/wal/
// are not the catalog's, and LoadAll, Inspect and Owners are as they were.
func TestStrayKeys(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	var reads rangeLog
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(reads.intercept)}
	c, err := etcdcatalog.Open(cfg, etcdcatalog.WithPageSize(3))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	none, err := c.StrayKeys(ctxT(t))
	require.NoError(t, err)
	require.Empty(t, none)

	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(1)))
	require.NoError(t, c.Save(ctxT(t), "y/owner", wal.KafkaID(2)))
	put, err := cli.Put(ctxT(t), ownerKey("p"), "by hand")
	require.NoError(t, err)
	const dir = etcdcatalog.DefaultPrefix + "/wal/"
	stray := []string{
		dir,
		dir + "consume-checkpoint", // no pchannel segment
		dir + "owner",
		dir + "p/consume-checkpoint.bak",
		dir + "p/notes",
		dir + "p/owner/extra",
		dir + "stray",
	}
	outside := []string{"lowwater", "lowwater/wa", "lowwater/walrus", "lowwater/other/wal/p/notes", "other/wal/p/notes"}
	for _, k := range append(append([]string{}, stray...), outside...) {
		_, err := cli.Put(ctxT(t), k, "not lowwater's")
		require.NoError(t, err)
	}

	reads.take()
	got, err := c.StrayKeys(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, stray, got)
	require.Equal(t, []bool{true, true, true, true}, reads.take(), "10 keys in pages of 3, keys only")

	all, err := c.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"p": wal.KafkaID(1), "y/owner": wal.KafkaID(2)}, all)
	entries, err := c.Inspect(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, []persistence.Entry{
		{PChannel: "p", WAL: wal.Kafka, Checkpoint: wal.KafkaID(1), Version: 2},
		{PChannel: "y/owner", WAL: wal.Kafka, Checkpoint: wal.KafkaID(2), Version: 2},
	}, entries)
	owners, err := c.Owners(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]etcdcatalog.Owner{"p": {Term: uint64(put.Header.Revision)}}, owners)

	t.Run("CompactedBetweenPages", func(t *testing.T) {
		// The read starts over at a new revision, and lists each key once.
		var once sync.Once
		etcdcatalog.SetAfterPage(c, func(int) {
			once.Do(func() {
				_, err := cli.Put(context.Background(), dir+"zz", "x")
				require.NoError(t, err)
				_, err = cli.Compact(context.Background(), currentRevision(t, cli))
				require.NoError(t, err)
			})
		})
		defer etcdcatalog.SetAfterPage(c, nil)
		got, err := c.StrayKeys(ctxT(t))
		require.NoError(t, err)
		require.Equal(t, append(append([]string{}, stray...), dir+"zz"), got)
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.StrayKeys(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, c.Close())
	_, err = c.StrayKeys(ctxT(t))
	require.ErrorIs(t, err, persistence.ErrClosed)
}
