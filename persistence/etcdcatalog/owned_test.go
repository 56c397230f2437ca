package etcdcatalog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// lostWithin bounds how long Done may take to close once ownership is gone.
const lostWithin = 5 * time.Second

// node is one process of a deployment: its own client, catalog and session.
type node struct {
	cat     *etcdcatalog.Catalog
	session *concurrency.Session
}

func newNode(t *testing.T, endpoints []string, opts ...etcdcatalog.Option) node {
	t.Helper()
	cat := openCatalog(t, endpoints, nil, opts...)
	s, err := concurrency.NewSession(cat.Client(), concurrency.WithTTL(10))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return node{cat: cat, session: s}
}

func own(t *testing.T, n node, pchannel string) *etcdcatalog.Owned {
	t.Helper()
	o, err := n.cat.Own(ctxT(t), pchannel, n.session)
	require.NoError(t, err)
	t.Cleanup(func() { _ = o.Close() })
	return o
}

func requireFenced(t *testing.T, err error) *etcdcatalog.FencedError {
	t.Helper()
	require.ErrorIs(t, err, persistence.ErrFenced)
	var fe *etcdcatalog.FencedError
	require.ErrorAs(t, err, &fe)
	return fe
}

func TestOwnedSaveRecordsTerm(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	n := newNode(t, eps)
	o := own(t, n, "p")

	resp, err := cli.Get(ctxT(t), ownerKey("p"))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, uint64(resp.Kvs[0].CreateRevision), o.Term())
	require.Equal(t, int64(n.session.Lease()), resp.Kvs[0].Lease, "owner key bound to the session's lease")
	require.Equal(t, "p", o.PChannel())
	require.NoError(t, o.Err())

	require.NoError(t, o.Save(ctxT(t), "p", wal.KafkaID(10)))
	rec, _ := rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(10), Term: o.Term()}, rec)

	got, err := o.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), got)
	all, err := o.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"p": wal.KafkaID(10)}, all)

	// The usual contract holds under ownership too.
	require.NoError(t, o.Save(ctxT(t), "p", wal.KafkaID(10)))
	require.ErrorIs(t, o.Save(ctxT(t), "p", wal.KafkaID(9)), persistence.ErrStoredAhead)

	// Only the owned pchannel.
	require.ErrorIs(t, o.Save(ctxT(t), "q", wal.KafkaID(1)), persistence.ErrInvalidArgument)
	_, err = o.Load(ctxT(t), "q")
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)

	// An unfenced writer carries the term over.
	require.NoError(t, n.cat.Save(ctxT(t), "p", wal.KafkaID(11)))
	rec, _ = rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(11), Term: o.Term()}, rec)
}

// TestStaleOwnerIsFenced revokes the owner's lease, as an expiry would: the
// stale owner learns it through Done and cannot write; a new owner, with a
// higher term, continues from the stored checkpoint.
func TestStaleOwnerIsFenced(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	a, b := newNode(t, eps), newNode(t, eps)

	stale := own(t, a, "p")
	require.NoError(t, stale.Save(ctxT(t), "p", wal.KafkaID(10)))

	_, err := cli.Revoke(ctxT(t), a.session.Lease())
	require.NoError(t, err)
	waitClosed(t, stale.Done(), lostWithin, "Done after the lease was revoked")
	require.ErrorIs(t, stale.Err(), etcdcatalog.ErrOwnerChanged)

	fe := requireFenced(t, stale.Save(ctxT(t), "p", wal.KafkaID(20)))
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: stale.Term(), Cause: etcdcatalog.ErrOwnerChanged}, *fe)
	// Its release sends nothing: with etcd out of reach (here, a context
	// already ended), it does not wait on it.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, stale.Release(gone))

	owner := own(t, b, "p")
	require.Greater(t, owner.Term(), stale.Term())
	got, err := owner.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), got, "the new owner starts from the stored checkpoint")
	require.NoError(t, owner.Save(ctxT(t), "p", wal.KafkaID(30)))
	rec, _ := rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(30), Term: owner.Term()}, rec)

	// The stale owner stays fenced, and nothing of it reached the store.
	requireFenced(t, stale.Save(ctxT(t), "p", wal.KafkaID(40)))
	got, err = owner.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(30), got)
}

