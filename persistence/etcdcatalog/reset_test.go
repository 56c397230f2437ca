package etcdcatalog_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// TestRevisionResetNeverLowers wipes etcd under a catalog whose hint holds
// a record at some mod revision, then has another writer store a higher
// record that lands at that very revision (etcd counts revisions from 1
// again). The catalog's save of a value between the two must be refused:
// the hint's revision matches, its record does not. Then it checks that a
// stale hint is replaced: a key whose hinted revision is above every
// revision of the new history costs one round trip per save again once a
// save has seen the current record.
func TestRevisionResetNeverLowers(t *testing.T) {
	srv := etcdtest.StartServer(t)
	eps := srv.Endpoints()
	var calls rpcCounter
	c := openCatalog(t, eps, &calls)
	ctx := ctxT(t)
	cli := newClient(t, eps)

	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(500)))
	_, hinted := rawRecord(t, cli, checkpointKey("p"))
	for i := 1; i <= 20; i++ { // "q" ends far above anything written after the wipe
		require.NoError(t, c.Save(ctx, "q", wal.KafkaID(i)))
	}

	srv.WipeAndRestart()
	other := openCatalog(t, eps, nil)
	for currentRevision(t, cli) < hinted-1 {
		_, err := cli.Put(ctx, "filler", "x")
		require.NoError(t, err)
	}
	require.NoError(t, other.Save(ctx, "p", wal.KafkaID(1000)))
	rec, rev := rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, hinted, rev, "the new record must land at the hinted revision")
	require.Equal(t, wal.KafkaID(1000), rec.Checkpoint)

	_, err := c.Client().Get(ctx, "reconnected") // c's client finds etcd back
	require.NoError(t, err)
	err = c.Save(ctx, "p", wal.KafkaID(600))
	var ahead *persistence.StoredAheadError
	require.ErrorAs(t, err, &ahead, "Save(600) over a stored 1000 after the reset")
	require.Equal(t, persistence.StoredAheadError{PChannel: "p", Stored: wal.KafkaID(1000), Attempted: wal.KafkaID(600)}, *ahead)
	rec, _ = rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, wal.KafkaID(1000), rec.Checkpoint, "the stored checkpoint was lowered")

	require.NoError(t, other.Save(ctx, "q", wal.KafkaID(100)))
	require.NoError(t, c.Save(ctx, "q", wal.KafkaID(200)))
	calls.take()
	for i := 201; i <= 203; i++ {
		require.NoError(t, c.Save(ctx, "q", wal.KafkaID(i)))
		require.Equal(t, map[string]int{"Txn": 1}, calls.take(), "save %d: the stale hint was not replaced", i)
	}
	got := history(t, cli, checkpointKey("q"), 1, currentRevision(t, cli))
	require.Equal(t, []wal.MessageID{wal.KafkaID(100), wal.KafkaID(200), wal.KafkaID(201), wal.KafkaID(202), wal.KafkaID(203)}, got)
}

// TestAWipedEtcdIsAnError: a node whose etcd lost its data, wiped under
// it, says so at Error, once, on the first answer that shows it (its
// revision below one seen before), and goes on from what etcd holds:
// nothing, where its pchannels then recover from nothing. Before, only
// that recovery said anything, at Info, as on a first start. A
// serializable read, which a member behind answers from its own store,
// tells nothing; nor do the answers after.
func TestAWipedEtcdIsAnError(t *testing.T) {
	srv := etcdtest.StartServer(t)
	eps := srv.Endpoints()
	core, logs := observer.New(zap.ErrorLevel)
	cfg := clientConfig(eps, nil)
	cfg.Logger = zap.New(core, zap.AddStacktrace(zap.ErrorLevel)) // as zap's production config
	c, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	ctx := ctxT(t)
	for i := 1; i <= 20; i++ {
		require.NoError(t, c.Save(ctx, "p", wal.KafkaID(i)))
	}
	before, err := c.Client().Get(ctx, "any")
	require.NoError(t, err)
	require.Zero(t, logs.Len())

	srv.WipeAndRestart()
	_, err = c.Client().Get(ctx, "reconnected", clientv3.WithSerializable())
	require.NoError(t, err)
	require.Zero(t, logs.Len(), "a client's own read is none of the catalog's")

	got, err := c.Load(ctx, "p")
	require.NoError(t, err)
	require.Nil(t, got, "the record went with the data")
	wentBack := logs.FilterMessageSnippet("etcd went back in time").All()
	require.Len(t, wentBack, 1)
	fields := wentBack[0].ContextMap()
	require.Equal(t, before.Header.Revision, fields["revisionSeen"])
	require.Less(t, fields["revisionNow"], int64(3))
	require.Empty(t, wentBack[0].Stack, "a stack of the catalog's says nothing of etcd's loss")

	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(1)))
	got, err = c.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(1), got)
	require.Equal(t, 1, logs.Len(), "told once")
}
