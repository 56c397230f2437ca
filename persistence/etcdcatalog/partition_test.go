package etcdcatalog_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// TestOwnWaitingOnAMemberCutOffFromItsPeersOwnsOnceTheOwnerGoes makes a
// node wait in Own for another's pchannel while its watch is on a member
// that is then cut off from its peers. The owner goes (its lease runs out
// on the other two); the cut member hears nothing of it, and an Own whose
// wait stayed there waited as long as the cut lasted, though a quorum
// served. It owns the pchannel once the cut member drops its watch for
// want of a leader, and the key's deletion is read elsewhere.
func TestOwnWaitingOnAMemberCutOffFromItsPeersOwnsOnceTheOwnerGoes(t *testing.T) {
	const (
		ownerTTL    = 3 // seconds
		ownedWithin = 15 * time.Second
	)
	cluster := etcdtest.StartCluster(t, 3)
	require.Eventually(t, func() bool { return cluster.Leader() >= 0 }, 10*time.Second, 10*time.Millisecond)
	cut := (cluster.Leader() + 1) % 3
	var others []string
	for i, m := range cluster.Members {
		if i != cut {
			others = append(others, m.Endpoints()...)
		}
	}

	owner := openCatalog(t, others, nil)
	ownerSession, err := owner.NewSession(ctxT(t), ownerTTL)
	require.NoError(t, err)
	held, err := owner.Own(ctxT(t), "p", ownerSession)
	require.NoError(t, err)

	// The waiting node's client knows the cut member alone until its
	// watch is there, then all three.
	cli, waiter, waiterSession, watching := waitingNode(t, cluster.Members[cut].Endpoints()[0])

	type result struct {
		o   *etcdcatalog.Owned
		err error
	}
	owned := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	go func() {
		o, err := waiter.Own(ctx, "p", waiterSession)
		owned <- result{o, err}
	}()
	select {
	case <-watching:
	case r := <-owned:
		t.Fatalf("Own returned before it waited: %v", r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("Own made no watch within 10 s")
	}
	cli.SetEndpoints(cluster.Endpoints()...)

	cluster.Isolate(cut)
	t.Cleanup(func() { cluster.Rejoin(cut) })
	server := cluster.Members[cut].Etcd().Server
	require.Eventually(t, func() bool { return server.Leader() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the cut member still has a leader")
	ownerSession.Orphan()
	gone := time.Now()
	majority := newClient(t, others)
	require.Eventually(t, func() bool {
		resp, err := majority.Get(ctxT(t), ownerKey("p"))
		return err == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].Lease != int64(ownerSession.Lease()))
	}, 2*ownerTTL*time.Second, 10*time.Millisecond, "the owner's key outlived its lease")

	select {
	case r := <-owned:
		require.NoError(t, r.err)
		t.Cleanup(func() { _ = r.o.Close() })
		t.Logf("owned %v after the owner's keep-alive stopped", time.Since(gone).Round(time.Millisecond))
		require.Greater(t, r.o.Term(), held.Term())
	case <-time.After(ownedWithin):
		t.Fatalf("not owned %v after the owner's keep-alive stopped, its key gone", ownedWithin)
	}
	_ = held.Close()
}

// clusterWithAFreezer starts a cluster of three members, and a Freezer in
// front of the third; others are the endpoints of the first two.
func clusterWithAFreezer(t *testing.T) (frozen *etcdtest.Freezer, others []string) {
	t.Helper()
	cluster := etcdtest.StartCluster(t, 3)
	require.Eventually(t, func() bool { return cluster.Leader() >= 0 }, 10*time.Second, 10*time.Millisecond)
	frozen = etcdtest.NewFreezer(t, strings.TrimPrefix(cluster.Members[2].Endpoints()[0], "http://"))
	return frozen, append(cluster.Members[0].Endpoints(), cluster.Members[1].Endpoints()...)
}

// waitingNode opens a catalog on a client of endpoint alone, with no
// keep-alive, that signals on watching each time etcd creates one of its
// watches, and makes a session to own with, whose TTL outlasts the test.
func waitingNode(t *testing.T, endpoint string) (*clientv3.Client, *etcdcatalog.Catalog, *concurrency.Session, <-chan struct{}) {
	t.Helper()
	watching := make(chan struct{}, 1)
	cfg := clientConfig([]string{endpoint}, nil)
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainStreamInterceptor(watchCreated(watching)))
	cli, err := clientv3.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cli.Close()) })
	c, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	session, err := c.NewSession(ctxT(t), 60)
	require.NoError(t, err)
	t.Cleanup(session.Orphan)
	return cli, c, session, watching
}

