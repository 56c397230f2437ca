package etcdcatalog_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// callTimeout bounds every call a test makes when it does not test deadlines.
const callTimeout = 10 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// rpcCounter counts the unary gRPC calls a client makes, by method, but
// for the reads of owner keys: each Owned makes one once its watch is
// created, and the catalog reads the keys its waiting Owns wait on every
// 1–2 s, each when it will; a save never reads an owner key on its own (a
// transaction's compares and reads do).
type rpcCounter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *rpcCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if r, ok := req.(*pb.RangeRequest); ok && strings.HasSuffix(string(r.Key), "/owner") {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	if r, ok := req.(*pb.TxnRequest); ok && ownerReadsOnly(r) {
		return invoker(ctx, method, req, reply, cc, opts...) // a waiting Own's, read when they will
	}
	c.mu.Lock()
	if c.calls == nil {
		c.calls = make(map[string]int)
	}
	c.calls[method[strings.LastIndex(method, "/")+1:]]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the counts so far and starts again from zero.
func (c *rpcCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := c.calls
	c.calls = nil
	if calls == nil {
		calls = map[string]int{}
	}
	return calls
}

func clientConfig(endpoints []string, counter *rpcCounter) clientv3.Config {
	cfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if counter != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithChainUnaryInterceptor(counter.intercept)}
	}
	return cfg
}

// openCatalog opens a catalog that owns its client, closed by t.Cleanup.
func openCatalog(t testing.TB, endpoints []string, counter *rpcCounter, opts ...etcdcatalog.Option) *etcdcatalog.Catalog {
	t.Helper()
	c, err := etcdcatalog.Open(clientConfig(endpoints, counter), opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := c.Close(); err != nil && !errors.Is(err, persistence.ErrClosed) {
			t.Errorf("Close = %v", err)
		}
	})
	return c
}

// newClient returns a raw client, closed by t.Cleanup.
func newClient(t testing.TB, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientConfig(endpoints, nil))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cli.Close()) })
	return cli
}

func checkpointKey(pchannel string) string {
	return etcdcatalog.DefaultPrefix + "/wal/" + pchannel + "/consume-checkpoint"
}

// pchannelOf is the pchannel whose checkpoint key is key, of any prefix.
func pchannelOf(key string) string {
	_, rest, _ := strings.Cut(key[strings.LastIndex(key, "/wal/"):], "/wal/")
	return strings.TrimSuffix(rest, "/consume-checkpoint")
}

func ownerKey(pchannel string) string {
	return etcdcatalog.DefaultPrefix + "/wal/" + pchannel + "/owner"
}

// rawRecord reads and decodes the record at key, with its mod revision.
func rawRecord(t testing.TB, cli *clientv3.Client, key string) (persistence.Record, int64) {
	t.Helper()
	resp, err := cli.Get(ctxT(t), key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "no record at %s", key)
	rec, err := persistence.DecodeRecord(pchannelOf(key), resp.Kvs[0].Value)
	require.NoError(t, err)
	return rec, resp.Kvs[0].ModRevision
}

func currentRevision(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(ctxT(t), "\x00")
	require.NoError(t, err)
	return resp.Header.Revision
}

// history returns every value written at key from revision from up to and
// including revision to, in order, read back through a watch.
func history(t testing.TB, cli *clientv3.Client, key string, from, to int64) []wal.MessageID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var out []wal.MessageID
	if to < from {
		return out
	}
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(from)) {
		require.NoError(t, wr.Err())
		for _, ev := range wr.Events {
			require.Equal(t, mvccpb.PUT, ev.Type, "event %v at revision %d", ev.Type, ev.Kv.ModRevision)
			rec, err := persistence.DecodeRecord(pchannelOf(key), ev.Kv.Value)
			require.NoError(t, err)
			out = append(out, rec.Checkpoint)
			if ev.Kv.ModRevision >= to {
				return out
			}
		}
	}
	t.Fatalf("watch of %s ended before revision %d", key, to)
	return nil
}

// requireIncreasing checks that ids strictly increase.
func requireIncreasing(t testing.TB, ids []wal.MessageID) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		require.True(t, ids[i-1].LT(ids[i]), "history goes from %s to %s at %d", ids[i-1], ids[i], i)
	}
}

// waitClosed waits for ch to close, failing after d.
func waitClosed(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("%s not within %v", what, d)
	}
}