// TestFenceInsideEtcd checks the transaction's own fence, for a writer that
// has not yet learnt it lost ownership.
func TestFenceInsideEtcd(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	a, b := newNode(t, eps), newNode(t, eps)
	first := own(t, a, "p")
	staleTerm := int64(first.Term())
	require.NoError(t, first.Release(ctxT(t)))

	// Nobody owns it.
	fe := requireFenced(t, etcdcatalog.SaveFenced(ctxT(t), a.cat, "p", wal.KafkaID(5), staleTerm))
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: uint64(staleTerm)}, *fe)

	// Somebody else owns it.
	second := own(t, b, "p")
	require.NoError(t, second.Save(ctxT(t), "p", wal.KafkaID(1)))
	_, before := rawRecord(t, cli, checkpointKey("p"))
	fe = requireFenced(t, etcdcatalog.SaveFenced(ctxT(t), a.cat, "p", wal.KafkaID(5), staleTerm))
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: uint64(staleTerm), OwnerTerm: second.Term()}, *fe)
	rec, after := rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, before, after, "nothing written")
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(1), Term: second.Term()}, rec)

	// A record of a higher term fences even the owner of the key.
	high := second.Term() + 1000
	raw, err := persistence.EncodeRecord("p", persistence.Record{Checkpoint: wal.KafkaID(2), Term: high})
	require.NoError(t, err)
	_, err = cli.Put(ctxT(t), checkpointKey("p"), string(raw))
	require.NoError(t, err)
	fe = requireFenced(t, second.Save(ctxT(t), "p", wal.KafkaID(3)))
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: second.Term(), StoredTerm: high}, *fe)
	waitClosed(t, second.Done(), lostWithin, "Done after a fenced save")
	require.NotErrorIs(t, second.Err(), etcdcatalog.ErrOwnerChanged, "the owner key did not change")
	var cause *etcdcatalog.FencedError
	require.ErrorAs(t, second.Err(), &cause)
	require.Equal(t, high, cause.StoredTerm)
	later := requireFenced(t, second.Save(ctxT(t), "p", wal.KafkaID(3)))
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: second.Term(), StoredTerm: high}, *later,
		"a later save gets the refusal that ended the ownership, not one wrapped in another")
	rec, _ = rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(2), Term: high}, rec)

	// An operator clears the record, and the node owns the pchannel again
	// with its session: closing the fenced Owned must not end the new one.
	_, err = cli.Delete(ctxT(t), checkpointKey("p"))
	require.NoError(t, err)
	again := own(t, b, "p")
	require.Equal(t, second.Term(), again.Term())
	require.NoError(t, second.Close())
	require.NoError(t, again.Save(ctxT(t), "p", wal.KafkaID(4)))
	require.NoError(t, again.Err())
}

func TestOwnWaitsForTheOwner(t *testing.T) {
	eps := etcdtest.Start(t)
	a, b := newNode(t, eps), newNode(t, eps)
	first := own(t, a, "p")

	_, err := b.cat.TryOwn(ctxT(t), "p", b.session)
	var owned *etcdcatalog.OwnedError
	require.ErrorAs(t, err, &owned)
	require.ErrorIs(t, err, etcdcatalog.ErrOwned)
	require.Equal(t, etcdcatalog.OwnedError{PChannel: "p", Lease: a.session.Lease(), Term: first.Term(), Holder: defaultHolder()}, *owned)

	// Own waits, and gives up at its deadline.
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	start := time.Now()
	_, err = b.cat.Own(short, "p", b.session)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second)

	type result struct {
		o   *etcdcatalog.Owned
		err error
	}
	got := make(chan result, 1)
	ctx := ctxT(t)
	go func() {
		o, err := b.cat.Own(ctx, "p", b.session)
		got <- result{o, err}
	}()
	require.NoError(t, first.Release(ctxT(t)))
	waitClosed(t, first.Done(), lostWithin, "Done after Release")
	require.ErrorIs(t, first.Err(), etcdcatalog.ErrReleased)
	fe := requireFenced(t, first.Save(ctxT(t), "p", wal.KafkaID(1)))
	require.ErrorIs(t, fe, etcdcatalog.ErrReleased)

	var r result
	select {
	case r = <-got:
	case <-time.After(callTimeout):
		t.Fatal("Own did not return after the owner released")
	}
	require.NoError(t, r.err)
	t.Cleanup(func() { _ = r.o.Close() })
	require.Greater(t, r.o.Term(), first.Term())
	require.NoError(t, r.o.Save(ctxT(t), "p", wal.KafkaID(1)))
}

func TestOwnAgainWithTheSameSession(t *testing.T) {
	eps := etcdtest.Start(t)
	n := newNode(t, eps)
	first := own(t, n, "p")
	again, err := n.cat.TryOwn(ctxT(t), "p", n.session)
	require.NoError(t, err)
	t.Cleanup(func() { _ = again.Close() })
	require.Equal(t, first.Term(), again.Term())
	require.NoError(t, again.Save(ctxT(t), "p", wal.KafkaID(1)))
	require.NoError(t, first.Save(ctxT(t), "p", wal.KafkaID(2)))

	// Releasing the first, late say (sent before a partition, delivered
	// after the node owned the pchannel again), deletes nothing: the
	// ownership is the second's now.
	require.NoError(t, first.Release(ctxT(t)))
	require.NoError(t, again.Save(ctxT(t), "p", wal.KafkaID(3)))
	require.NoError(t, again.Err())
	other := newNode(t, eps)
	_, err = other.cat.TryOwn(ctxT(t), "p", other.session)
	require.ErrorIs(t, err, etcdcatalog.ErrOwned)

	// Releasing the second frees it.
	require.NoError(t, again.Release(ctxT(t)))
	next, err := other.cat.TryOwn(ctxT(t), "p", other.session)
	require.NoError(t, err)
	t.Cleanup(func() { _ = next.Close() })
}