// watchCreated is a stream interceptor that signals on created each time
// etcd says it created a watch.
func watchCreated(created chan<- struct{}) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || method != "/etcdserverpb.Watch/Watch" {
			return s, err
		}
		return createdStream{s, created}, nil
	}
}

type createdStream struct {
	grpc.ClientStream
	created chan<- struct{}
}

func (s createdStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if wr, ok := m.(*pb.WatchResponse); ok && err == nil && wr.Created {
		select {
		case s.created <- struct{}{}:
		default:
		}
	}
	return err
}

// TestSavesGoOnWhileAMemberAnswersNothing freezes one member of three,
// its connections held open and nothing passing, as a member stopped by
// SIGSTOP, a host that hangs or a partition that drops packets is, for
// 4 s: well before the client's keep-alive would drop it. Sixteen
// pchannels save through a Batcher all along, and sixteen through a
// Catalog, as persisters do: each save with a deadline of 2 s, the next
// one at once whether it succeeded or not. No pchannel goes longer than a
// deadline and a half without a save acknowledged, hardly a save fails,
// and each pchannel stores its last one acknowledged, or a later one.
// Readers load the pchannels meanwhile, with the same deadline, and no
// load fails. A transaction or a read the client sent to the frozen member
// is sent again, to whichever member the client picks next, until one
// answers. Without
// that, each such transaction of the Batcher held its commit slot to the
// batch timeout, 5 s, and with every slot so held, no pchannel of it saved
// until the freeze ended; and one save of the Catalog in three failed at
// its deadline.
func TestSavesGoOnWhileAMemberAnswersNothing(t *testing.T) {
	const (
		pchannels = 16 // of each
		deadline  = 2 * time.Second
		frozenFor = 4 * time.Second
	)
	frozen, others := clusterWithAFreezer(t)
	endpoints := append(others, frozen.Endpoint())
	catalogs := []persistence.Catalog{openBatcher(t, endpoints, nil), openCatalog(t, endpoints, nil)}

	type pchannel struct {
		c                   persistence.Catalog
		name                string
		acked               atomic.Int64
		last, tried         wal.KafkaID // acknowledged, sent
		lastAt              time.Time
		longestGap, slowest time.Duration
		failed              int
	}
	saved := make([]pchannel, 0, len(catalogs)*pchannels)
	for i, c := range catalogs {
		for p := range pchannels {
			saved = append(saved, pchannel{c: c, name: fmt.Sprintf("c%d-p%d", i, p)})
		}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	// Four readers of each catalog load its pchannels in turn meanwhile,
	// each load with the same deadline: every one succeeds.
	var loads atomic.Int64
	loadErrs := make(chan error, 8)
	for i, c := range catalogs {
		for r := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := r; ; n += 4 {
					select {
					case <-quit:
						loadErrs <- nil
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					_, err := c.Load(ctx, saved[i*pchannels+n%pchannels].name)
					cancel()
					if err != nil {
						loadErrs <- fmt.Errorf("%T: load: %w", c, err)
						return
					}
					loads.Add(1)
				}
			}()
		}
	}
	for p := range saved {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &saved[p]
			s.lastAt = time.Now()
			for next := wal.KafkaID(1); ; next++ {
				select {
				case <-quit:
					s.longestGap = max(s.longestGap, time.Since(s.lastAt))
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				began := time.Now()
				s.tried = next
				err := s.c.Save(ctx, s.name, next)
				s.slowest = max(s.slowest, time.Since(began))
				cancel()
				if err != nil {
					s.failed++
					t.Logf("%s, save %d: %v", s.name, next, err)
					continue
				}
				s.last = next
				s.longestGap = max(s.longestGap, time.Since(s.lastAt))
				s.lastAt = time.Now()
				s.acked.Add(1)
			}
		}()
	}
	// Saves through all three members first: ten of each pchannel.
	require.Eventually(t, func() bool {
		for p := range saved {
			if saved[p].acked.Load() < 10 {
				return false
			}
		}
		return true
	}, 10*time.Second, time.Millisecond, "the pchannels did not save ten times each")
	frozen.Freeze()
	time.Sleep(frozenFor) // the fault's length, not a wait for anything
	close(quit)
	wg.Wait()
	for range len(catalogs) * 4 {
		require.NoError(t, <-loadErrs)
	}
	t.Logf("%d loads, none failed", loads.Load())

	for i, c := range catalogs {
		var longestGap, slowest time.Duration
		var saves, failed int
		for p := range saved[i*pchannels : (i+1)*pchannels] {
			s := &saved[i*pchannels+p]
			longestGap, slowest = max(longestGap, s.longestGap), max(slowest, s.slowest)
			saves, failed = saves+int(s.acked.Load()), failed+s.failed
			// A save that failed at its deadline may have been written.
			got, err := c.Load(ctxT(t), s.name)
			require.NoError(t, err)
			require.GreaterOrEqual(t, got.(wal.KafkaID), s.last)
			require.LessOrEqual(t, got.(wal.KafkaID), s.tried)
		}
		t.Logf("%T: %d saves acknowledged, %d failed; the slowest took %v, the longest without a save %v",
			c, saves, failed, slowest.Round(time.Millisecond), longestGap.Round(time.Millisecond))
		require.Less(t, longestGap, deadline*3/2, "%T", c)
		require.LessOrEqual(t, failed, saves/100, "%T", c)
	}
}

