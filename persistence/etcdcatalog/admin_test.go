package etcdcatalog_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

func TestOwnedDeleteIsFenced(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	a, b := newNode(t, eps), newNode(t, eps)

	first := own(t, a, "p")
	require.NoError(t, first.Save(ctxT(t), "p", wal.KafkaID(10)))
	require.NoError(t, first.Delete(ctxT(t), "p"))
	got, err := first.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Nil(t, got)
	require.NoError(t, first.Delete(ctxT(t), "p"), "deleting nothing")
	require.NoError(t, first.Save(ctxT(t), "p", wal.KafkaID(5)), "a new life may start lower")

	// The owner moves on; the stale one cannot delete.
	_, err = cli.Revoke(ctxT(t), a.session.Lease())
	require.NoError(t, err)
	second := own(t, b, "p")
	fe := requireFenced(t, first.Delete(ctxT(t), "p"))
	require.Equal(t, first.Term(), fe.Term)
	rec, _ := rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(5), Term: first.Term()}, rec, "nothing deleted")

	// A record of a higher term fences the key's owner, as a save is.
	high := second.Term() + 1000
	raw, err := persistence.EncodeRecord("p", persistence.Record{Checkpoint: wal.KafkaID(2), Term: high})
	require.NoError(t, err)
	_, err = cli.Put(ctxT(t), checkpointKey("p"), string(raw))
	require.NoError(t, err)
	fe = requireFenced(t, second.Delete(ctxT(t), "p"))
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: second.Term(), StoredTerm: high}, *fe)
	waitClosed(t, second.Done(), lostWithin, "Done after a fenced delete")
	rec, _ = rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(2), Term: high}, rec)

	// Another pchannel is not the owner's to delete.
	require.ErrorIs(t, second.Delete(ctxT(t), "q"), persistence.ErrInvalidArgument)

	// DeleteAnyTerm clears the record of a higher term, and only while
	// the ownership holds.
	_, err = cli.Revoke(ctxT(t), b.session.Lease())
	require.NoError(t, err)
	c := newNode(t, eps)
	third := own(t, c, "p")
	require.Less(t, third.Term(), high)
	requireFenced(t, second.DeleteAnyTerm(ctxT(t), "p"))
	require.NoError(t, third.DeleteAnyTerm(ctxT(t), "p"))
	left, err := cli.Get(ctxT(t), checkpointKey("p"))
	require.NoError(t, err)
	require.Empty(t, left.Kvs, "the record of a higher term is gone")
	require.NoError(t, third.Save(ctxT(t), "p", wal.KafkaID(3)), "and the owner saves again")
	require.NoError(t, third.Err())
}

func TestInspectAndOwnerTerm(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	n := newNode(t, eps)
	o := own(t, n, "b")
	require.NoError(t, o.Save(ctxT(t), "b", wal.WoodpeckerID{SegmentID: 1, EntryID: 2}))
	require.NoError(t, n.cat.Save(ctxT(t), "a", wal.KafkaID(1)))
	_, err := cli.Put(ctxT(t), checkpointKey("a-bad"), "garbage!garbage!")
	require.NoError(t, err)

	entries, err := n.cat.Inspect(ctxT(t))
	require.NoError(t, err)
	require.Len(t, entries, 3)
	require.Equal(t, persistence.Entry{PChannel: "a", WAL: wal.Kafka, Checkpoint: wal.KafkaID(1), Version: 2}, entries[0])
	require.Equal(t, "a-bad", entries[1].PChannel)
	require.ErrorIs(t, entries[1].Err, persistence.ErrCorruptRecord)
	require.Equal(t, persistence.Entry{PChannel: "b", WAL: wal.Woodpecker, Checkpoint: wal.WoodpeckerID{SegmentID: 1, EntryID: 2},
		Term: o.Term(), Version: 2}, entries[2])

	term, err := n.cat.OwnerTerm(ctxT(t), "b")
	require.NoError(t, err)
	require.Equal(t, o.Term(), term)
	term, err = n.cat.OwnerTerm(ctxT(t), "a")
	require.NoError(t, err)
	require.Zero(t, term)

	// The unfenced delete clears a corrupt record.
	require.NoError(t, n.cat.Delete(ctxT(t), "a-bad"))
	all, err := n.cat.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(1), "b": wal.WoodpeckerID{SegmentID: 1, EntryID: 2}}, all)
}

