package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/wal"
)

// joinGrace is how long ending a catalog call waits for its goroutine after
// cancelling it. A catalog that honours its context returns well within it;
// one that does not is abandoned (logged, counted in
// Counters.AbandonedCalls) and its late result ignored, so that no stop
// waits on third-party code longer than this.
const joinGrace = 100 * time.Millisecond

// call is one catalog call (Load or Save) running off the mailbox. Recovery
// and saves run theirs through it alike:
//
//   - the call is bounded by a deadline (the save timeout);
//   - a panic inside the catalog becomes an error, never a crash;
//   - its result comes back to the actor as a callDone tagged with seq, so
//     that a result of a call the actor no longer waits for is told apart
//     and ignored;
//   - end cancels it and joins its goroutine within joinGrace;
//   - wait lets a stop wait for it, up to a deadline, without the mailbox.
type call struct {
	seq    uint64
	cancel context.CancelFunc
	done   chan struct{}
	// result is written by the call's goroutine before done is closed.
	result callDone
}

// callDone carries the outcome of a catalog call to the actor that started
// it. value is what Load returned or what Save saved.
type callDone struct {
	seq     uint64
	value   wal.MessageID
	err     error
	latency time.Duration
}

// startCall runs fn off the mailbox, bounded by timeout, and sends its
// outcome to self. op names the call in errors ("Load", "Save").
func startCall(root *actor.RootContext, self *actor.PID, seq uint64, timeout time.Duration, op string, fn func(context.Context) (wal.MessageID, error)) *call {
	c, cancel := context.WithTimeout(context.Background(), timeout)
	k := &call{seq: seq, cancel: cancel, done: make(chan struct{})}
	began := time.Now()
	workers.Go(func() {
		defer close(k.done)
		defer cancel()
		v, err := guard(c, op, fn)
		k.result = callDone{seq: seq, value: v, err: err, latency: time.Since(began)}
		root.Send(self, &k.result)
	})
	return k
}

// guard runs fn, turning a panic into an error.
func guard(ctx context.Context, op string, fn func(context.Context) (wal.MessageID, error)) (v wal.MessageID, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("lowwater: catalog panicked in %s: %v", op, r)
		}
	}()
	return fn(ctx)
}

// wait waits until the call returned or deadline passed, whichever comes
// first, and reports its result if it returned. The result is also on its
// way to the mailbox; the caller must then treat that message as stale.
func (k *call) wait(deadline time.Time) (callDone, bool) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-k.done:
		return k.result, true
	case <-t.C:
		return callDone{}, false
	}
}

// end cancels the call and joins its goroutine within joinGrace; a call
// still running then is abandoned: logged, counted, its result ignored.
func (k *call) end(cfg *config, op string) {
	if k == nil {
		return
	}
	k.cancel()
	t := time.NewTimer(joinGrace)
	defer t.Stop()
	select {
	case <-k.done:
	case <-t.C:
		if cfg.counters != nil {
			cfg.counters.AbandonedCalls.Add(1)
		}
		cfg.logger.Error("catalog ignored cancellation; abandoning the call", zap.String("op", op), zap.Duration("waited", joinGrace))
	}
}
