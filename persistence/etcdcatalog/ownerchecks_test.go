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
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
)

// ownerReads watches a client's reads of owner keys: the reads of one key,
// and the transactions of serializable reads, refusing those of more than
// most reads as a cluster of --max-txn-ops=most would.
type ownerReads struct {
	most int
	// enough is closed once the transactions let through have read want
	// keys.
	want   int
	enough chan struct{}

	mu                  sync.Mutex
	single, txns, keys  int // reads of one key; transactions let through, and their reads
	refused, largestRef int // transactions refused, and the most reads of one
}

func (r *ownerReads) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := r.count(req); err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *ownerReads) count(req any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch q := req.(type) {
	case *pb.RangeRequest:
		if q.Serializable && strings.HasSuffix(string(q.Key), "/owner") {
			r.single++
		}
	case *pb.TxnRequest:
		if !ownerReadsOnly(q) {
			break
		}
		if len(q.Success) > r.most {
			r.refused++
			r.largestRef = max(r.largestRef, len(q.Success))
			return rpctypes.ErrGRPCTooManyOps
		}
		r.txns++
		r.keys += len(q.Success)
		if r.keys >= r.want && r.enough != nil {
			close(r.enough)
			r.enough = nil
		}
	}
	return nil
}

func ownerReadsOnly(q *pb.TxnRequest) bool {
	if len(q.Compare) > 0 || len(q.Success) == 0 {
		return false
	}
	for _, op := range q.Success {
		get := op.GetRequestRange()
		if get == nil || !get.Serializable || !strings.HasSuffix(string(get.Key), "/owner") {
			return false
		}
	}
	return true
}

// A node standing by for many pchannels reads their owner keys together,
// a few dozen to a transaction, not each on its own: before, each waiting
// Own read its key every 1–2 s. A cluster that refuses a transaction of so
// many reads is sent smaller ones from then on.
func TestWaitingOwnsReadTheirOwnersTogether(t *testing.T) {
	const pchannels, most = 100, 20
	eps := etcdtest.Start(t)
	a := newNode(t, eps)
	for i := range pchannels {
		own(t, a, fmt.Sprintf("p%03d", i))
	}

	reads := &ownerReads{most: most, want: 2 * pchannels, enough: make(chan struct{})}
	enough := reads.enough
	cfg := clientConfig(eps, nil)
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(reads.intercept))
	b, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	session, err := b.NewSession(ctxT(t), 60)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.CloseSession(context.Background(), session)) })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, pchannels)
	for i := range pchannels {
		go func() {
			_, err := b.Own(ctx, fmt.Sprintf("p%03d", i), session)
			errs <- err
		}()
	}
	select {
	case <-enough:
	case <-time.After(callTimeout):
		t.Fatal("the waiting Owns' keys were not read twice over")
	}
	cancel()
	for range pchannels {
		require.ErrorIs(t, <-errs, context.Canceled)
	}

	reads.mu.Lock()
	defer reads.mu.Unlock()
	require.Zero(t, reads.single, "owner keys read one at a time")
	// 64 refused, then 32 (or fewer, had fewer Owns waited at the first
	// read), then never again.
	require.GreaterOrEqual(t, reads.refused, 1)
	require.LessOrEqual(t, reads.refused, 2)
	require.Greater(t, reads.largestRef, most)
	// Rounds of 100 keys, 10 to 20 to a transaction once the halving is
	// done (fewer, should a round have come before every Own waited): 5
	// keys to a transaction at the least, on the mean, where each wait
	// reading its own key read 1.
	require.GreaterOrEqual(t, reads.keys, 2*pchannels)
	require.GreaterOrEqual(t, reads.keys, 5*reads.txns, "%d transactions for %d keys", reads.txns, reads.keys)
}