// A record copied under another pchannel's key is told, with what it
// holds and, its key a byte from its own, whose it is, as in the other
// stores.
func TestInspectTellsAMisplacedRecord(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	cat := openCatalog(t, eps, nil)
	raw, err := persistence.EncodeRecord("a", persistence.Record{Checkpoint: wal.KafkaID(7), Term: 3})
	require.NoError(t, err)
	_, err = cli.Put(ctxT(t), checkpointKey("b"), string(raw))
	require.NoError(t, err)

	entries, err := cat.Inspect(ctxT(t))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, "b", entries[0].PChannel)
	require.Nil(t, entries[0].Checkpoint)
	require.ErrorIs(t, entries[0].Err, persistence.ErrCorruptRecord)
	var misplaced *persistence.MisplacedRecordError
	require.ErrorAs(t, entries[0].Err, &misplaced)
	require.Equal(t, []any{wal.Kafka, wal.KafkaID(7), nil, uint64(3), "a"},
		[]any{misplaced.WAL, misplaced.Checkpoint, misplaced.Err, misplaced.Term, misplaced.WrittenFor})
	require.True(t, misplaced.Names("a"))
	require.False(t, misplaced.Names("b"))
}

// A record under the empty pchannel name (put by hand or by another tool
// at <prefix>/wal//consume-checkpoint) was invisible to Inspect, so the
// operator tool could neither show nor clear it. Inspect shows it; LoadAll
// still leaves it out, readable or not, as no node can use it; and
// DeleteBadName clears it.
func TestRecordUnderTheEmptyName(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	cat := openCatalog(t, eps, nil)
	require.NoError(t, cat.Save(ctxT(t), "a", wal.KafkaID(1)))
	raw, err := persistence.EncodeRecord("", persistence.Record{Checkpoint: wal.KafkaID(7), Term: 3})
	require.NoError(t, err)
	_, err = cli.Put(ctxT(t), etcdcatalog.DefaultPrefix+"/wal//consume-checkpoint", string(raw))
	require.NoError(t, err)

	entries, err := cat.Inspect(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, []persistence.Entry{
		{PChannel: "", WAL: wal.Kafka, Checkpoint: wal.KafkaID(7), Term: 3, Version: 2},
		{PChannel: "a", WAL: wal.Kafka, Checkpoint: wal.KafkaID(1), Version: 2},
	}, entries)
	all, err := cat.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(1)}, all)

	_, err = cli.Put(ctxT(t), etcdcatalog.DefaultPrefix+"/wal//consume-checkpoint", "garbage!garbage!")
	require.NoError(t, err)
	all, err = cat.LoadAll(ctxT(t))
	require.NoError(t, err, "a record no node can use fails no node's recovery")
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(1)}, all)
	entries, err = cat.Inspect(ctxT(t))
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, "", entries[0].PChannel)
	require.ErrorIs(t, entries[0].Err, persistence.ErrCorruptRecord)

	require.ErrorIs(t, cat.Delete(ctxT(t), ""), persistence.ErrInvalidArgument, "as the Catalog contract has it")
	require.NoError(t, cat.DeleteBadName(ctxT(t), ""))
	left, err := cli.Get(ctxT(t), etcdcatalog.DefaultPrefix+"/wal/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, left.Kvs, 1)
	require.Equal(t, checkpointKey("a"), string(left.Kvs[0].Key), "only the empty name's record is gone")
	require.NoError(t, cat.DeleteBadName(ctxT(t), ""), "deleting nothing")
	require.ErrorIs(t, cat.DeleteBadName(ctxT(t), "a"), persistence.ErrInvalidArgument, "a name a node takes is Delete's")
	got, err := cat.Load(ctxT(t), "a")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(1), got)
	// Any name no node takes: a key damaged out of UTF-8, say.
	_, err = cli.Put(ctxT(t), etcdcatalog.DefaultPrefix+"/wal/a\xb0/consume-checkpoint", string(raw))
	require.NoError(t, err)
	require.NoError(t, cat.DeleteBadName(ctxT(t), "a\xb0"))
	left, err = cli.Get(ctxT(t), etcdcatalog.DefaultPrefix+"/wal/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, left.Kvs, 1)

	require.NoError(t, cat.Close())
	require.ErrorIs(t, cat.DeleteBadName(ctxT(t), ""), persistence.ErrClosed)
}

