package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/core/saveplan"
	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// persister is the PChannel actor's child that saves minima to the catalog.
// It is a thin shell over saveplan.Plan: the plan decides, the persister
// runs the one save in flight off its mailbox (see call) and arms timers.
//
// The plan is the one owner of what is persisted, what is in flight and
// whether the pchannel is fenced. The persister publishes that to a
// saveStatus the parent only reads (GetState, Stopped), and tells the
// parent of the one change it must act on: fencing (ownershipLost).
//
// Its configuration and that status come through its producer closure
// (persisterProps), so a restart rebuilds it from the same ones with no
// handshake; the parent then offers it the current minimum. Between the
// two go: the minimum (offer, then MinimumAdvanced on each drained rise),
// flushRequest and flushed, and ownershipLost. A save needs no hand-off
// between goroutines of its own when nothing else holds the persister: the
// PChannel actor's goroutine, having let go of its mailbox after the
// drained rise, runs the persister's (handOver); the save runs on the
// goroutine of the handler that started it, once that handler returned
// and the mailbox was let go (runAfter); and its result is handled on the
// same goroutine (deliver).
type persister struct {
	cfg    *config
	status *saveStatus
	// fencedBy is why saving was fenced, nil until it is (savePoint).
	fencedBy error
	// plan and site are held by value, not pointed to: a save reads both,
	// and with 10,000 pchannels each object apart was one more cache miss
	// per save (about 4 % of a save's CPU).
	plan saveplan.Plan

	self   *actor.PID
	parent *actor.PID
	root   *actor.RootContext
	events *eventstream.EventStream
	// inbox is the persister's own mailbox: a save runs on its goroutine
	// once the handler that started it returns, and its result comes
	// back straight to it (see mailbox.runAfter and deliver).
	inbox    *mailbox
	inboxRef **mailbox

	// offered is set by the parent's offer, the first minimum a new
	// persister takes.
	offered bool

	save *call
	// site is what every save shares: the persister's callCatalog.
	site     callSite
	timer    *time.Timer
	timerSeq uint64
	// watchdog fires overdueCheck; watching is set while it is armed, and
	// overdueSeq is the seq of the last save reported overdue (overdue).
	watchdog   *time.Timer
	watching   bool
	overdueSeq uint64
	// flushWaiter is the graceful stop waiting for flushed, for the
	// request flushSeq.
	flushWaiter *actor.PID
	flushSeq    uint64
	// over is set by Stopping or Restarting: this incarnation takes no
	// more messages of its own (receiveDirect).
	over bool
	// stopped is set by Stopping alone: the mailbox refuses what is left
	// in it (closing).
	stopped bool
	// stoppedSeen is set by Stopped: protoactor has let go of the
	// persister (gone).
	stoppedSeen bool
	// toldBrokenAhead is set once a stored-ahead refusal that breaks the
	// Catalog contract was logged (brokenAhead); notAheadRun counts the
	// refusals in a row that named a value not ahead of the one refused.
	toldBrokenAhead bool
	notAheadRun     int
	// failure is the error of the last save that failed since the last
	// one that succeeded; unanswered is set by Stopping when a save was
	// still in the catalog, and unansweredOverdue when it had been
	// reported overdue. A graceful stop that could not flush says so
	// (savePoint): the catalog failed, and how, or never answered.
	failure                       error
	unanswered, unansweredOverdue bool
	// failingSince is when the first save that failed since the last
	// one that succeeded began: the line of the next success says how
	// long saving failed.
	failingSince time.Time
}

// overdueCheck is the watchdog's message: see persister.overdue.
type overdueCheck struct{}

// saveStatus is the persister's plan as the parent sees it: written by the
// persister only (on its mailbox goroutine), read by the parent. It outlives
// a restart of the persister, whose new plan starts from its floor.
//
// A mutex, not an atomic pointer to a fresh savePoint: the persister writes
// it twice per save and the parent reads it only on GetState and at a
// stop, so a write should cost no allocation.
type saveStatus struct {
	mu sync.Mutex
	sp savePoint // guarded by mu
	// crashed carries why the persister crashed, from its failing
	// goroutine (crashed) to the parent, which takes it with the Failure
	// (HandleFailure) or, waiting for a flush, before (flush).
	crashed chan any
}