// TestSessionEndClosesDone orphans the session (its keep-alive stops, the
// key stays until the lease expires): Done closes at once and saves are
// refused here, before etcd would refuse them.
func TestSessionEndClosesDone(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	n := newNode(t, eps)
	o := own(t, n, "p")
	require.NoError(t, o.Save(ctxT(t), "p", wal.KafkaID(1)))

	n.session.Orphan()
	waitClosed(t, o.Done(), lostWithin, "Done after the session ended")
	require.ErrorIs(t, o.Err(), etcdcatalog.ErrSessionDone)
	fe := requireFenced(t, o.Save(ctxT(t), "p", wal.KafkaID(2)))
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: o.Term(), Cause: etcdcatalog.ErrSessionDone}, *fe)
	rec, _ := rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(1), Term: o.Term()}, rec)

	// A session that has ended cannot own.
	_, err := n.cat.Own(ctxT(t), "q", n.session)
	require.ErrorIs(t, err, etcdcatalog.ErrSessionDone)
	_, err = cli.Revoke(ctxT(t), n.session.Lease())
	require.NoError(t, err)
}

// A session ends when etcd cannot be reached for its TTL: closing an
// ownership lost with it waits for no etcd (it waited ReleaseTimeout, 5
// s, in the stop of every pchannel the node owned), and the key, which
// went with the lease, lets another node own the pchannel.
func TestClosingAnOwnershipLostWithItsSessionWaitsForNoEtcd(t *testing.T) {
	eps := etcdtest.Start(t)
	f := etcdtest.NewFreezer(t, strings.TrimPrefix(eps[0], "http://"))
	cut := openCatalog(t, []string{f.Endpoint()}, nil)
	session, err := concurrency.NewSession(cut.Client(), concurrency.WithTTL(2))
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	o, err := cut.Own(ctxT(t), "p", session)
	require.NoError(t, err)

	f.Freeze()
	waitClosed(t, o.Done(), 30*time.Second, "Done once the session's lease ran out")
	require.ErrorIs(t, o.Err(), etcdcatalog.ErrSessionDone)
	start := time.Now()
	require.NoError(t, o.Close())
	require.Less(t, time.Since(start), time.Second, "Close waited for the etcd it cannot reach")
	require.ErrorIs(t, o.Close(), persistence.ErrClosed)

	n := newNode(t, eps)
	next, err := n.cat.Own(ctxT(t), "p", n.session)
	require.NoError(t, err)
	t.Cleanup(func() { _ = next.Close() })
	require.Greater(t, next.Term(), o.Term())
}

// NewSession's grant waits for etcd as long as its context lets it, and
// no longer: concurrency.NewSession's waited for good on an etcd out of
// reach. The session outlives that context, and its lease has the TTL
// asked for.
func TestNewSessionWaitsForEtcdAsLongAsItsContext(t *testing.T) {
	eps := etcdtest.Start(t)
	cat := openCatalog(t, eps, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	session, err := cat.NewSession(ctx, 7)
	cancel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	ttl, err := cat.Client().TimeToLive(ctxT(t), session.Lease())
	require.NoError(t, err)
	require.Equal(t, int64(7), ttl.GrantedTTL)
	o, err := cat.Own(ctxT(t), "p", session) // the session lives on
	require.NoError(t, err)
	require.NoError(t, o.Close())

	for _, ttl := range []int{0, -1} {
		_, err := cat.NewSession(ctxT(t), ttl)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	}

	f := etcdtest.NewFreezer(t, strings.TrimPrefix(eps[0], "http://"))
	cut := openCatalog(t, []string{f.Endpoint()}, nil)
	require.NoError(t, cut.Save(ctxT(t), "q", wal.KafkaID(1))) // connected
	f.Freeze()
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	_, err = cut.NewSession(ctx, 7)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 3*time.Second)

	require.NoError(t, cut.Close())
	_, err = cut.NewSession(ctxT(t), 7)
	require.ErrorIs(t, err, persistence.ErrClosed)
}

