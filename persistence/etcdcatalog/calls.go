package etcdcatalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

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
//
// Each call requires a leader, and is made again on the next member when
// one without a leader refuses it (onLeader).
type etcdCalls struct{ c *Catalog }

// Get reads one key, sent again when no answer comes (hedge): a read
// changes nothing, however many times it is made.
func (e etcdCalls) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	seen := e.c.revisions.begin()
	resp, err := catalogCall(e.c, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return hedge(e.c, &e.c.readTrips, maxHedges, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
			return onLeader(ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
				return e.c.client.Get(ctx, key, opts...)
			})
		})
	})
	if err == nil && !clientv3.OpGet(key, opts...).IsSerializable() {
		e.c.sawRevision(seen, resp.Header)
	}
	return resp, err
}

// Scan reads a page of keys from key on (opts), sent again when no answer
// comes (hedge), on an estimate of the pages' own, and once only: a page
// of thousands of keys takes longer than a read of one, and each copy
// reads it all again, so a cluster slow as a whole is sent one round of
// copies a page, not one every half second. A page sent once and held by
// a member that answers nothing held LoadAll, Inspect or the lowwater
// tool's list to its deadline, one page in three.
func (e etcdCalls) Scan(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	seen := e.c.revisions.begin()
	resp, err := catalogCall(e.c, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
		return hedge(e.c, &e.c.pageTrips, 1, ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
			return onLeader(ctx, func(ctx context.Context) (*clientv3.GetResponse, error) {
				return e.c.client.Get(ctx, key, opts...)
			})
		})
	})
	if err == nil && !clientv3.OpGet(key, opts...).IsSerializable() {
		e.c.sawRevision(seen, resp.Header)
	}
	return resp, err
}

// catalogCall makes call under ctx, ended by c's Close too; its error
// says so when ctx or the Close ended it (endedErr, closedErr), and on
// Open's client why its last try failed (keepLastTry).
func catalogCall[R any](c *Catalog, ctx context.Context, call func(context.Context) (R, error)) (R, error) {
	bounded, done := c.bound(ctx)
	defer done()
	var tries *lastTry
	if c.ownClient {
		tries = new(lastTry)
		bounded = context.WithValue(bounded, lastTryKey{}, tries)
	}
	resp, err := call(bounded)
	err = endedErr(ctx, err)
	if tries != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		if last := tries.err.Load(); last != nil {
			if why := status.Convert(*last).Message(); !strings.HasPrefix(why, context.DeadlineExceeded.Error()) &&
				!strings.HasPrefix(why, context.Canceled.Error()) {
				err = fmt.Errorf("%w (its last try failed: %s)", err, why)
			}
		}
	}
	return resp, c.closedErr(err)
}

// lastTry keeps the failure of a call's last try.
type lastTry struct{ err atomic.Pointer[error] }

type lastTryKey struct{}

// keepLastTry, a unary interceptor of Open's client, keeps in the call's
// lastTry why each try failed. clientv3 tries a call again while etcd is
// out of reach (connection refused, no leader yet), until its context
// ends, and then returns that context's error alone: the Warn line of each
// failed save said "context deadline exceeded", and the cause was in
// clientv3's own line of each try, hundreds of columns long, matched by
// its time. Inside clientv3's interceptor, it sees each try.
func keepLastTry(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil {
		return nil
	}
	// A try cut short by the call's end knows no more than that, and
	// would hide why the one before it failed; one cut short while it
	// waited for a connection says why there was none ("latest balancer
	// error: …"), and is kept.
	if ended := ctx.Err(); ended != nil && strings.HasPrefix(status.Convert(err).Message(), ended.Error()) {
		return err
	}
	if tries, ok := ctx.Value(lastTryKey{}).(*lastTry); ok {
		tries.err.Store(&err)
	}
	return err
}

// Txn is a transaction bound by Close until it is committed; every
// caller commits the transaction it makes.
func (e etcdCalls) Txn(ctx context.Context) clientv3.Txn { return &boundTxn{c: e.c, ctx: ctx} }

// boundTxn keeps what a transaction compares and does, for Commit to send,
// again if a member without a leader refuses it.
type boundTxn struct {
	c         *Catalog
	ctx       context.Context // the caller's
	cmps      []clientv3.Cmp
	then, els []clientv3.Op
}

func (t *boundTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.cmps = append(t.cmps, cs...); return t }
func (t *boundTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.then = append(t.then, ops...)
	return t
}
func (t *boundTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.els = append(t.els, ops...)
	return t
}

func (t *boundTxn) Commit() (*clientv3.TxnResponse, error) {
	seen := t.c.revisions.begin()
	resp, err := catalogCall(t.c, t.ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return onLeader(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return t.c.client.Txn(ctx).If(t.cmps...).Then(t.then...).Else(t.els...).Commit()
		})
	})
	if err == nil && !t.serializable() {
		t.c.sawRevision(seen, resp.Header)
	}
	return resp, err
}