// savePoint is one consistent reading of the plan.
type savePoint struct {
	persisted wal.MessageID
	inFlight  bool
	fenced    bool
	// fencedBy is why, the refused save's error or the ownership's
	// cause: by whom, or how the ownership ended, where ErrFenced alone
	// said nothing more.
	fencedBy error
	closed   bool // the catalog is closed: nothing is saved again
	// failure, unanswered and overdue are the persister's (see there).
	failure             error
	unanswered, overdue bool
}

func (s *saveStatus) load() savePoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sp
}

func (s *saveStatus) store(sp savePoint) {
	s.mu.Lock()
	s.sp = sp
	s.mu.Unlock()
}

func newSaveStatus(persisted wal.MessageID) *saveStatus {
	return &saveStatus{sp: savePoint{persisted: persisted}, crashed: make(chan any, 1)}
}

// persisterProps spawns the persister of one pchannel: the producer closure
// carries its configuration and status, so that a restart rebuilds it from
// the same ones, with no handshake.
//
// The mailbox is made after the actor, once for all its restarts: it is
// in *inbox once spawned, for the persister (on Started) and its parent.
func persisterProps(cfg *config, status *saveStatus) (props *actor.Props, inbox **mailbox) {
	inbox = new(*mailbox)
	return actor.PropsFromProducer(func() actor.Actor { return &persister{cfg: cfg, status: status, inboxRef: inbox} },
		actor.WithMailbox(func() actor.Mailbox {
			m := newMailbox()
			m.persister = true
			*inbox = m
			return m
		})), inbox
}

func (s *persister) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *flushRequest:
		s.flushWaiter, s.flushSeq = ctx.Sender(), m.seq
		s.do(s.plan.Flush())
		s.answerFlush()
	case *actor.Stopped:
		s.stoppedSeen = true
	case *actor.Started:
		s.self, s.parent = ctx.Self(), ctx.Parent()
		s.root, s.events = ctx.ActorSystem().Root, ctx.ActorSystem().EventStream
		s.inbox = *s.inboxRef
		s.ready()
	case *actor.Stopping, *actor.Restarting:
		_, s.stopped = m.(*actor.Stopping)
		s.over = true
		stopTimer(s.timer)
		stopTimer(s.watchdog)
		k := s.save
		never := k.end(s.cfg)
		if never && s.cfg.counters != nil {
			s.cfg.counters.savesInFlight.Add(-1) // it never ran
		}
		s.save = nil
		res, ok := k.joined()
		switch {
		case k == nil || never || ok && res.err == nil:
		case ok && !errors.Is(answered(res.err), context.Canceled):
			s.failure = res.err // it failed of itself as the stop came
		default:
			// In the catalog at the stop, or ended by the stop's cancel.
			s.unanswered, s.unansweredOverdue = true, k.seq == s.overdueSeq
		}
		if ok && res.err == nil && s.plan.InFlight() != nil {
			// The catalog acknowledged the save before it was joined, and
			// its result had no turn in the mailbox: it is durable all the
			// same, and Stopped must not call it dropped. Published on a
			// goroutine of its own (publishLast): a subscriber that ended
			// this one would cut protoactor's stop or restart short.
			value, attempt := s.plan.InFlight(), s.plan.Attempt()
			s.plan.Succeeded()
			s.report()
			publishLast(s.events, s.cfg, &messages.CheckpointPersisted{Header: messages.Header{PChannel: s.cfg.pchannel, At: k.ended(&res)},
				Value: value, Attempts: attempt, Latency: res.latency, Late: k.seq == s.overdueSeq})
		}
		s.report()
	default:
		if !s.receiveDirect(m) && ctx.Sender() != nil {
			// It takes no message from users: a request gets a typed
			// error, as the pchannel's does, rather than a timeout.
			ctx.Respond(fmt.Errorf("%w: %T: a persister takes its parent's messages only", messages.ErrUnknownMessage, m))
		}
	}
}

// closing tells the mailbox to refuse user messages (mailbox.refuse): the
// Stopping handler has run, and protoactor would drop them unanswered.
func (s *persister) closing() bool { return s.stopped }

func (s *persister) gone() bool { return s.stoppedSeen }

// ready makes what every save shares (the call site) and the plan, which
// starts from the status a predecessor left: on Started, once the
// persister knows its addresses and its mailbox.
func (s *persister) ready() {
	s.site = callSite{root: s.root, self: s.self, op: "Save", fn: s, timeout: s.cfg.saveTimeout, inbox: s.inbox}
	if starter := s.cfg.starter; starter != nil {
		s.site.starter, s.site.pchannel = starter, s.cfg.pchannel
		if c := s.cfg.counters; c != nil {
			s.site.inFlight = &c.savesInFlight
		}
	}
	s.plan = *saveplan.New(s.status.load().persisted, &lazyBackoff{schedule: &s.cfg.backoff}, s.cfg.minInterval)
}