// A session shorter than the TTL the doc advises is made, and a Warn line
// on the client's logger says what it risks; one of 25 s says nothing.
func TestNewSessionWarnsOfATTLUnderTheAdvised(t *testing.T) {
	eps := etcdtest.Start(t)
	core, logs := observer.New(zap.WarnLevel)
	cfg := clientConfig(eps, nil)
	cfg.Logger = zap.New(core)
	cat, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cat.Close()) })

	for _, ttl := range []int{5, 25} {
		session, err := cat.NewSession(ctxT(t), ttl)
		require.NoError(t, err, "ttl %d", ttl)
		require.NoError(t, cat.CloseSession(ctxT(t), session))
	}
	warned := logs.FilterMessageSnippet("session TTL under the advised 25 s").All()
	require.Len(t, warned, 1)
	require.Equal(t, int64(5), warned[0].ContextMap()["ttl"])
}

func TestOwnedClose(t *testing.T) {
	eps := etcdtest.Start(t)
	a, b := newNode(t, eps), newNode(t, eps)
	o := own(t, a, "p")
	require.NoError(t, o.Close())
	require.ErrorIs(t, o.Close(), persistence.ErrClosed)
	require.ErrorIs(t, o.Save(ctxT(t), "p", wal.KafkaID(1)), persistence.ErrClosed)
	_, err := o.Load(ctxT(t), "p")
	require.ErrorIs(t, err, persistence.ErrClosed)
	_, err = o.LoadAll(ctxT(t))
	require.ErrorIs(t, err, persistence.ErrClosed)

	// Released: another session owns it without waiting.
	next, err := b.cat.TryOwn(ctxT(t), "p", b.session)
	require.NoError(t, err)
	t.Cleanup(func() { _ = next.Close() })
	require.Greater(t, next.Term(), o.Term())
}

func TestCatalogCloseEndsOwnership(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	cat, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	require.NoError(t, err)
	defer s.Close()
	o, err := cat.Own(ctxT(t), "p", s)
	require.NoError(t, err)

	require.NoError(t, cat.Close())
	waitClosed(t, o.Done(), lostWithin, "Done after the catalog closed")
	require.ErrorIs(t, o.Err(), persistence.ErrClosed)
	require.ErrorIs(t, o.Save(ctxT(t), "p", wal.KafkaID(1)), persistence.ErrClosed)
	_, err = cat.Own(ctxT(t), "q", s)
	require.ErrorIs(t, err, persistence.ErrClosed)

	// The owner key stays with the session, which the caller owns.
	resp, err := cli.Get(ctxT(t), ownerKey("p"), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Equal(t, int64(1), resp.Count)
	require.NoError(t, s.Close())
	resp, err = cli.Get(ctxT(t), ownerKey("p"), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Equal(t, int64(0), resp.Count)
}

func TestOwnRejectsBadArguments(t *testing.T) {
	eps := etcdtest.Start(t)
	n := newNode(t, eps)
	_, err := n.cat.Own(ctxT(t), "", n.session)
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	_, err = n.cat.TryOwn(ctxT(t), "p", nil)
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	require.False(t, errors.Is(err, etcdcatalog.ErrOwned))
	require.ErrorIs(t, n.cat.CloseSession(ctxT(t), nil), persistence.ErrInvalidArgument)
}

// CloseSession revokes the session's lease: every pchannel it owns is free
// at once, its Owneds end with ErrSessionDone, and a second close, of a
// lease gone, is no error. On a closed catalog it stops the keep-alive and
// says ErrClosed: the lease runs out after its TTL.
func TestCloseSessionFreesWhatItOwnsAtOnce(t *testing.T) {
	eps := etcdtest.Start(t)
	a, b := newNode(t, eps), newNode(t, eps)
	s, err := a.cat.NewSession(ctxT(t), 60)
	require.NoError(t, err)
	o, err := a.cat.Own(ctxT(t), "p", s)
	require.NoError(t, err)

	require.NoError(t, a.cat.CloseSession(ctxT(t), s))
	<-o.Done()
	require.ErrorIs(t, o.Err(), etcdcatalog.ErrSessionDone)
	next, err := b.cat.TryOwn(ctxT(t), "p", b.session)
	require.NoError(t, err, "the pchannel stayed owned after its session closed")
	require.NoError(t, next.Close())
	require.NoError(t, a.cat.CloseSession(ctxT(t), s), "a second close")

	s, err = a.cat.NewSession(ctxT(t), 60)
	require.NoError(t, err)
	require.NoError(t, a.cat.Close())
	require.ErrorIs(t, a.cat.CloseSession(ctxT(t), s), persistence.ErrClosed)
	<-s.Done()
}

// The fence holds when etcd hands out a term again. A term is the owner
// key's create revision, which etcd reuses after its data is wiped or
// restored from a backup: a stale owner can then hold the very term of the
// new one, and its saves passed the fence. The owner's lease tells them
// apart. Here the stale owner is played by a session of its own that saves
// with the new owner's term.
func TestFenceHoldsWhenATermIsHandedOutAgain(t *testing.T) {
	eps := etcdtest.Start(t)
	stale, owner := newNode(t, eps), newNode(t, eps)
	o := own(t, owner, "p")
	require.NoError(t, o.Save(ctxT(t), "p", wal.KafkaID(50)))

	// The stale node has read the record: its save's compare of the
	// stored value passes, and the fence inside the transaction decides.
	got, err := stale.cat.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(50), got)
	term := int64(o.Term())
	err = etcdcatalog.SaveFencedAs(ctxT(t), stale.cat, "p", wal.KafkaID(200), term, stale.session.Lease())
	fe := requireFenced(t, err)
	require.Equal(t, o.Term(), fe.OwnerTerm)
	require.Contains(t, fe.Error(), "under another lease")
	got, err = owner.cat.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(50), got, "the stale owner's save landed")

	require.NoError(t, etcdcatalog.SaveFencedAs(ctxT(t), stale.cat, "p", wal.KafkaID(60), term, owner.session.Lease()))
	require.NoError(t, o.Save(ctxT(t), "p", wal.KafkaID(70)))
}

