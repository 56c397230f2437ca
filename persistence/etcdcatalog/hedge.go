package etcdcatalog

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A member that answers nothing (stopped by SIGSTOP, a host that hangs, a
// disk that does not return, a partition that drops packets) holds each
// call the client sends it until the call's deadline, and the client sends
// it one call in three, round robin, until its keep-alive drops it (12 s
// with Open's). A Batcher's transaction held so kept its commit slot to the
// batch timeout, and within a few transactions every slot was held so: in a
// trial, every pchannel of the node went 12 s without a save. A catalog's
// saves hold its call slots (WithMaxConcurrentCalls) so, to their
// deadlines, and fill them when many pchannels save often. So a save's
// transaction with no answer well past its usual round trip is sent again,
// and again, each time after twice the wait before, and the first answer
// wins. The client picks the member of each copy, round robin among all its
// calls, and a copy cannot steer it: each goes to the member that answers
// nothing about one time in three. Sent again one copy at a time, a
// transaction in a test of 4 s had five copies in a row held, and waited
// 1.6 s; so each time it is sent as many times as the client has other
// members, and two copies at once are both held one time in nine.
//
// Sending one twice is safe. Each key's compare is the record the
// transaction replaces, so of two copies that both reach etcd, the second
// finds the first's record and writes nothing; its answer, should it come
// first, reads that record, which judges the save done (equal). A copy a
// frozen member delivers later finds that record or a later one, and
// writes nothing either. Reads of a few keys (Load, a save's read, an
// Owned's read of its owner key, the reads of the owner keys Owns wait on)
// are sent again the same way, on an estimate of their own: a read changes
// nothing. So are the pages of LoadAll and the tools' scans, on one of
// theirs, one round of copies each (etcdCalls.Scan). An Own's claim, its
// retake of a key its session holds, a release's delete, a session's grant
// and revoke, and an operator's writes are sent again on the saves'
// estimate, each safe for a reason of its own (claim, retake, deleteOwner,
// NewSession, CloseSession, deleteRecord, overwrite). Each write compares
// what it read, so that a copy delivered late, after a later write, writes
// nothing.

// maxHedges is how many times a transaction is sent again at most, and
// maxHedgeGap the longest the wait between two of them grows to. The
// copies go on until the time the transaction has runs out, rather than
// all within the first few waits, and no more than half a second apart: a
// leader that stops answering holds every copy that reaches a member still
// following it, until the others elect a new one (after an election
// timeout, 1 s by default). A trial with the leader frozen or killed saw
// every copy sent within 350 ms held so; with the wait doubling to the
// end, the saves went again at the copies of 1.55 or 3.15 s, whichever
// came after the election. At the least wait, the twelfth round goes out
// after 5.75 s.
const (
	maxHedges   = 12
	maxHedgeGap = 500 * time.Millisecond
)

// Bounds of the wait before a transaction is first sent again: at least
// minHedge, below which a pause of the collector or a slow fsync would
// send one twice for nothing, and twice the mean round trip, so that a
// cluster far away whose transactions take about as long each is sent
// few copies; firstHedge before any round trip of the kind was measured
// (but for reads, estimate). All are capped at half the time the
// transaction has.
const (
	minHedge   = 50 * time.Millisecond
	firstHedge = time.Second
)

// roundTrip estimates how long a transaction takes, as TCP estimates a
// round trip to set its retransmission timeout (RFC 6298): a smoothed mean
// and mean deviation of the times measured, each that of the copy that
// answered, from its own sending. One answer slow by a second raises the
// wait before a copy to about a second at once, so a cluster slow as a
// whole is sent few copies for long.
type roundTrip struct {
	srtt, rttvar time.Duration
}

func (r *roundTrip) observe(d time.Duration) {
	if r.srtt == 0 {
		r.srtt, r.rttvar = d, d/2
		return
	}
	r.rttvar = (3*r.rttvar + (r.srtt - d).Abs()) / 4
	r.srtt = (7*r.srtt + d) / 8
}

// hedgeAfter is how long a transaction waits for an answer before it is
// first sent again: the mean and four deviations, within its bounds, and
// no more than most, half the time it has; ok is false when a copy sent
// then would not be answered in the time left, the mean being longer.
func (r roundTrip) hedgeAfter(most time.Duration) (wait time.Duration, ok bool) {
	d := firstHedge
	if r.srtt != 0 {
		d = max(r.srtt+4*r.rttvar, 2*r.srtt, minHedge)
	}
	return min(d, most), r.srtt <= most
}

// roundTrips is an estimate a catalog keeps, one for its saves (its
// Batcher's transactions among them) and one for its reads, which take no
// fsync and are answered sooner.
type roundTrips struct {
	mu sync.Mutex
	roundTrip
}

// estimate is est; for the reads of a few keys, while they have measured
// nothing, the longest of the saves' and the pages' estimates, if either
// has measured any: a catalog's first read after its pages (a node's
// preload, the lowwater tool's list before its repairs) waited firstHedge,
// a second, before its first copy, where the pages told that a round trip
// took a few milliseconds. A read takes no longer than a save, which
// syncs a disk, or a page of keys. A save or a page borrows nothing: a
// read's estimate would send a burst of them again at 50 ms.
func (c *Catalog) estimate(est *roundTrips) roundTrip {
	r := est.get()
	if r.srtt != 0 || est != &c.readTrips {
		return r
	}
	for _, slower := range []*roundTrips{&c.saveTrips, &c.pageTrips} {
		if o := slower.get(); o.srtt > r.srtt {
			r = o
		}
	}
	return r
}

func (r *roundTrips) get() roundTrip {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.roundTrip
}

// commit makes a transaction that writes under ctx (call), as hedge says,
// on the saves' estimate. Only a transaction that may be sent twice is
// made so: a save's, whose compare is the record it replaces; an owner
// key's claim, retake or delete, whose compares are the key's absence, its
// revision or its token.
func (c *Catalog) commit(ctx context.Context, call func(context.Context) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	return hedge(c, &c.saveTrips, maxHedges, ctx, call)
}

// hedge makes call under ctx, sent again as hedged says once hedgeAfter
// has passed with no answer, or half the time ctx has left, as many times
// each time as the client has other members, rounds times at most; the
// round trip of the copy that answers feeds est. A client of one member is
// sent one copy: another would go where the first went.
func hedge[R any](c *Catalog, est *roundTrips, rounds int, ctx context.Context, call func(context.Context) (R, error)) (R, error) {
	others := len(c.client.Endpoints()) - 1
	if others < 1 {
		return call(ctx)
	}
	most := time.Duration(math.MaxInt64)
	if d, ok := ctx.Deadline(); ok {
		most = time.Until(d) / 2
	}
	if most < minHedge {
		return call(ctx) // too near its end for a copy to help
	}
	firstCopy := func() (time.Duration, bool) { return c.estimate(est).hedgeAfter(most) }
	if _, ok := firstCopy(); !ok {
		return call(ctx) // a copy would come too late
	}
	a := hedged(ctx, firstCopy, others, rounds, call)
	if a.err == nil {
		est.mu.Lock()
		est.observe(a.took)
		est.mu.Unlock()
	}
	return a.resp, a.err
}

// answer is what one copy of a call got, in how long.
type answer[R any] struct {
	resp R
	err  error
	took time.Duration
}

// hedged makes call under ctx, and makes it again, fanout copies at once,
// concurrently, when firstCopy's wait passes with no answer, then after
// twice that, and so on, the wait growing to maxHedgeGap (or the first
// wait, if longer), rounds times at most (no more than maxHedges).
//
// firstCopy is asked again once its wait has passed, and the copies wait
// for what it says then: in a burst, every call's wait was set from
// quieter times, and the answers of the first calls tell how long the
// cluster now takes. A node that began to wait for 1,000 pchannels cut
// short a median of 114 copies in 14 runs of a trial, against 1,082 sent
// at the estimate each call began with. Once firstCopy says a copy
// would not be answered in time (ok false), none is sent on the timer.
//
// The first answer without an error wins and the other copies are cut
// short, as they are by a refusal that every member would make
// (refusedByAll). Another error is the answer once no copy is left to
// wait for, unless its member failed (memberFailed) and rounds are left:
// the next round then goes, at once if it is the first, else on the
// timer. The copies have all returned when hedged does.
func hedged[R any](ctx context.Context, firstCopy func() (time.Duration, bool), fanout, rounds int, call func(context.Context) (R, error)) answer[R] {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rounds = min(rounds, maxHedges)
	answers := make(chan answer[R], 1+rounds*fanout)
	pending, hedges := 0, 0
	send := func(n int) {
		for range n {
			pending++
			go func() {
				began := time.Now()
				resp, err := call(ctx)
				answers <- answer[R]{resp, err, time.Since(began)}
			}()
		}
	}
	began := time.Now()
	wait, _ := firstCopy()
	longest := max(wait, maxHedgeGap)
	next := time.NewTimer(wait)
	defer next.Stop()
	sendRound := func() {
		send(fanout)
		hedges++
		wait = min(2*wait, longest)
		next.Reset(wait)
	}
	send(1)
	var last answer[R]
	for pending > 0 {
		select {
		case last = <-answers:
			pending--
			switch {
			case last.err == nil || refusedByAll(last.err):
				cancel()
				for ; pending > 0; pending-- {
					<-answers
				}
			case pending == 0 && hedges < rounds && ctx.Err() == nil && memberFailed(last.err):
				// The call would end here. Its member failing says
				// nothing of the others, but a round at once each time
				// would be a burst where they all fail at once.
				if hedges > 0 && !waitFor(ctx, next.C) {
					break
				}
				sendRound()
			}
		case <-next.C:
			if hedges == 0 {
				now, ok := firstCopy()
				if !ok {
					hedges = rounds // a copy would come too late
					break
				}
				if now > time.Since(began) {
					// The cluster answers slower now: the copies go on
					// from the wait it takes.
					next.Reset(now - time.Since(began))
					wait, longest = now, max(now, maxHedgeGap)
					break
				}
			}
			if hedges < rounds && ctx.Err() == nil {
				sendRound()
			}
		}
	}
	return last
}

// waitFor waits for c, or until ctx ends, and reports whether c came.
func waitFor(ctx context.Context, c <-chan time.Time) bool {
	select {
	case <-c:
		return true
	case <-ctx.Done():
		return false
	}
}

// refusedByAll reports whether err is etcd's refusal of the call itself,
// which every member makes alike: a lease it does not know (a session
// that ended), a revision compacted away, too many operations in a
// transaction, a request it finds malformed or not allowed. A copy held by
// a member that answers nothing would otherwise keep such an answer, and
// the Own of a session that ended, which fails at once, waiting to its
// deadline. An error of the connection, or of a member without a leader,
// is not: another member may answer.
func refusedByAll(err error) bool {
	var e rpctypes.EtcdError
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition,
		codes.OutOfRange, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// memberFailed reports whether err is the failure of the member a call
// went to, or of the client's connection to it, which says nothing of
// the call: another member may answer it. A connection to a member that
// answers nothing fails when the client's keep-alive gives it up, and
// every call held there with it, code Unavailable; clientv3 makes no
// write again then. In a trial, 5 of 1,000 Owns waiting on a node failed
// so, their claims sent as the connection dropped and before their first
// copies. etcd's own timeouts of a request are Unavailable too.
func memberFailed(err error) bool {
	if e := (rpctypes.EtcdError{}); errors.As(err, &e) {
		return e.Code() == codes.Unavailable
	}
	return status.Code(err) == codes.Unavailable
}