// receiveDirect takes the persister's own messages, from Receive or
// straight from the mailbox (see directReceiver).
func (s *persister) receiveDirect(msg any) bool {
	if s.over {
		return false
	}
	switch m := msg.(type) {
	case *messages.MinimumAdvanced:
		// Rises sent to a crashed predecessor wait in the mailbox and
		// reach the restarted persister first; the offer behind them is
		// newer. Until it comes they are stale.
		if s.offered {
			s.offer(m.To)
		}
	case minimumFell:
		if s.offered {
			s.offer(m.to)
		}
		// Held, or stale (a restarted persister's, before its offer of
		// the minimum now): the Add it came from may be answered.
		m.reply.answer(s.root)
	case offer:
		s.offered = true
		s.do(s.plan.Offer(m.minimum))
	case *callDone:
		if s.save != nil && m.seq == s.save.seq {
			s.saved(m)
		}
	case *timerFired:
		if m.seq == s.timerSeq {
			s.do(s.plan.TimerFired())
		}
	case overdueCheck:
		s.overdue()
	default:
		return false
	}
	return true
}

// lazyBackoff builds its schedule's BackOff on the first failure: most
// pchannels never see one, and thousands of idle ones need not hold one.
// A BackOff built late behaves as one built early and reset since.
type lazyBackoff struct {
	schedule *saveplan.Backoff
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
		stopTimer(s.timer)
		s.timerSeq = nextSeq()
		s.timer = afterFunc(step.Wait, s.root, s.self, s.timerSeq)
	}
}

// start runs one save through call, bounded by the save timeout. Once the
// ownership's context has ended (WithOwnership) no save starts: the
// parent learns of the end on its own, but only after its watch fires,
// and a catalog without fencing (bbolt) would take a save made meanwhile.
func (s *persister) start(v wal.MessageID) {
	if o := s.cfg.ownership; o != nil && o.Err() != nil {
		s.fence(context.Cause(o))
		sendLate(s.root, s.parent, &ownershipLost{cause: context.Cause(o)})
		return
	}
	if s.cfg.counters != nil {
		s.cfg.counters.savesInFlight.Add(1)
	}
	s.save = newCall(&s.site, nextSeq(), v)
	s.inbox.runAfter(s.save)
	s.report()
	s.watch()
}

// watch arms the watchdog for the saves in flight, unless it is armed.
// One timer serves them all: armed when a save starts and it is not, it
// fires once per save timeout at most while saves run, and sleeps once
// they stop; a save costs no timer of its own.
func (s *persister) watch() {
	if s.watching {
		return
	}
	s.watching = true
	d := overdueAfter(s.cfg.saveTimeout)
	if s.watchdog == nil {
		root, self := s.root, s.self
		s.watchdog = time.AfterFunc(d, func() { sendLate(root, self, overdueCheck{}) })
		return
	}
	s.watchdog.Reset(d)
}

// overdue reports the save in flight, once, if it is still running
// joinGrace past its deadline: the catalog ignores its context. A
// catalog that honours it has failed the save by then, which is retried
// on the backoff; this one is still waited for, and the next attempt
// starts once it returns, so that lowwater never runs two saves of a
// pchannel at once, nor piles goroutines into a store that hangs. The
// failure is published (PersistFailed with ErrCatalogOverdue and no
// NextRetry) and logged, rather than seen only in the save-in-flight
// gauge; its result, when it comes, counts as any save's.
func (s *persister) overdue() {
	s.watching = false
	k := s.save
	if k == nil || k.seq == s.overdueSeq {
		return
	}
	wait, err := k.overdue()
	if wait > 0 {
		s.watching = true
		s.watchdog.Reset(wait)
		return
	}
	if err == nil {
		return
	}
	s.overdueSeq = k.seq
	publish(s.events, s.cfg, &messages.PersistFailed{Header: newHeader(s.cfg.pchannel), Value: s.plan.InFlight(), Attempt: s.plan.Attempt(), Err: err})
	s.cfg.logger.Error("save overran its deadline; waiting for the catalog", zap.Stringer("checkpoint", stringer{s.plan.InFlight()}),
		zap.Int("attempt", s.plan.Attempt()), zap.Duration("saveTimeout", s.cfg.saveTimeout))
}

