package etcdcatalog_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
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

// watchCreates sees the watches a client asks etcd for, and can hold the
// creation of one until let go.
type watchCreates struct {
	mu    sync.Mutex
	seen  []*pb.WatchCreateRequest
	hold  string        // a key whose watch's creation waits for let
	held  chan struct{} // closed once that creation is held
	let   chan struct{}
	added chan struct{}
}

func newWatchCreates(hold string) *watchCreates {
	return &watchCreates{hold: hold, held: make(chan struct{}), let: make(chan struct{}), added: make(chan struct{}, 1000)}
}

// catalog opens a catalog whose client's watch requests w sees.
func (w *watchCreates) catalog(t *testing.T, endpoints []string) node {
	cfg := clientConfig(endpoints, nil)
	cfg.DialOptions = []grpc.DialOption{grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc,
		cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || !strings.HasSuffix(method, "/Watch") {
			return s, err
		}
		return &watchStream{ClientStream: s, w: w}, nil
	})}
	cat, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	s, err := concurrency.NewSession(cat.Client(), concurrency.WithTTL(10))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return node{cat: cat, session: s}
}

type watchStream struct {
	grpc.ClientStream
	w *watchCreates
}

func (s *watchStream) SendMsg(m any) error {
	if req, ok := m.(*pb.WatchRequest); ok && req.GetCreateRequest() != nil {
		create := req.GetCreateRequest()
		s.w.mu.Lock()
		s.w.seen = append(s.w.seen, create)
		s.w.mu.Unlock()
		s.w.added <- struct{}{}
		if string(create.Key) == s.w.hold {
			close(s.w.held)
			<-s.w.let
		}
	}
	return s.ClientStream.SendMsg(m)
}

// An Owned's watch starts at etcd's revision of its creation, one etcd
// has no history to read for: a watch from the Own's revision, once etcd
// moved past it, waited to be brought up to date, 512 each 100 ms.
func TestOwnedWatchesFromNow(t *testing.T) {
	eps := etcdtest.Start(t)
	w := newWatchCreates("")
	n := w.catalog(t, eps)
	raw := newClient(t, eps)
	for i := range 5 {
		own(t, n, fmt.Sprint("p", i))
		_, err := raw.Put(ctxT(t), fmt.Sprint("elsewhere", i), "x") // etcd moves on
		require.NoError(t, err)
	}
	for range 5 {
		within(t, w.added, "an Owned's watch")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.seen, 5)
	for _, c := range w.seen {
		require.Zero(t, c.StartRevision, "the watch of %s", c.Key)
	}
}

// What changes at the owner key after the Own and before its watch is
// created, which the watch does not show, ends the ownership all the same:
// the key is read once the watch is.
func TestOwnedSeesAChangeBeforeItsWatch(t *testing.T) {
	eps := etcdtest.Start(t)
	key := ownerKey("p")
	w := newWatchCreates(key)
	n := w.catalog(t, eps)
	o := own(t, n, "p")
	within(t, w.held, "the watch's creation")
	_, err := newClient(t, eps).Delete(ctxT(t), key)
	require.NoError(t, err)
	close(w.let)
	select {
	case <-o.Done():
	case <-time.After(lostWithin):
		t.Fatal("the ownership outlived its owner key")
	}
	require.ErrorIs(t, o.Err(), etcdcatalog.ErrOwnerChanged)
}

// A client whose Watcher was closed under the catalog (a public field of
// clientv3.Client, a neighbour may close it) can no longer watch an owner
// key: the ownership ends, where the watcher asked for a new watch and
// read the key again without a pause, for ever.
func TestOwnedWhoseWatcherClosedEnds(t *testing.T) {
	eps := etcdtest.Start(t)
	n := newNode(t, eps)
	o := own(t, n, "p")
	require.NoError(t, n.cat.Client().Watcher.Close())
	select {
	case <-o.Done():
	case <-time.After(lostWithin):
		t.Fatal("the ownership outlived its watch")
	}
	require.ErrorContains(t, o.Err(), "the watch ended before etcd created it")
	require.ErrorIs(t, o.Save(ctxT(t), "p", wal.KafkaID(1)), persistence.ErrFenced)
}

// Releasing an ownership once the catalog's client was closed under it
// sends nothing and says so at once: the client retried the delete a
// hundred times, about 2.5 s a release.
func TestReleaseOnAClosedClientEndsAtOnce(t *testing.T) {
	eps := etcdtest.Start(t)
	cli, err := clientv3.New(clientConfig(eps, nil))
	require.NoError(t, err)
	cat, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	require.NoError(t, err)
	o := own(t, node{cat: cat, session: s}, "p")
	_ = s.Close()
	require.NoError(t, cli.Close())
	began := time.Now()
	require.ErrorIs(t, o.Release(ctxT(t)), persistence.ErrClosed)
	require.Less(t, time.Since(began), 1500*time.Millisecond)
}
