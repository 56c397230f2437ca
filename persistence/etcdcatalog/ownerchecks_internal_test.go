package etcdcatalog

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
)

// A round of the owner reads has ownerRecheck in all, however many reads
// it holds: with every call slot held, each read of a round waited that
// long for one, and a round of four reads left the waits begun meanwhile
// unread for 8 s.
func TestARoundOfTheOwnerReadsWaitsNoLongerThanOneRecheck(t *testing.T) {
	o, err := buildOptions([]Option{WithMaxConcurrentCalls(1)})
	require.NoError(t, err)
	c := newCatalog(nil, false, o)
	defer c.endClosing()
	c.calls <- struct{}{} // every slot held, by a call that does not end

	k := &c.ownerChecks
	var waits []*ownerWait
	for i := range 4 * ownersPerRead {
		w := &ownerWait{key: fmt.Sprintf("/lowwater/wal/p%03d/owner", i), create: 1, gone: make(chan struct{})}
		k.waits[w] = struct{}{}
		waits = append(waits, w)
	}
	began := time.Now()
	c.readRound(waits)
	took := time.Since(began)
	require.GreaterOrEqual(t, took, ownerRecheck, "the round gave up before its time")
	require.Less(t, took, 2*ownerRecheck)
	for _, w := range waits {
		select {
		case <-w.gone:
			t.Fatalf("%s ended, though never read", w.key)
		default:
		}
	}
}

// A wait forgotten while a round reads the others is not read: an Own
// that stopped waiting costs the cluster nothing more, even in the round
// that was under way.
func TestARoundPassesOverTheWaitsForgottenSinceItBegan(t *testing.T) {
	eps := etcdtest.Start(t)
	var (
		mu        sync.Mutex
		read      []string
		forgotten *ownerWait
		c         *Catalog
	)
	intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if q, ok := req.(*pb.TxnRequest); ok && len(q.Success) > 0 && len(q.Compare) == 0 {
			mu.Lock()
			for _, op := range q.Success {
				if r := op.GetRequestRange(); r != nil && !slices.Contains(read, string(r.Key)) {
					read = append(read, string(r.Key))
				}
			}
			mu.Unlock()
			c.forgetOwner(forgotten) // while the round is under way
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(intercept)},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, cli.Close()) }()
	c, err = New(cli)
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()

	k := &c.ownerChecks
	k.perRead = 1 // a read for each wait: the round has a wait left to pass over
	var waits []*ownerWait
	for i := range 3 {
		// No such key: a wait read is found gone.
		w := &ownerWait{key: fmt.Sprintf("/lowwater/wal/p%d/owner", i), create: 1, gone: make(chan struct{})}
		k.waits[w] = struct{}{}
		waits = append(waits, w)
	}
	forgotten = waits[2]
	c.readRound(waits)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{waits[0].key, waits[1].key}, read)
	for _, w := range waits[:2] {
		select {
		case <-w.gone:
		default:
			t.Fatalf("%s was read and found gone, yet its wait did not end", w.key)
		}
	}
	select {
	case <-forgotten.gone:
		t.Fatalf("%s ended, though forgotten", forgotten.key)
	default:
	}
}