// An ownership lost and never closed is let go: the session, which
// outlives many owners, does not keep each one.
func TestLostOwnershipIsLetGo(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	n := newNode(t, eps)
	gone := func() weak.Pointer[etcdcatalog.Owned] {
		o, err := n.cat.Own(ctxT(t), "p", n.session)
		require.NoError(t, err)
		_, err = cli.Delete(ctxT(t), ownerKey("p"))
		require.NoError(t, err)
		waitClosed(t, o.Done(), lostWithin, "Done after the owner key was deleted")
		waitClosed(t, etcdcatalog.Watching(o), lostWithin, "the watcher's return")
		return weak.Make(o)
	}()
	runtime.GC()
	require.Nil(t, gone.Value(), "the session still holds a lost ownership")
	require.NoError(t, n.session.Ctx().Err(), "the session lives on")
}

// A retake delivered late (an Own whose reply was lost at a member that
// answered nothing, its transaction applied after a later Own of the
// session succeeded) writes nothing: the later Owned's Close still frees
// the pchannel.
func TestLateRetakeWritesNothing(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	a, b := newNode(t, eps), newNode(t, eps)
	first := own(t, a, "p")
	read, err := cli.Get(ctxT(t), ownerKey("p"))
	require.NoError(t, err)
	require.Len(t, read.Kvs, 1)
	stale := read.Kvs[0]

	again := own(t, a, "p")
	require.Equal(t, first.Term(), again.Term())
	wrote, err := etcdcatalog.Retake(ctxT(t), a.cat, "p", stale)
	require.NoError(t, err)
	require.False(t, wrote, "a retake of a key read before the last one wrote over it")

	require.NoError(t, again.Close())
	next, err := b.cat.TryOwn(ctxT(t), "p", b.session)
	require.NoError(t, err, "the pchannel stayed owned after its last Owned closed")
	t.Cleanup(func() { _ = next.Close() })
}

// A claim delivered late (a copy of an Own's claim held by a member that
// answered nothing, applied after the ownership it won was released)
// writes nothing: the release left its mark, and the pchannel stays free
// for another node. A claim made since the mark was written still claims,
// and the mark is none of the keys StrayKeys lists.
func TestLateClaimAfterAReleaseWritesNothing(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	a, b := newNode(t, eps), newNode(t, eps)
	first := own(t, a, "p") // claimed with no mark yet
	require.NoError(t, first.Release(ctxT(t)))

	wrote, err := etcdcatalog.Claim(ctxT(t), a.cat, "p", 0, a.session)
	require.NoError(t, err)
	require.False(t, wrote, "a claim made before the release put the owner key back")
	resp, err := cli.Get(ctxT(t), ownerKey("p"))
	require.NoError(t, err)
	require.Empty(t, resp.Kvs)
	next, err := b.cat.TryOwn(ctxT(t), "p", b.session)
	require.NoError(t, err, "the pchannel stayed owned after its release")
	require.Greater(t, next.Term(), first.Term())
	require.NoError(t, next.Release(ctxT(t)))

	stray, err := a.cat.StrayKeys(ctxT(t))
	require.NoError(t, err)
	require.Empty(t, stray)
	mark, err := cli.Get(ctxT(t), etcdcatalog.DefaultPrefix+"/wal/p/released")
	require.NoError(t, err)
	require.Len(t, mark.Kvs, 1)
	wrote, err = etcdcatalog.Claim(ctxT(t), a.cat, "p", mark.Kvs[0].ModRevision, a.session)
	require.NoError(t, err)
	require.True(t, wrote, "a claim made since the last release did not claim")
}

// defaultHolder is the holder a catalog names without WithHolder: the
// process, as an operator finds it.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return fmt.Sprintf("pid %d", os.Getpid())
	}
	return fmt.Sprintf("pid %d on %s", os.Getpid(), host)
}

