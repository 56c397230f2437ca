package etcdcatalog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// batchNode is newNode whose catalog saves through a Batcher.
func batchNode(t *testing.T, endpoints []string, counter *rpcCounter, opts ...etcdcatalog.BatchOption) (node, *etcdcatalog.Batcher) {
	t.Helper()
	n := newNode(t, endpoints)
	c, err := etcdcatalog.Open(clientConfig(endpoints, counter))
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(c, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return n, b
}

func ownThrough(t *testing.T, b *etcdcatalog.Batcher, n node, pchannel string) *etcdcatalog.Owned {
	t.Helper()
	o, err := b.Own(ctxT(t), pchannel, n.session)
	require.NoError(t, err)
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// The saves of owners share transactions with each other and with
// unfenced saves, and each record carries its writer's term: the
// owner's, or none.
func TestBatcherOwnedSavesShareTransactions(t *testing.T) {
	const owned, plain, rounds = 40, 40, 3
	eps := etcdtest.Start(t)
	var counter rpcCounter
	n, b := batchNode(t, eps, &counter)
	owners := make([]*etcdcatalog.Owned, owned)
	for i := range owners {
		owners[i] = ownThrough(t, b, n, fmt.Sprintf("owned-%02d", i))
	}
	for r := int64(1); r <= rounds; r++ {
		counter.take()
		var wg sync.WaitGroup
		errs := make(chan error, owned+plain)
		for _, o := range owners {
			wg.Go(func() { errs <- o.Save(ctxT(t), o.PChannel(), wal.KafkaID(r)) })
		}
		for i := range plain {
			wg.Go(func() { errs <- b.Save(ctxT(t), fmt.Sprintf("plain-%02d", i), wal.KafkaID(r)) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "round %d", r)
		}
		txns := counter.take()["Txn"]
		require.Less(t, txns, (owned+plain)/4, "round %d: %d transactions for %d saves", r, txns, owned+plain)
		t.Logf("round %d: %d saves in %d transactions", r, owned+plain, txns)
	}
	cli := newClient(t, eps)
	for _, o := range owners {
		rec, _ := rawRecord(t, cli, checkpointKey(o.PChannel()))
		require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(rounds), Term: o.Term()}, rec, o.PChannel())
		require.NoError(t, o.Err())
	}
	rec, _ := rawRecord(t, cli, checkpointKey("plain-07"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(rounds)}, rec)
}

// A fenced save weighs as many operations as it makes compares (three:
// the record, the owner key's term and its lease): a batch of them keeps
// within the cluster's --max-txn-ops, never refused.
func TestBatcherCountsAnOwnedSavesCompares(t *testing.T) {
	const owned, clusterMax = 64, 128 // etcd's default --max-txn-ops
	eps := etcdtest.Start(t)
	var counter rpcCounter
	n, b := batchNode(t, eps, &counter, etcdcatalog.WithMaxBatch(clusterMax))
	saves := make(map[*etcdcatalog.Owned]wal.MessageID, owned)
	for i := range owned {
		o := ownThrough(t, b, n, fmt.Sprintf("p%02d", i))
		require.NoError(t, o.Save(ctxT(t), o.PChannel(), wal.KafkaID(1)))
		saves[o] = wal.KafkaID(2)
	}
	counter.take()
	for p, err := range etcdcatalog.CommitOwnedBatch(ctxT(t), b, saves) {
		require.NoError(t, err, p)
	}
	// 192 compares in transactions of at most 128: 42 saves, then 22.
	require.Equal(t, map[string]int{"Txn": 2}, counter.take())
	bound, _ := etcdcatalog.Bounds(b)
	require.Equal(t, clusterMax, bound, "nothing refused")
}

// Each save of a batch is fenced inside etcd, in the transaction that
// writes it: a stale owner's save (one that has not learnt it lost the
// pchannel) is refused with the owner of now, and writes nothing; the
// other saves of its batch go out together again.
func TestBatcherFencesEachOwnedSaveInsideEtcd(t *testing.T) {
	const owned = 10
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	var counter rpcCounter
	a, b := batchNode(t, eps, &counter)
	other := newNode(t, eps)
	saves := make(map[string]etcdcatalog.FencedSave, owned+1)
	for i := range owned {
		o := ownThrough(t, b, a, fmt.Sprintf("p%02d", i))
		require.NoError(t, o.Save(ctxT(t), o.PChannel(), wal.KafkaID(1)))
		saves[o.PChannel()] = etcdcatalog.FencedSave{Checkpoint: wal.KafkaID(2), Term: int64(o.Term()), Lease: a.session.Lease()}
	}
	first := ownThrough(t, b, a, "q")
	require.NoError(t, first.Save(ctxT(t), "q", wal.KafkaID(1))) // the batcher knows the record
	stale := int64(first.Term())
	require.NoError(t, first.Release(ctxT(t)))
	second := own(t, other, "q")
	saves["q"] = etcdcatalog.FencedSave{Checkpoint: wal.KafkaID(5), Term: stale, Lease: a.session.Lease()}

	counter.take()
	got := etcdcatalog.CommitFencedBatch(ctxT(t), b, saves)
	// The transaction the stale owner failed, and the one of the others.
	require.Equal(t, map[string]int{"Txn": 2}, counter.take())
	fe := requireFenced(t, got["q"])
	require.Equal(t, etcdcatalog.FencedError{PChannel: "q", Term: uint64(stale), OwnerTerm: second.Term()}, *fe)
	delete(got, "q")
	for p, err := range got {
		require.NoError(t, err, p)
	}
	rec, _ := rawRecord(t, cli, checkpointKey("q"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(1), Term: uint64(stale)}, rec, "the stale owner's save landed")

	// A record of a higher term fences even the owner of the key, found
	// in the batch's failed transaction, then on what the Batcher read
	// there, confirmed on a fresh read.
	high := second.Term() + 1000
	raw, err := persistence.EncodeRecord("p00", persistence.Record{Checkpoint: wal.KafkaID(2), Term: high})
	require.NoError(t, err)
	_, err = cli.Put(ctxT(t), checkpointKey("p00"), string(raw))
	require.NoError(t, err)
	delete(saves, "q")
	for round := range 2 {
		for p, s := range saves {
			s.Checkpoint = wal.KafkaID(3 + round)
			saves[p] = s
		}
		got = etcdcatalog.CommitFencedBatch(ctxT(t), b, saves)
		// The failed transaction and the others' again; then the read
		// that confirms the refusal and the others' transaction.
		require.Equal(t, map[string]int{"Txn": 2}, counter.take(), "round %d", round)
		fe = requireFenced(t, got["p00"])
		require.Equal(t, etcdcatalog.FencedError{PChannel: "p00", Term: uint64(saves["p00"].Term), StoredTerm: high}, *fe)
		delete(got, "p00")
		for p, err := range got {
			require.NoError(t, err, p)
		}
	}
	rec, _ = rawRecord(t, cli, checkpointKey("p00"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(2), Term: high}, rec)
}

// An owner known to have lost its pchannel sends nothing: its save is
// answered as Owned.Save answers one after the loss, and the others of
// its batch are saved.
func TestBatcherSendsNothingForALostOwner(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	var counter rpcCounter
	n, b := batchNode(t, eps, &counter)
	lost, kept := ownThrough(t, b, n, "lost"), ownThrough(t, b, n, "kept")
	for _, o := range []*etcdcatalog.Owned{lost, kept} {
		require.NoError(t, o.Save(ctxT(t), o.PChannel(), wal.KafkaID(1)))
	}
	_, err := cli.Delete(ctxT(t), ownerKey("lost"))
	require.NoError(t, err)
	waitClosed(t, lost.Done(), lostWithin, "Done after the owner key was deleted")

	counter.take()
	got := etcdcatalog.CommitOwnedBatch(ctxT(t), b, map[*etcdcatalog.Owned]wal.MessageID{lost: wal.KafkaID(2), kept: wal.KafkaID(2)})
	require.Equal(t, map[string]int{"Txn": 1}, counter.take(), "the kept owner's save alone")
	fe := requireFenced(t, got["lost"])
	require.Equal(t, etcdcatalog.FencedError{PChannel: "lost", Term: lost.Term(), Cause: etcdcatalog.ErrOwnerChanged}, *fe)
	require.NoError(t, got["kept"])
	rec, _ := rawRecord(t, cli, checkpointKey("lost"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(1), Term: lost.Term()}, rec)
}

// Batcher.Own and TryOwn are Catalog.Own's and TryOwn's: the same
// refusals, and none once the Batcher is closed.
func TestBatcherOwnIsCatalogOwn(t *testing.T) {
	eps := etcdtest.Start(t)
	n, b := batchNode(t, eps, nil)
	other := newNode(t, eps)
	own(t, other, "taken")
	_, err := b.TryOwn(ctxT(t), "taken", n.session)
	require.ErrorIs(t, err, etcdcatalog.ErrOwned)
	_, err = b.Own(ctxT(t), "", n.session)
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	o := ownThrough(t, b, n, "p")
	require.ErrorIs(t, o.Save(ctxT(t), "q", wal.KafkaID(1)), persistence.ErrInvalidArgument)

	require.NoError(t, b.Close())
	_, err = b.Own(ctxT(t), "p", n.session)
	require.ErrorIs(t, err, persistence.ErrClosed)
	require.ErrorIs(t, o.Save(ctxT(t), "p", wal.KafkaID(1)), persistence.ErrClosed)
}

// A fenced owner's refusal that comes while the Batcher closes is not said
// to be ErrClosed: the owner lost its pchannel, which a caller that asks
// ErrClosed first would take for a shutdown.
func TestBatcherFencedDuringCloseIsNotClosed(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	n := newNode(t, eps)
	cfg, entered, release := holdingTxns(eps, func(txn *etcdserverpb.TxnRequest) bool { return isRead(txn, "/p/") })
	c, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(c, etcdcatalog.WithBatchTimeout(time.Minute)) // never reached
	require.NoError(t, err)
	o := ownThrough(t, b, n, "p")
	require.NoError(t, o.Save(ctxT(t), "p", wal.KafkaID(1)))
	high := o.Term() + 1000
	raw, err := persistence.EncodeRecord("p", persistence.Record{Checkpoint: wal.KafkaID(2), Term: high})
	require.NoError(t, err)
	_, err = cli.Put(ctxT(t), checkpointKey("p"), string(raw))
	require.NoError(t, err)
	_, err = b.Load(ctxT(t), "p") // the Batcher knows the record of the higher term
	require.NoError(t, err)

	saved := make(chan error, 1)
	// Known to be fenced: Save's, which reads "p" again to answer.
	go func() { saved <- o.Save(context.Background(), "p", wal.KafkaID(5)) }()
	within(t, entered, "the save to reach etcd")
	closed := beginClose(t, b)
	close(release)
	err = within(t, saved, "the save to be answered")
	fe := requireFenced(t, err)
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: o.Term(), StoredTerm: high}, *fe)
	require.NotErrorIs(t, err, persistence.ErrClosed)
	require.NoError(t, within(t, closed, "Close to return"))
}
