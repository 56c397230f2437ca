package etcdcatalog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// Replace writes what Save refuses (a lower checkpoint, another WAL's, over
// a record that cannot be read), each in one put: a watch of the key sees
// every write as a PUT, never a DELETE, so no reader or crash finds the
// record gone. Bad arguments and a closed catalog write nothing.
func TestReplace(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	counter := &rpcCounter{}
	cat := openCatalog(t, eps, counter)
	key := checkpointKey("p")

	from := currentRevision(t, cli) + 1
	require.NoError(t, cat.Replace(ctxT(t), "p", wal.KafkaID(9)), "nothing stored")
	require.NoError(t, cat.Save(ctxT(t), "p", wal.KafkaID(20)))
	require.NoError(t, cat.Replace(ctxT(t), "p", wal.KafkaID(5)), "lower")
	got, err := cat.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(5), got)
	require.NoError(t, cat.Replace(ctxT(t), "p", wal.RocksMQID(3)), "another WAL's")
	_, err = cli.Put(ctxT(t), key, "not a record")
	require.NoError(t, err)
	require.NoError(t, cat.Replace(ctxT(t), "p", wal.KafkaID(7)), "over a record that cannot be read")
	to := currentRevision(t, cli)
	require.Equal(t, []wal.MessageID{wal.KafkaID(9), wal.KafkaID(20), wal.KafkaID(5), wal.RocksMQID(3)},
		history(t, cli, key, from, to-2), "one put each")
	rec, rev := rawRecord(t, cli, key)
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(7)}, rec)
	require.Equal(t, to, rev)

	// The catalog's hint follows the replacement: a save just above it
	// is written in one round trip, with no read of a record it knows.
	counter.take()
	require.NoError(t, cat.Save(ctxT(t), "p", wal.KafkaID(8)))
	require.Equal(t, map[string]int{"Txn": 1}, counter.take())

	for name, call := range map[string]func() error{
		"empty name": func() error { return cat.Replace(ctxT(t), "", wal.KafkaID(1)) },
		"nil ID":     func() error { return cat.Replace(ctxT(t), "p", nil) },
	} {
		require.ErrorIs(t, call(), persistence.ErrInvalidArgument, name)
	}
	require.NoError(t, cat.Close())
	require.ErrorIs(t, cat.Replace(ctxT(t), "p", wal.KafkaID(1)), persistence.ErrClosed)
	rec, _ = rawRecord(t, cli, key)
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(8)}, rec, "refused calls wrote nothing")
}

// A plain Catalog's Replace keeps the stored owner term, as its Save does;
// an owner's writes its own term, is fenced as its Save is, and
// ReplaceAnyTerm replaces a record of a higher term too.
func TestOwnedReplaceIsFenced(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	a, b := newNode(t, eps), newNode(t, eps)
	key := checkpointKey("p")

	first := own(t, a, "p")
	require.NoError(t, first.Save(ctxT(t), "p", wal.KafkaID(10)))
	require.NoError(t, first.Replace(ctxT(t), "p", wal.KafkaID(4)))
	rec, _ := rawRecord(t, cli, key)
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(4), Term: first.Term()}, rec)
	require.NoError(t, b.cat.Replace(ctxT(t), "p", wal.KafkaID(2)), "a plain catalog is not fenced")
	rec, _ = rawRecord(t, cli, key)
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(2), Term: first.Term()}, rec, "the term carried over")

	// Another pchannel is not the owner's.
	require.ErrorIs(t, first.Replace(ctxT(t), "q", wal.KafkaID(1)), persistence.ErrInvalidArgument)

	// The owner moves on; the stale one cannot replace.
	_, err := cli.Revoke(ctxT(t), a.session.Lease())
	require.NoError(t, err)
	second := own(t, b, "p")
	fe := requireFenced(t, first.Replace(ctxT(t), "p", wal.KafkaID(1)))
	require.Equal(t, first.Term(), fe.Term)
	rec, _ = rawRecord(t, cli, key)
	require.Equal(t, wal.KafkaID(2), rec.Checkpoint, "nothing written")

	// A record of a higher term fences the key's owner, unless any term
	// is asked for.
	high := second.Term() + 1000
	raw, err := persistence.EncodeRecord("p", persistence.Record{Checkpoint: wal.KafkaID(30), Term: high})
	require.NoError(t, err)
	_, err = cli.Put(ctxT(t), key, string(raw))
	require.NoError(t, err)
	c := newNode(t, eps)
	_, err = cli.Revoke(ctxT(t), b.session.Lease())
	require.NoError(t, err)
	third := own(t, c, "p")
	fe = requireFenced(t, third.Replace(ctxT(t), "p", wal.KafkaID(3)))
	require.Equal(t, high, fe.StoredTerm)
	waitClosed(t, third.Done(), lostWithin, "Done after a fenced replace")

	d := newNode(t, eps)
	_, err = cli.Revoke(ctxT(t), c.session.Lease())
	require.NoError(t, err)
	fourth := own(t, d, "p")
	requireFenced(t, second.ReplaceAnyTerm(ctxT(t), "p", wal.KafkaID(3)))
	require.NoError(t, fourth.ReplaceAnyTerm(ctxT(t), "p", wal.KafkaID(3)))
	rec, _ = rawRecord(t, cli, key)
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(3), Term: fourth.Term()}, rec)
	require.NoError(t, fourth.Save(ctxT(t), "p", wal.KafkaID(6)), "and the owner saves again")
	require.NoError(t, fourth.Err())
}