// An owner key says who put it (WithHolder), so that whoever finds the
// pchannel owned can tell by whom; one put by hand names no one, whatever
// its value.
func TestOwnerKeyNamesItsHolder(t *testing.T) {
	eps := etcdtest.Start(t)
	named := newNode(t, eps, etcdcatalog.WithHolder("querynode-7/pod a"))
	first := own(t, named, "p")

	other := newNode(t, eps)
	got, err := other.cat.OwnerOf(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, etcdcatalog.Owner{Term: first.Term(), Lease: named.session.Lease(), Holder: "querynode-7/pod a"}, got)
	_, err = other.cat.TryOwn(ctxT(t), "p", other.session)
	var owned *etcdcatalog.OwnedError
	require.ErrorAs(t, err, &owned)
	require.Equal(t, "querynode-7/pod a", owned.Holder)
	require.ErrorContains(t, err, `owned by "querynode-7/pod a" (lease `)
	// Released, and owned by the other, which names its process.
	require.NoError(t, first.Close())
	second := own(t, other, "p")
	owners, err := named.cat.Owners(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]etcdcatalog.Owner{"p": {Term: second.Term(), Lease: other.session.Lease(), Holder: defaultHolder()}}, owners)

	require.Equal(t, defaultHolder(), etcdcatalog.DefaultHolder())
	unnamed := newNode(t, eps, etcdcatalog.WithHolder(""))
	own(t, unnamed, "q")
	got, err = unnamed.cat.OwnerOf(ctxT(t), "q")
	require.NoError(t, err)
	require.Empty(t, got.Holder)

	for _, bad := range []string{strings.Repeat("x", etcdcatalog.MaxHolderLen+1), "a\x00b", "bad\xff"} {
		_, err = etcdcatalog.Open(clientConfig(eps, nil), etcdcatalog.WithHolder(bad))
		require.ErrorIs(t, err, persistence.ErrInvalidArgument, "%q", bad)
	}

	// Keys put by hand under a lease, with values that are not Own's:
	// whatever follows a slash names nobody. The last is Own's form, but
	// under another lease than the key's.
	cli := newClient(t, eps)
	lease, err := cli.Grant(ctxT(t), 30)
	require.NoError(t, err)
	for i, value := range []string{"\x00\xffgarbage/with/slashes", "a/b/c", "zz/1/someone", "1/2/someone"} {
		pchannel := fmt.Sprintf("hand-%d", i)
		_, err := cli.Put(ctxT(t), ownerKey(pchannel), value, clientv3.WithLease(lease.ID))
		require.NoError(t, err)
		got, err := other.cat.OwnerOf(ctxT(t), pchannel)
		require.NoError(t, err)
		require.Equal(t, lease.ID, got.Lease)
		require.Empty(t, got.Holder, "the owner key %q", value)
	}
}

// Own and TryOwn take the names Save takes, no other: a name no record can
// be saved under (too long, not UTF-8, a NUL) is refused, and no owner key
// is put for it. TryOwn put one, and every save under it failed.
func TestOwnRefusesANameNoRecordCanHave(t *testing.T) {
	eps := etcdtest.Start(t)
	n := newNode(t, eps)
	for _, name := range []string{"", strings.Repeat("p", 513), "a\x00b", "bad\xff"} {
		_, err := n.cat.TryOwn(ctxT(t), name, n.session)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument, "%q", name)
		_, err = n.cat.Own(ctxT(t), name, n.session)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument, "%q", name)
	}
	owners, err := n.cat.Owners(ctxT(t))
	require.NoError(t, err)
	require.Empty(t, owners)
	own(t, n, strings.Repeat("p", 512)) // the longest name a record takes
}

// An Own waiting for another owner to go ends at Close, with ErrClosed,
// also on a client given to New, which Close leaves open: it waited until
// the other owner's session ended, and with a context that never ends,
// for ever.
func TestOwnWaitingEndsAtClose(t *testing.T) {
	eps := etcdtest.Start(t)
	own(t, newNode(t, eps), "p")
	watching := make(chan struct{}, 1)
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc,
		cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if strings.HasSuffix(method, "/Watch") {
			select {
			case watching <- struct{}{}:
			default:
			}
		}
		return streamer(ctx, desc, cc, method, opts...)
	})}
	cli, err := clientv3.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	c, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	got := make(chan error, 1)
	go func() {
		_, err := c.Own(context.Background(), "p", s)
		got <- err
	}()
	within(t, watching, "Own to wait for the owner to go")
	require.NoError(t, c.Close())
	require.ErrorIs(t, within(t, got, "Own to end at Close"), persistence.ErrClosed)
}

