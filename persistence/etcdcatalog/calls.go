package etcdcatalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/persistence"
)

// etcdCalls makes a catalog's calls to etcd, each ended by the catalog's
// Close. A call in flight on a member that answers nothing held its
// caller until the caller's own deadline, and with no deadline, on New's
// client (which Close leaves open), for ever; on Open's, it failed 2–3 s
// after Close with gRPC's "the client connection is closing". A call
// cut short by Close, or failing after it, fails with
// persistence.ErrClosed, the catalog's word for "nothing is done here
// again", besides its own error.
type etcdCalls struct{ c *Catalog }

func (e etcdCalls) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	bounded, done := e.c.bound(ctx)
	defer done()
	resp, err := e.c.client.Get(bounded, key, opts...)
	return resp, e.c.closedErr(endedErr(ctx, err))
}

func (e etcdCalls) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	bounded, done := e.c.bound(ctx)
	defer done()
	resp, err := e.c.client.Delete(bounded, key, opts...)
	return resp, e.c.closedErr(endedErr(ctx, err))
}

// Txn is a transaction bound by Close until it is committed; every
// caller commits the transaction it makes.
func (e etcdCalls) Txn(ctx context.Context) clientv3.Txn {
	bounded, done := e.c.bound(ctx)
	return &boundTxn{Txn: e.c.client.Txn(bounded), c: e.c, ctx: ctx, done: done}
}

type boundTxn struct {
	clientv3.Txn
	c    *Catalog
	ctx  context.Context // the caller's
	done func()
}

func (t *boundTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *boundTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *boundTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *boundTxn) Commit() (*clientv3.TxnResponse, error) {
	defer t.done()
	resp, err := t.Txn.Commit()
	return resp, t.c.closedErr(endedErr(t.ctx, err))
}

// endedErr is err, a call's failure, said to be ctx's error too once ctx
// has ended: etcd may answer a call whose deadline passed on the server
// with its own "request timed out", which errors.Is did not tell from a
// failure of etcd's. A deadline passed counts before ctx's timer has
// fired: etcd's answer may come first.
func endedErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	ended := ctx.Err()
	if d, ok := ctx.Deadline(); ended == nil && ok && !time.Now().Before(d) {
		ended = context.DeadlineExceeded
	}
	if ended == nil || errors.Is(err, ended) {
		return err
	}
	return fmt.Errorf("%w: %w", ended, err)
}

// bound is ctx, also ended by Close; done lets go of it.
func (c *Catalog) bound(ctx context.Context) (bounded context.Context, done func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.closing, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// closedErr is err, a call's failure, said to be persistence.ErrClosed
// too once the catalog is closed.
func (c *Catalog) closedErr(err error) error {
	if err == nil || !c.closed.Load() || errors.Is(err, persistence.ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", persistence.ErrClosed, err)
}