// TestOwnWaitingOnAMemberThatAnswersNothingOwnsOnceTheOwnerGoes makes a
// node wait in Own for two pchannels of another's while its watches are on
// a member that answers nothing, its connections held open
// (etcdtest.Freezer): the wait for "before" began before the freeze, that
// for "after" after it, on the stream the first holds there. The owner
// goes (its lease runs out on the other two). The frozen member ends no
// watch, for it neither answers nor loses its leader, and with no
// keep-alive to drop it the first Own waited for ever; the second never
// had its watch, for clientv3's Watch waits for etcd to create it. Each
// owns its pchannel once a read of the owner keys waited on, which the
// catalog makes every 1–2 s, finds the key gone on another member.
func TestOwnWaitingOnAMemberThatAnswersNothingOwnsOnceTheOwnerGoes(t *testing.T) {
	const (
		ownerTTL    = 3 // seconds
		ownedWithin = 10 * time.Second
	)
	frozen, others := clusterWithAFreezer(t)

	owner := openCatalog(t, others, nil)
	ownerSession, err := owner.NewSession(ctxT(t), ownerTTL)
	require.NoError(t, err)
	pchannels := []string{"before", "after"}
	held := make(map[string]*etcdcatalog.Owned)
	for _, p := range pchannels {
		held[p], err = owner.Own(ctxT(t), p, ownerSession)
		require.NoError(t, err)
	}

	// The waiting node's client knows the member to be frozen alone until
	// its first watch is there, then all three; it has no keep-alive.
	cli, waiter, waiterSession, watching := waitingNode(t, frozen.Endpoint())

	type result struct {
		o   *etcdcatalog.Owned
		err error
	}
	owned := make(map[string]chan result)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	own := func(p string) {
		owned[p] = make(chan result, 1)
		go func() {
			o, err := waiter.Own(ctx, p, waiterSession)
			owned[p] <- result{o, err}
		}()
	}
	own("before")
	select {
	case <-watching:
	case r := <-owned["before"]:
		t.Fatalf("Own returned before it waited: %v", r.err)
	case <-time.After(10 * time.Second):
		t.Fatal("Own made no watch within 10 s")
	}
	cli.SetEndpoints(append([]string{frozen.Endpoint()}, others...)...)
	frozen.Freeze()
	own("after")

	ownerSession.Orphan()
	gone := time.Now()
	majority := newClient(t, others)
	require.Eventually(t, func() bool {
		resp, err := majority.Get(ctxT(t), etcdcatalog.DefaultPrefix+"/wal/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err == nil && len(resp.Kvs) == 0
	}, 2*ownerTTL*time.Second, 10*time.Millisecond, "the owner's keys outlived its lease")

	deadline := time.After(ownedWithin)
	for _, p := range pchannels {
		select {
		case r := <-owned[p]:
			require.NoError(t, r.err, p)
			t.Logf("%q owned %v after the owner's keep-alive stopped", p, time.Since(gone).Round(time.Millisecond))
			require.Greater(t, r.o.Term(), held[p].Term(), p)
			require.NoError(t, r.o.Release(ctxT(t)), p)
			resp, err := majority.Get(ctxT(t), ownerKey(p))
			require.NoError(t, err)
			require.Empty(t, resp.Kvs, p)
		case <-deadline:
			t.Fatalf("%q not owned %v after the owner's keep-alive stopped, its key gone", p, ownedWithin)
		}
		_ = held[p].Close()
	}
}

// TestOwnershipGoesOnWhileAMemberAnswersNothing makes sessions, owns
// pchannels and releases them, and closes the sessions, on a client of three members one of which
// answers nothing (etcdtest.Freezer), each call with a deadline of 2 s,
// well inside the 12 s after which the client's keep-alive drops the
// member. Every call succeeds: a grant, a claim or a release the client
// sent to the frozen member is sent again to the others, and so is
// CloseSession's revoke. Before, one call in three waited there to its
// deadline and failed. An Own on a session
// that ended fails at once, with ErrSessionDone, though a copy of its
// claim waits on the frozen member.
func TestOwnershipGoesOnWhileAMemberAnswersNothing(t *testing.T) {
	const (
		rounds    = 8
		pchannels = 4 // each round
		deadline  = 2 * time.Second
	)
	frozen, others := clusterWithAFreezer(t)
	c := openCatalog(t, append([]string{frozen.Endpoint()}, others...), nil)
	majority := newClient(t, others)

	// The sessions are ended with CloseSession, or orphaned: a session's
	// own Close revokes its lease in a call of etcd's, which the frozen
	// member holds to the session's TTL.
	newSession := func() (*concurrency.Session, error) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		s, err := c.NewSession(ctx, 60)
		if err == nil {
			t.Cleanup(s.Orphan)
		}
		return s, err
	}
	// Warm: the round trips the catalog waits for before a copy are
	// measured on three members that answer.
	s, err := newSession()
	require.NoError(t, err)
	for i := range 3 {
		o, err := c.Own(ctxT(t), fmt.Sprintf("warm-%d", i), s)
		require.NoError(t, err)
		require.NoError(t, o.Release(ctxT(t)))
	}
	frozen.Freeze()

	var slowest time.Duration
	timed := func(what string, call func(context.Context) error) {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		began := time.Now()
		require.NoError(t, call(ctx), what)
		slowest = max(slowest, time.Since(began))
	}
	for r := range rounds {
		var s *concurrency.Session
		timed("a session", func(context.Context) (err error) {
			s, err = newSession()
			return err
		})
		for p := range pchannels {
			name := fmt.Sprintf("r%d-p%d", r, p)
			var o *etcdcatalog.Owned
			timed("own "+name, func(ctx context.Context) (err error) {
				o, err = c.Own(ctx, name, s)
				return err
			})
			resp, err := majority.Get(ctxT(t), ownerKey(name))
			require.NoError(t, err)
			require.Len(t, resp.Kvs, 1)
			require.Equal(t, int64(s.Lease()), resp.Kvs[0].Lease)
			require.Equal(t, o.Term(), uint64(resp.Kvs[0].CreateRevision))
			timed("release "+name, o.Release)
			resp, err = majority.Get(ctxT(t), ownerKey(name))
			require.NoError(t, err)
			require.Empty(t, resp.Kvs, "%s released", name)
		}
		timed("close the session", func(ctx context.Context) error { return c.CloseSession(ctx, s) })
		<-s.Done()
		left, err := majority.TimeToLive(ctxT(t), s.Lease())
		require.NoError(t, err)
		require.EqualValues(t, -1, left.TTL, "the session's lease outlived CloseSession")
	}
	t.Logf("%d sessions made and closed, %d pchannels owned and released, none failed; the slowest call took %v",
		rounds, rounds*pchannels, slowest.Round(time.Millisecond))

	// An Own on a session whose lease etcd no longer knows fails at once,
	// though a copy of its claim is held by the frozen member.
	s, err = newSession()
	require.NoError(t, err)
	_, err = majority.Revoke(ctxT(t), s.Lease())
	require.NoError(t, err)
	var slowestRefused time.Duration
	for p := range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		began := time.Now()
		_, err := c.Own(ctx, fmt.Sprintf("revoked-%d", p), s)
		cancel()
		require.ErrorIs(t, err, etcdcatalog.ErrSessionDone)
		slowestRefused = max(slowestRefused, time.Since(began))
	}
	t.Logf("%d Owns on a revoked session refused, the slowest in %v", rounds, slowestRefused.Round(time.Millisecond))
	require.Less(t, slowestRefused, deadline/2)
	// Its lease is gone already: closing it is no error.
	require.NoError(t, c.CloseSession(ctxT(t), s))
}