// A fenced verdict that etcd gave as the catalog closed stands: the save
// was refused by another owner, not cut short by Close, and the owner's
// record is as it was. Here etcd's answer is held until Close has begun.
func TestAFencedVerdictAtCloseStands(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	holder := own(t, newNode(t, eps), "p")
	require.NoError(t, holder.Save(ctxT(t), "p", wal.KafkaID(1)))
	_, before := rawRecord(t, cli, checkpointKey("p"))

	answered := make(chan struct{}, 1)
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if strings.HasSuffix(method, "/Txn") {
				answered <- struct{}{}
				<-ctx.Done() // Close has begun
			}
			return err
		})}
	c, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	staleTerm := int64(holder.Term()) - 1
	saved := make(chan error, 1)
	go func() { saved <- etcdcatalog.SaveFenced(ctxT(t), c, "p", wal.KafkaID(5), staleTerm) }()
	within(t, answered, "etcd to answer the save")
	require.NoError(t, c.Close())

	err = within(t, saved, "the save to end")
	fe := requireFenced(t, err)
	require.Equal(t, etcdcatalog.FencedError{PChannel: "p", Term: uint64(staleTerm), OwnerTerm: holder.Term()}, *fe)
	require.NotErrorIs(t, err, persistence.ErrClosed, "etcd's verdict, not Close's")
	rec, after := rawRecord(t, cli, checkpointKey("p"))
	require.Equal(t, before, after, "nothing written")
	require.Equal(t, persistence.Record{Checkpoint: wal.KafkaID(1), Term: holder.Term()}, rec)
	require.NoError(t, holder.Err(), "the owner holds on")
}

// A release in flight when the catalog closes goes on: Close waits for it
// before it closes the client Open made, and the owner key is gone, so
// that the next owner need not wait out the session. The client was
// closed under it: the release failed with gRPC's "the client connection
// is closing", and the key stayed until the session's lease ended.
func TestAReleaseInFlightOutlivesTheCatalogsClose(t *testing.T) {
	eps := etcdtest.Start(t)
	// The release's transaction waits, once armed, until Close is under way.
	var armed atomic.Bool
	started, proceed := make(chan struct{}), make(chan struct{})
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if strings.HasSuffix(method, "/Txn") && armed.CompareAndSwap(true, false) {
				close(started)
				<-proceed
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})}
	cat, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	waiting := make(chan struct{})
	etcdcatalog.SetAwaitingReleases(cat, func() { close(waiting) })
	session, err := concurrency.NewSession(newClient(t, eps), concurrency.WithTTL(30))
	require.NoError(t, err)
	defer session.Close()
	o, err := cat.Own(ctxT(t), "p", session)
	require.NoError(t, err)

	armed.Store(true)
	released := make(chan error, 1)
	go func() { released <- o.Close() }()
	waitClosed(t, started, lostWithin, "the release's transaction")
	closed := make(chan error, 1)
	go func() { closed <- cat.Close() }()
	select {
	case <-waiting: // Close waits for the release
	case <-cat.Client().Ctx().Done(): // Close closed the client under it
	case <-time.After(lostWithin):
		t.Fatal("Close neither waited for the release nor closed its client")
	}
	close(proceed)
	select {
	case err := <-released:
		require.NoError(t, err, "the release in flight")
	case <-time.After(lostWithin):
		t.Fatal("the release did not return")
	}
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(lostWithin):
		t.Fatal("Close did not return")
	}
	resp, err := newClient(t, eps).Get(ctxT(t), ownerKey("p"), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count, "the owner key stays after a release that returned nil")
}

// A release with no deadline on an etcd out of reach holds Close for
// ReleaseTimeout at most; Close then closes its client under it, and the
// release fails with ErrClosed, not with gRPC's "the client connection is
// closing".
func TestAReleaseCutByCloseSaysClosed(t *testing.T) {
	srv := etcdtest.StartServer(t)
	var armed atomic.Bool
	started := make(chan struct{})
	cfg := clientConfig(srv.Endpoints(), nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if strings.HasSuffix(method, "/Txn") && armed.CompareAndSwap(true, false) {
				close(started)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})}
	cat, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	session, err := concurrency.NewSession(newClient(t, srv.Endpoints()), concurrency.WithTTL(30))
	require.NoError(t, err) // its client's Cleanup ends it: a Close would wait out the TTL
	o, err := cat.Own(ctxT(t), "p", session)
	require.NoError(t, err)
	srv.Stop()
	// Once the client has seen its connection go: a transaction sent on
	// the one that just broke failed at once, and the release ended
	// before Close came (once, under make test's load).
	conn := cat.Client().ActiveConnection()
	gone, cancel := context.WithTimeout(context.Background(), lostWithin)
	defer cancel()
	for state := conn.GetState(); state == connectivity.Ready; state = conn.GetState() {
		require.True(t, conn.WaitForStateChange(gone, state), "the client still takes etcd for up")
	}

	armed.Store(true)
	released := make(chan error, 1)
	go func() { released <- o.Release(context.Background()) }()
	waitClosed(t, started, lostWithin, "the release's transaction")
	began := time.Now()
	require.NoError(t, cat.Close())
	took := time.Since(began)
	require.GreaterOrEqual(t, took, etcdcatalog.ReleaseTimeout-100*time.Millisecond, "Close did not wait for the release")
	require.Less(t, took, etcdcatalog.ReleaseTimeout+2*time.Second)
	select {
	case err := <-released:
		require.ErrorIs(t, err, persistence.ErrClosed)
	case <-time.After(lostWithin):
		t.Fatal("the release did not return once Close closed the client")
	}
}

