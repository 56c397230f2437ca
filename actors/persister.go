package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/core/saveplan"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// persister is the PChannel actor's child that saves minima to the catalog.
// It is a thin shell over saveplan.Plan: the plan decides, the persister
// runs the one save in flight on its own goroutine and arms timers.
type persister struct {
	cfg  *config        // nil until the parent's persisterSync arrives
	plan *saveplan.Plan // nil until the parent's persisterSync arrives

	self   *actor.PID
	parent *actor.PID
	root   *actor.RootContext
	events *eventstream.EventStream

	save     *inFlight
	timer    *time.Timer
	timerSeq uint64
	// flushWaiter is the graceful stop waiting for a flushResult.
	flushWaiter *actor.PID
}

// inFlight is the one catalog call running off the mailbox.
type inFlight struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// persisterProps spawns every persister: the parent's persisterSync
// brings its configuration, so one Props serves all pchannels.
var persisterProps = actor.PropsFromProducer(func() actor.Actor { return &persister{} })

func (s *persister) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.MinimumAdvanced:
		// Before the sync there is no plan; the sync carries a minimum at
		// least as new as this one, so dropping it loses nothing.
		if s.plan != nil {
			s.do(s.plan.Offer(m.To))
		}
	case *saveDone:
		if m.from == s {
			s.saved(m)
		}
	case *retryDue:
		if m.seq == s.timerSeq && s.plan != nil {
			s.do(s.plan.TimerFired())
		}
	case *persisterSync:
		s.sync(m)
	case *flushRequest:
		s.flushWaiter = ctx.Sender()
		if s.plan == nil {
			s.sync((*persisterSync)(m))
		}
		s.do(s.plan.Hurry())
		s.answerFlush()
	case *actor.Started:
		s.self, s.parent = ctx.Self(), ctx.Parent()
		s.root, s.events = ctx.ActorSystem().Root, ctx.ActorSystem().EventStream
		ctx.Request(s.parent, &persisterStarted{})
	case *actor.Stopping, *actor.Restarting:
		s.cancel()
	}
}

// sync starts the plan from the parent's floor and minimum; a late sync
// (after a flush request did it) only offers its minimum.
func (s *persister) sync(m *persisterSync) {
	if s.plan == nil {
		s.cfg = m.cfg
		s.plan = saveplan.New(m.persisted, &lazyBackoff{schedule: &s.cfg.backoff}, s.cfg.minInterval)
	}
	s.do(s.plan.Offer(m.minimum))
	s.report()
}

// lazyBackoff builds its schedule's BackOff on the first failure: most
// pchannels never see one, and thousands of idle ones need not hold one.
// A BackOff built late behaves as one built early and reset since.
type lazyBackoff struct {
	schedule *Backoff
	b        backoff.BackOff
}

func (l *lazyBackoff) NextBackOff() time.Duration {
	if l.b == nil {
		l.b = l.schedule.New()
	}
	return l.b.NextBackOff()
}

func (l *lazyBackoff) Reset() {
	if l.b != nil {
		l.b.Reset()
	}
}

// do carries out a Step of the plan.
func (s *persister) do(step saveplan.Step) {
	if step.Save != nil {
		s.start(step.Save)
	}
	if step.Wait > 0 {
		s.timerSeq++
		seq, root, self := s.timerSeq, s.root, s.self
		stopTimer(s.timer)
		s.timer = time.AfterFunc(step.Wait, func() { root.Send(self, &retryDue{seq: seq}) })
	}
}

// start runs one save off the mailbox goroutine, bounded by the save
// timeout. A panic inside the catalog is caught here and re-raised in
// Receive (see saved), so that it crashes this actor, not the process.
func (s *persister) start(v wal.MessageID) {
	c, cancel := context.WithTimeout(context.Background(), s.cfg.saveTimeout)
	done := make(chan struct{})
	s.save = &inFlight{cancel: cancel, done: done}
	root, self, catalog, name, counters := s.root, s.self, s.cfg.catalog, s.cfg.pchannel, s.cfg.counters
	if counters != nil {
		counters.SavesInFlight.Add(1)
	}
	began := time.Now()
	go func() {
		defer close(done)
		defer cancel()
		res := &saveDone{from: s, value: v}
		func() {
			defer func() { res.panicked = recover() }()
			res.err = catalog.Save(c, name, v)
		}()
		res.latency = time.Since(began)
		if counters != nil {
			counters.SavesInFlight.Add(-1)
		}
		root.Send(self, res)
	}()
	s.report()
}