// TestReadsAndRepairsGoOnWhileAMemberAnswersNothing reads a catalog of
// fifty pchannels, ten to a page, again and again on a client of three
// members one of which answers nothing (etcdtest.Freezer), each whole read
// with a deadline of 2 s: LoadAll and Inspect, as a node starting and an
// operator's tool read it. Then it replaces and deletes records, as an
// operator's tool does, each call with the same deadline. Every call
// succeeds: a page, a read or a write the client sent to the frozen
// member is sent again to the others. Before, each went there one time
// in three, and a read of five pages seldom finished.
func TestReadsAndRepairsGoOnWhileAMemberAnswersNothing(t *testing.T) {
	const (
		pchannels = 50
		reads     = 8
		deadline  = 2 * time.Second
	)
	frozen, others := clusterWithAFreezer(t)
	endpoints := append(others, frozen.Endpoint())
	c := openCatalog(t, endpoints, nil, etcdcatalog.WithPageSize(10))
	for p := range pchannels {
		require.NoError(t, c.Save(ctxT(t), fmt.Sprintf("p%02d", p), wal.KafkaID(p+1)))
	}
	// Warm: the pages' round trip is measured on members that answer.
	all, err := c.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Len(t, all, pchannels)
	frozen.Freeze()

	var slowest time.Duration
	for r := range reads {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		began := time.Now()
		if r%2 == 0 {
			all, err := c.LoadAll(ctx)
			require.NoError(t, err, "LoadAll %d", r)
			require.Len(t, all, pchannels)
			require.Equal(t, wal.KafkaID(pchannels), all[fmt.Sprintf("p%02d", pchannels-1)])
		} else {
			entries, err := c.Inspect(ctx)
			require.NoError(t, err, "Inspect %d", r)
			require.Len(t, entries, pchannels)
		}
		slowest = max(slowest, time.Since(began))
		cancel()
	}
	t.Logf("%d reads, none failed; the slowest took %v", reads, slowest.Round(time.Millisecond))

	slowest = 0
	for p := range reads {
		name := fmt.Sprintf("p%02d", p)
		for _, call := range []func(context.Context) error{
			func(ctx context.Context) error { return c.Replace(ctx, name, wal.KafkaID(1)) },
			func(ctx context.Context) error { return c.Delete(ctx, name) },
		} {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			began := time.Now()
			require.NoError(t, call(ctx), name)
			slowest = max(slowest, time.Since(began))
			cancel()
		}
		got, err := c.Load(ctxT(t), name)
		require.NoError(t, err, name)
		require.Nil(t, got, name)
	}
	t.Logf("%d records replaced and deleted, none failed; the slowest call took %v", reads, slowest.Round(time.Millisecond))
	// The first read of one record, sent to the frozen member, is sent
	// again on what the saves and pages measured, not after firstHedge,
	// a second, as a read that had nothing measured of its own was.
	require.Less(t, slowest, time.Second)
}