// callCatalog is the Save of one call (catalogCall).
func (s *persister) callCatalog(ctx context.Context, v wal.MessageID) (wal.MessageID, error) {
	if c := s.cfg.counters; c != nil {
		defer c.savesInFlight.Add(-1)
	}
	return v, s.cfg.catalog.Save(ctx, s.cfg.pchannel, v)
}

// saved takes a save's outcome to the plan, then publishes it. The status
// moves before any event is published, so that a GetState sent on seeing
// the event already sees its effect.
func (s *persister) saved(m *callDone) {
	ended := s.save.ended(m)
	s.save = nil
	m.value = s.plan.InFlight() // also when the catalog panicked
	attempt := s.plan.Attempt()
	var step saveplan.Step
	if m.err == nil || !errors.Is(answered(m.err), persistence.ErrStoredAhead) {
		s.notAheadRun = 0
	}
	if m.err == nil {
		step = s.plan.Succeeded()
		if s.failure != nil {
			// Each failed attempt logged a warning: the operator reading
			// them learns here that saving is back.
			s.cfg.logger.Info("saved after failed attempts", zap.Stringer("checkpoint", stringer{m.value}),
				zap.Int("attempts", attempt), zap.Duration("failingFor", ended.Sub(s.failingSince)))
		}
		s.failure = nil
		s.report()
		publish(s.events, s.cfg, &messages.CheckpointPersisted{Header: messages.Header{PChannel: s.cfg.pchannel, At: ended},
			Value: m.value, Attempts: attempt, Latency: m.latency, Late: m.seq == s.overdueSeq})
		s.above(m.value) // a save computed before Adds landed above them
	} else {
		if s.failure == nil {
			s.failingSince = ended.Add(-m.latency) // when it began
		}
		step = s.saveFailed(m, attempt)
	}
	s.do(step)
	s.answerFlush()
}

// offer takes a new minimum, risen or fallen. Below the persisted
// checkpoint, only Adds since the last save began can have pulled it
// there (a fall, or a rise from one handed over with it): told to the
// parent (above).
func (s *persister) offer(minimum wal.MessageID) {
	step := s.plan.Offer(minimum)
	s.above(s.plan.Persisted())
	s.do(step)
}

// above tells the parent when persisted is above the minimum it knows
// (the target): vchannels were added below it, whose names the parent
// knows and tells (savedAbove), once per persisted value. Nothing is sent
// on the common path, where the target is at or above it.
func (s *persister) above(persisted wal.MessageID) {
	minimum := s.plan.Target()
	if persisted == nil || minimum == nil {
		return
	}
	if c, err := wal.Compare(persisted, minimum); err == nil && c > 0 {
		sendLate(s.root, s.parent, savedAbove{persisted: persisted})
	}
}

// saveFailed is saved for a failure. It is apart because the target of
// errors.As escapes to the heap: a save that succeeded does not pay for it.
func (s *persister) saveFailed(m *callDone, attempt int) saveplan.Step {
	s.failure = m.err
	answer := answered(m.err)
	var stored *persistence.StoredAheadError
	switch {
	case errors.As(answer, &stored) && stored.PChannel == s.cfg.pchannel:
		// Another writer got ahead; its value is durable, so it is ours
		// too. A report naming a value that is not ahead is not adopted:
		// the save is tried again, on the backoff after a first retry
		// (see saveplan.Plan.Adopt). One about another pchannel's record
		// (a catalog's bug) says nothing of ours: a failure like any.
		step, adopted := s.plan.Adopt(stored.Stored)
		s.report()
		var persisted wal.MessageID
		if adopted {
			persisted = stored.Stored
		}
		s.notAheadRun++
		switch {
		case stored.Stored == nil:
			s.brokenAhead(m, "its *persistence.StoredAheadError names no value stored")
		case !notAbove(stored.Stored, m.value):
			s.notAheadRun = 0
		case s.notAheadRun > 1:
			// Once may be a racing store's stale report; on the retry
			// after it too, the catalog's.
			s.brokenAhead(m, fmt.Sprintf("its *persistence.StoredAheadError names %s, which is not at or above %s, on a retry too",
				wal.String(stored.Stored), wal.String(m.value)))
		}
		s.failed(m, attempt, step.Wait, persisted)
		return step
	case errors.Is(answer, persistence.ErrFenced):
		s.fence(m.err)
		s.failed(m, attempt, 0, nil)
		// The save's own error, which says by whom (a record of a
		// higher term, say), where bare ErrFenced said nothing more.
		sendLate(s.root, s.parent, &ownershipLost{cause: m.err})
		return saveplan.Step{}
	case errors.Is(answer, persistence.ErrClosed):
		// Closed for good (a service closing its catalog before its
		// actors): no save is tried again, and the stop says why.
		s.plan.CatalogClosed()
		s.report()
		s.failed(m, attempt, 0, nil)
		s.cfg.logger.Error("catalog closed: no save is tried again; the stop will report the minimum not saved",
			zap.Stringer("minimum", stringer{s.plan.Target()}))
		return saveplan.Step{}
	default:
		// A panic inside the catalog comes here, whatever it panicked
		// with (answered).
		switch {
		case stored != nil:
			s.brokenAhead(m, "its *persistence.StoredAheadError is about pchannel "+shorten.Quoted(stored.PChannel))
		case errors.Is(answer, persistence.ErrStoredAhead):
			s.brokenAhead(m, "it is no *persistence.StoredAheadError naming the value stored")
		}
		step := s.plan.Failed()
		s.report()
		s.failed(m, attempt, step.Wait, nil)
		return step
	}
}