// A release under way, its Done closed, when the catalog closes goes on
// to delete the owner key, whatever it was doing when Close came: it was
// counted only once its watcher had stopped, and Close, come between,
// made it return ErrClosed with the key left (7 to 9 rounds in 20).
func TestAReleaseBegunBeforeCloseDeletesTheKey(t *testing.T) {
	eps := etcdtest.Start(t)
	session, err := concurrency.NewSession(newClient(t, eps), concurrency.WithTTL(30))
	require.NoError(t, err)
	defer session.Close()
	check := openCatalog(t, eps, nil)
	for round := range 20 {
		cat, err := etcdcatalog.Open(clientConfig(eps, nil))
		require.NoError(t, err)
		pchannel := fmt.Sprintf("p%d", round)
		o, err := cat.Own(ctxT(t), pchannel, session)
		require.NoError(t, err)
		released := make(chan error, 1)
		go func() { released <- o.Release(ctxT(t)) }()
		waitClosed(t, o.Done(), lostWithin, "Done once the release began")
		require.NoError(t, cat.Close())
		select {
		case err := <-released:
			require.NoError(t, err, "round %d", round)
		case <-time.After(lostWithin):
			t.Fatalf("round %d: the release did not return", round)
		}
		owner, err := check.OwnerOf(ctxT(t), pchannel)
		require.NoError(t, err)
		require.Zero(t, owner.Term, "round %d: the owner key stays after a release that returned nil", round)
	}
}

// An Own with a session whose lease etcd no longer knows (revoked, or
// expired while the node was away) says the session is done, before the
// session itself has noticed: it was etcd's bare "requested lease not
// found", through the Catalog and a Batcher alike.
func TestOwnWithALeaseGoneSaysSessionDone(t *testing.T) {
	eps := etcdtest.Start(t)
	cli := newClient(t, eps)
	n := newNode(t, eps)
	b, err := etcdcatalog.NewBatcher(openCatalog(t, eps, nil))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	_, err = cli.Revoke(ctxT(t), n.session.Lease())
	require.NoError(t, err)
	_, err = n.cat.TryOwn(ctxT(t), "p", n.session)
	require.ErrorIs(t, err, etcdcatalog.ErrSessionDone)
	_, err = b.Own(ctxT(t), "q", n.session)
	require.ErrorIs(t, err, etcdcatalog.ErrSessionDone)
}

// A release whose delete failed leaves the owner key on the session's
// live lease, every other node kept off the pchannel: Release again
// deletes it. It returned nil and sent nothing, the ownership being
// released already, and only the end of the whole session freed it.
func TestAFailedReleaseCanBeTriedAgain(t *testing.T) {
	eps := etcdtest.Start(t)
	a, b := newNode(t, eps), newNode(t, eps)
	o, err := a.cat.Own(ctxT(t), "p", a.session)
	require.NoError(t, err)
	gone, cancel := context.WithCancel(context.Background())
	cancel() // as a release cut by its deadline, etcd out of reach
	require.ErrorIs(t, o.Release(gone), context.Canceled)
	require.ErrorIs(t, o.Err(), etcdcatalog.ErrReleased)
	owner, err := a.cat.OwnerOf(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, o.Term(), owner.Term, "the key stays after a failed release")
	_, err = b.cat.TryOwn(ctxT(t), "p", b.session)
	require.ErrorIs(t, err, etcdcatalog.ErrOwned)

	require.NoError(t, o.Release(ctxT(t)))
	owner, err = a.cat.OwnerOf(ctxT(t), "p")
	require.NoError(t, err)
	require.Zero(t, owner.Term, "the key stays after a release that returned nil")
	taken, err := b.cat.TryOwn(ctxT(t), "p", b.session)
	require.NoError(t, err)
	require.Greater(t, taken.Term(), o.Term())
	// Released for good: a release now sends nothing, and deletes no
	// other owner's key.
	require.NoError(t, o.Release(ctxT(t)))
	require.NoError(t, o.Close())
	owner, err = a.cat.OwnerOf(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, taken.Term(), owner.Term)
	require.NoError(t, taken.Close())
}