// An owner key put without a lease (by hand, or by another tool) is no
// session's and never expires, and OwnerTerm read it as a running owner's.
// OwnerOf says it carries no lease, and DeleteLeaselessOwner removes it,
// and never a session's key.
func TestLeaselessOwner(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	n := newNode(t, eps)
	put, err := cli.Put(ctxT(t), ownerKey("p"), "by hand")
	require.NoError(t, err)
	term := uint64(put.Header.Revision)

	got, err := n.cat.OwnerOf(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, etcdcatalog.Owner{Term: term}, got)
	require.True(t, got.Leaseless())
	_, err = n.cat.TryOwn(ctxT(t), "p", n.session)
	require.Equal(t, &etcdcatalog.OwnedError{PChannel: "p", Term: term}, err, "the library's fencing is as it was")
	require.ErrorIs(t, err, etcdcatalog.ErrOwnerWithoutLease)
	// Own does not wait for a key that never goes: it says so at once.
	_, err = n.cat.Own(ctxT(t), "p", n.session)
	require.Equal(t, &etcdcatalog.OwnedError{PChannel: "p", Term: term}, err)
	require.ErrorIs(t, err, etcdcatalog.ErrOwned)
	require.ErrorIs(t, err, etcdcatalog.ErrOwnerWithoutLease)
	require.ErrorContains(t, err, "no lease")

	// A session's key is never removed, nor one of another term.
	node := own(t, n, "q")
	got, err = n.cat.OwnerOf(ctxT(t), "q")
	require.NoError(t, err)
	require.Equal(t, etcdcatalog.Owner{Term: node.Term(), Lease: n.session.Lease(), Holder: defaultHolder()}, got)
	require.False(t, got.Leaseless())
	deleted, err := n.cat.DeleteLeaselessOwner(ctxT(t), "q", node.Term())
	require.NoError(t, err)
	require.False(t, deleted)
	require.NoError(t, node.Err(), "the running owner keeps its ownership")
	deleted, err = n.cat.DeleteLeaselessOwner(ctxT(t), "p", term+1)
	require.NoError(t, err)
	require.False(t, deleted)
	_, err = n.cat.DeleteLeaselessOwner(ctxT(t), "p", 0)
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	got, err = n.cat.OwnerOf(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, etcdcatalog.Owner{Term: term}, got, "still there")

	// Owners finds every owner key, and no record's key: not that of the
	// pchannel "y/owner".
	require.NoError(t, n.cat.Save(ctxT(t), "y/owner", wal.KafkaID(1)))
	put, err = cli.Put(ctxT(t), ownerKey("y/owner"), "by hand")
	require.NoError(t, err)
	owners, err := n.cat.Owners(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]etcdcatalog.Owner{
		"p":       {Term: term},
		"q":       {Term: node.Term(), Lease: n.session.Lease(), Holder: defaultHolder()},
		"y/owner": {Term: uint64(put.Header.Revision)},
	}, owners)

	deleted, err = n.cat.DeleteLeaselessOwner(ctxT(t), "p", term)
	require.NoError(t, err)
	require.True(t, deleted)
	got, err = n.cat.OwnerOf(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, etcdcatalog.Owner{}, got)
	require.False(t, got.Leaseless())
	own(t, n, "p") // a session owns it now
}