// A record whose term is above the revision it was written at came from
// another cluster, or from before a restore of etcd: no owner here holds
// that term, and every owner's saves are fenced by it. A write without
// ownership (Save or Replace) drops it rather than carrying it over, as
// it carries a term an owner of this etcd wrote.
func TestWritesWithoutOwnershipDropAnImpossibleTerm(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	cat := openCatalog(t, eps, nil)
	const high = 1 << 40
	for _, p := range []string{"raise", "lower"} {
		raw, err := persistence.EncodeRecord(p, persistence.Record{Checkpoint: wal.KafkaID(100), Term: high})
		require.NoError(t, err)
		_, err = cli.Put(ctxT(t), checkpointKey(p), string(raw))
		require.NoError(t, err)
	}
	require.NoError(t, cat.Save(ctxT(t), "raise", wal.KafkaID(200)))
	require.NoError(t, cat.Replace(ctxT(t), "lower", wal.KafkaID(50)))
	for p, want := range map[string]wal.MessageID{"raise": wal.KafkaID(200), "lower": wal.KafkaID(50)} {
		rec, _ := rawRecord(t, cli, checkpointKey(p))
		require.Equal(t, persistence.Record{Checkpoint: want}, rec, p)
	}

	// A Batcher's saves, which write without ownership as well, in one
	// transaction of a batch: its hints of the records are those it read
	// when their owner term fenced every owner.
	b := openBatcher(t, eps, nil)
	for _, p := range []string{"x", "y"} {
		raw, err := persistence.EncodeRecord(p, persistence.Record{Checkpoint: wal.KafkaID(100), Term: high})
		require.NoError(t, err)
		_, err = cli.Put(ctxT(t), checkpointKey(p), string(raw))
		require.NoError(t, err)
		var ahead *persistence.StoredAheadError
		require.ErrorAs(t, b.Save(ctxT(t), p, wal.KafkaID(50)), &ahead, "read, and remembered")
	}
	require.Equal(t, map[string]error{"x": nil, "y": nil},
		etcdcatalog.CommitBatch(ctxT(t), b, map[string]wal.MessageID{"x": wal.KafkaID(200), "y": wal.KafkaID(200)}))
	for _, p := range []string{"x", "y"} {
		rec, _ := rawRecord(t, cli, checkpointKey(p))
		require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(200)}, rec, p)
	}

	// And an owner saves over them again.
	n := newNode(t, eps)
	for _, p := range []string{"raise", "lower"} {
		o := own(t, n, p)
		require.NoError(t, o.Save(ctxT(t), p, wal.KafkaID(300)), p)
	}
}