// serializable reports whether etcd answers the transaction from the
// store of the member it reaches, as it does one that only reads, each
// read serializable (the reads of the owner keys Owns wait on): one a
// little behind answers with a revision below one seen before.
func (t *boundTxn) serializable() bool {
	// etcd's own rule (IsTxnSerializable): whatever it compares, every
	// operation of either branch a serializable read.
	for _, ops := range [][]clientv3.Op{t.then, t.els} {
		for _, op := range ops {
			if !op.IsGet() || !op.IsSerializable() {
				return false
			}
		}
	}
	return true
}

// revisions is what a catalog knows of etcd's revision, from the answers
// to its calls that etcd made linearizable (the others, serializable,
// come from a member's own store, which may be behind).
type revisions struct {
	mu      sync.Mutex
	highest int64 // guarded by mu
	// era counts the times etcd went back: an answer to a call begun in
	// an earlier era tells nothing of this one.
	era uint64 // guarded by mu
}

// seenRevision is what a call knew of etcd's revision as it began.
type seenRevision struct {
	floor int64
	era   uint64
}

func (r *revisions) begin() seenRevision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return seenRevision{r.highest, r.era}
}

// sawRevision takes the header of an answer to a call that began having
// seen seen. Below its floor, etcd went back in time: an answer made
// after another reflects that one's writes, and so has a revision at
// least as high, but for a store that lost them, wiped or restored from
// an older backup (or endpoints that lead to another cluster). A node
// can do nothing about that, and the stored checkpoints may be older than
// those it saved, or gone: the pchannels that recover from them replay
// their records. It says so at Error, once each time: an answer to a
// call begun before, whatever its revision, is of the era before. A node
// that saw a pchannel's record vanish otherwise logged nothing but its
// recovery from nothing, at Info, as on its first start.
func (c *Catalog) sawRevision(seen seenRevision, h *etcdserverpb.ResponseHeader) {
	if h == nil {
		return
	}
	r := &c.revisions
	r.mu.Lock()
	if seen.era != r.era {
		r.mu.Unlock()
		return
	}
	wentBack := h.Revision < seen.floor
	if wentBack {
		r.era++
	}
	if wentBack || h.Revision > r.highest {
		r.highest = h.Revision
	}
	r.mu.Unlock()
	if lg := c.client.GetLogger(); wentBack && lg != nil {
		// No stack: where the catalog saw it says nothing.
		lg.WithOptions(zap.AddStacktrace(zap.LevelEnablerFunc(func(zapcore.Level) bool { return false }))).Error(
			"etcd went back in time: it lost its data, or was restored from an older backup; "+
				"the checkpoints it holds may be older than those saved, or gone, and the pchannels that recover from them replay their records",
			zap.Int64("revisionSeen", seen.floor), zap.Int64("revisionNow", h.Revision), zap.Uint64("clusterID", h.ClusterId))
	}
}

// onLeader makes call under ctx, requiring a leader
// (clientv3.WithRequireLeader), and makes it again while a member refuses
// it (refusedHere), until one takes it or ctx ends. A member cut off from
// its peers, or in an election, has no leader, and without the
// requirement it held each call that landed there until the call's
// deadline, for as long as the cut lasted, though a quorum answered: with
// one member of three cut off from the others, a third of the saves
// waited out their whole deadline (5 s) in a trial, and a pchannel went
// 9–15 s without a save. A member whose applying has fallen more than
// 5,000 entries behind what it committed refuses a write too ("too many
// requests"), as one does just after a partition heals, and the others
// may not have: in trials, a node's saves met 72–311 such refusals in the
// seconds after a heal, each failing its save. Refused either way, a call
// did nothing, and costs a round trip. The client sends each call to the
// next member, round robin, so the call is made again at once,
// noLeaderTries times in a row (a member each, of three), then after a
// pause, which doubles up to a second: every member may refuse, in an
// election, an outage or an overload, and other calls take turns on the
// same members meanwhile.
func onLeader[R any](ctx context.Context, call func(context.Context) (R, error)) (R, error) {
	ctx = clientv3.WithRequireLeader(ctx)
	pause := noLeaderPause
	for refused := 1; ; refused++ {
		resp, err := call(ctx)
		if !refusedHere(err) || ctx.Err() != nil {
			return resp, err
		}
		if refused%noLeaderTries != 0 {
			continue
		}
		if sleep(ctx, pause) != nil {
			return resp, err
		}
		pause = min(2*pause, time.Second)
	}
}

// refusedHere reports whether err is a member's refusal of a call that
// another member may take: it has no leader, or is too far behind
// (onLeader).
func refusedHere(err error) bool {
	return errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrTooManyRequests)
}

// sleep waits for d, or until ctx ends, and then returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	wait := time.NewTimer(d)
	defer wait.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wait.C:
		return nil
	}
}

// noLeaderTries is how many calls in a row a member without a leader may
// refuse before onLeader pauses, and noLeaderPause its first pause (the
// client's own, between two tries of a read).
const (
	noLeaderTries = 3
	noLeaderPause = 25 * time.Millisecond
)

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