// TestOwnedWatchOnAMemberBehindKeepsTheOwnership has an Owned's watch made
// on a member behind the others: cut off from its peers before the last
// owner's key ran out on them, it creates the watch at its own revision,
// and when it rejoins, it replays that deletion, which came before the
// new ownership began. The watch heard it as the loss of the new one, and
// the node stopped a pchannel it owned, whose key its release then left
// on its session (a trial from outside, a member frozen and thawed). A
// watch of the client's, on the same stream, tells when the member has
// caught up.
func TestOwnedWatchOnAMemberBehindKeepsTheOwnership(t *testing.T) {
	cluster := etcdtest.StartCluster(t, 3)
	require.Eventually(t, func() bool { return cluster.Leader() >= 0 }, 10*time.Second, 10*time.Millisecond)
	behind := (cluster.Leader() + 1) % 3
	var others []string
	for i, m := range cluster.Members {
		if i != behind {
			others = append(others, m.Endpoints()...)
		}
	}
	majority := newClient(t, others)
	owner := openCatalog(t, others, nil)
	ownerSession, err := owner.NewSession(ctxT(t), 2)
	require.NoError(t, err)
	_, err = owner.Own(ctxT(t), "p", ownerSession)
	require.NoError(t, err)

	// The node's Owneds watch on one stream, made on the member to fall
	// behind while the client knew it alone.
	cli, c, session, _ := waitingNode(t, cluster.Members[behind].Endpoints()[0])
	probe, err := c.Own(ctxT(t), "probe", session)
	require.NoError(t, err)
	cli.SetEndpoints(cluster.Endpoints()...)

	cluster.Isolate(behind)
	t.Cleanup(func() { cluster.Rejoin(behind) })
	ownerSession.Orphan()
	require.Eventually(t, func() bool {
		resp, err := majority.Get(ctxT(t), ownerKey("p"))
		return err == nil && len(resp.Kvs) == 0
	}, 10*time.Second, 10*time.Millisecond, "the owner's key outlived its lease")
	o, err := c.Own(ctxT(t), "p", session)
	require.NoError(t, err)

	cluster.Rejoin(behind)
	_, err = majority.Delete(ctxT(t), ownerKey("probe"))
	require.NoError(t, err)
	select {
	case <-probe.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("the member behind did not catch up within 15 s")
	}
	require.NoError(t, o.Err(), "an ownership ended by a deletion from before it began")
	require.NoError(t, o.Release(ctxT(t)))
}
