package etcdcatalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
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
	watching := make(chan struct{}, 1)
	cfg := clientConfig(cluster.Members[cut].Endpoints(), nil)
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainStreamInterceptor(watchCreated(watching)))
	cli, err := clientv3.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cli.Close()) })
	waiter, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, waiter.Close()) })
	// A TTL that outlasts the test: only the owner's lease runs out.
	waiterSession, err := waiter.NewSession(ctxT(t), 60)
	require.NoError(t, err)

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