// brokenAhead logs, once per persister (a restarted one logs again), a
// refusal as stored ahead that breaks the Catalog contract, and why: one
// without a *persistence.StoredAheadError, or with one about another
// pchannel, or naming no value, or a value below the one refused again
// and again. Such a refusal proves nothing of this pchannel's record,
// and the save is retried on the backoff as after any failure, for as
// long as the catalog refuses it; each PersistFailed and warning says
// only that it failed, not that the catalog is at fault.
func (s *persister) brokenAhead(m *callDone, why string) {
	if s.toldBrokenAhead {
		return
	}
	s.toldBrokenAhead = true
	s.cfg.logger.Error("the catalog refused a save as stored ahead, but "+why+": it breaks the Catalog contract "+
		"(persistence/catalogtest checks it); the save is retried on the backoff while the catalog refuses it",
		zap.Stringer("checkpoint", stringer{m.value}), errorField(m.err))
}

// notAbove reports whether stored, named by a refusal of v as stored
// ahead, proves nothing of v: below it, or of another WAL.
func notAbove(stored, v wal.MessageID) bool {
	c, err := wal.Compare(stored, v)
	return err != nil || c < 0
}

// failed reports a failed attempt; adopted is the value of another
// writer's the plan took as persisted, if any.
func (s *persister) failed(m *callDone, attempt int, next time.Duration, adopted wal.MessageID) {
	publish(s.events, s.cfg, &messages.PersistFailed{Header: newHeader(s.cfg.pchannel), Value: m.value, Attempt: attempt, Err: m.err, NextRetry: next,
		Late: m.seq == s.overdueSeq, Adopted: adopted})
	s.cfg.logger.Warn("save failed", zap.Stringer("checkpoint", stringer{m.value}), zap.Int("attempt", attempt),
		zap.Duration("nextRetry", next), zap.Duration("latency", m.latency), errorField(m.err), stackField(m.err))
}

// report publishes the plan to the parent's view.
func (s *persister) report() {
	s.status.store(savePoint{persisted: s.plan.Persisted(), inFlight: s.save != nil, fenced: s.plan.Fenced(), fencedBy: s.fencedBy, closed: s.plan.Closed(),
		failure: s.failure, unanswered: s.unanswered, overdue: s.unansweredOverdue})
}

// fence stops saving for good, the ownership gone: cause says how.
func (s *persister) fence(cause error) {
	s.plan.Fence()
	if s.fencedBy == nil {
		s.fencedBy = cause
	}
	s.report()
}

// crashed tells the parent (see crashReporter): it may wait for a flush
// inside its Stopping handler, and take the Failure only after.
func (s *persister) crashed(reason any) {
	select {
	case s.status.crashed <- reason:
	default:
		// Not reached: the parent restarts a persister only once it
		// took its last crash, from here (flush) or by its Failure,
		// which comes after (HandleFailure).
	}
}

func (s *persister) answerFlush() {
	if s.flushWaiter == nil || !s.plan.Settled() {
		return
	}
	sendLate(s.root, s.flushWaiter, flushed{seq: s.flushSeq})
	s.flushWaiter = nil
}