func (s *persister) saved(m *saveDone) {
	s.save = nil
	if m.panicked != nil && s.flushWaiter == nil {
		// Tell the parent nothing is in flight before crashing: its
		// supervision runs first, and the report of this save's start
		// would otherwise leave GetState saying SaveInFlight until the
		// restart.
		s.report()
		panic(m.panicked)
	}
	if m.panicked != nil {
		// A graceful stop is waiting on this flush, so the parent cannot
		// supervise a crash before the flush times out: the panic counts
		// as a failed save, retried within the flush timeout.
		m.err = fmt.Errorf("lowwater: catalog panicked in Save: %v", m.panicked)
	}
	// The plan moves first and the parent hears of it before any event is
	// published, so that a GetState sent on seeing the event already sees
	// its effect: the parent's mailbox has the report queued ahead of it.
	attempt := s.plan.Attempt()
	var stored *persistence.StoredAheadError
	var step saveplan.Step
	switch {
	case m.err == nil:
		step = s.plan.Succeeded()
		if s.flushWaiter != nil && step.Save == nil && step.Wait > 0 {
			// A graceful stop is waiting: the min save interval spaces
			// saves for the catalog's sake, not the last one.
			step = s.plan.Hurry()
		}
		s.report()
		s.events.Publish(&messages.CheckpointPersisted{Header: messages.NewHeader(s.cfg.pchannel), Value: m.value, Attempts: attempt, Latency: m.latency})
	case errors.As(m.err, &stored):
		// Another writer got ahead; its value is durable, so it is ours too.
		step = s.plan.Adopt(stored.Stored)
		s.report()
		s.failed(m, attempt, 0)
	case errors.Is(m.err, persistence.ErrFenced):
		s.plan.Fence()
		s.report()
		s.failed(m, attempt, 0)
	default:
		step = s.plan.Failed()
		s.report()
		s.failed(m, attempt, step.Wait)
	}
	s.do(step)
	s.answerFlush()
}

func (s *persister) failed(m *saveDone, attempt int, next time.Duration) {
	s.events.Publish(&messages.PersistFailed{Header: messages.NewHeader(s.cfg.pchannel), Value: m.value, Attempt: attempt, Err: m.err, NextRetry: next})
	s.cfg.logger.Warn("save failed", zap.Stringer("checkpoint", m.value), zap.Int("attempt", attempt),
		zap.Duration("nextRetry", next), zap.Duration("latency", m.latency), zap.Error(m.err))
}

// report keeps the parent's view (persisted, in flight, fenced) current.
func (s *persister) report() {
	s.root.Send(s.parent, &persisterStatus{persisted: s.plan.Persisted(), inFlight: s.save != nil, fenced: s.plan.Fenced()})
}

func (s *persister) answerFlush() {
	if s.flushWaiter == nil || !s.plan.Settled() {
		return
	}
	s.root.Send(s.flushWaiter, &flushResult{persisted: s.plan.Persisted()})
	s.flushWaiter = nil
}

// cancel ends the save in flight and waits for its goroutine, so that no
// goroutine outlives the actor. A catalog that honours its context returns
// at once; the wait is bounded by the save timeout either way.
func (s *persister) cancel() {
	stopTimer(s.timer)
	if s.save == nil {
		return
	}
	s.save.cancel()
	select {
	case <-s.save.done:
	case <-time.After(s.cfg.saveTimeout):
		s.cfg.logger.Error("catalog ignored cancellation; abandoning its goroutine")
	}
	s.save = nil
}
