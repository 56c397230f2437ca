package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/core/saveplan"
	"github.com/lowwater/lowwater/internal/core/tracker"
	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// NewProps returns the Props of the actor that keeps the checkpoint of one
// pchannel of the named WAL, saved to catalog. Spawn it wherever the
// caller's actor tree wants it; spawning never blocks on the catalog. A
// parent actor that is stopped, or poisoned, stops its children with a
// hard Stop, which saves nothing: poison the pchannels first and wait.
//
// An invalid option is an error here (ErrInvalidOption), never a panic or a
// save failing forever later: a pchannel or vchannel name that no catalog
// can store (persistence.ValidatePChannel) also wraps
// persistence.ErrInvalidArgument.
func NewProps(pchannel string, walName wal.Name, catalog persistence.Catalog, opts ...Option) (*actor.Props, error) {
	cfg, err := newConfig(pchannel, walName, catalog, opts)
	if err != nil {
		return nil, err
	}
	from := cfg.from
	cfg.from = nil // kept by the producer alone
	return actor.PropsFromProducer(
		func() actor.Actor { return newPChannel(cfg, from) },
		actor.WithMailbox(newDrainingMailbox),
	), nil
}

var _ actor.SupervisorStrategy = (*pchannel)(nil)

// phase is where a pchannel is in its life. Each phase answers the
// lifecycle messages in its own step function (stepRecovering,
// stepRunning, stepStopping), and is entered through one function that
// sets up what it owns (becomeRunning, becomeFenced, becomeStopped, or the
// Stopping handler for stopping). Commands, GetState and a Poison's drain
// marker are answered alike in every phase, before the phase is consulted.
//
//	event \ phase      recovering               running                     fenced / stopping         stopped
//	-----------------  -----------------------  --------------------------  ------------------------  -------
//	command            applied, answered        applied, answered; a rise   fenced: applied,          -
//	                                            goes to the persister       answered, nothing saved;
//	                                                                        stopping: refused *
//	GetState           Recovered=false          persister's status          fenced: persister's       -
//	                                                                        status; stopping: *
//	load result        ok: → running            ignored (stale seq)         ignored                   -
//	                   failed: RecoveryFailed,
//	                   retry timer
//	recovery timer     read again               ignored (stale seq)         ignored                   -
//	minimum rose       HeldSince := now         HeldSince := now; ends a    HeldSince := now          -
//	                                            stall (MinimumResumed); arms
//	                                            the stall timer if none is
//	last vchannel      -                        ends a stall (resumed)      -                         -
//	dropped
//	stall timer        -                        no vchannel: disarmed;      ignored (stale seq)       -
//	                                            rose since: re-armed for
//	                                            the remainder; else
//	                                            MinimumStalled, disarmed
//	mailbox drained    -                        hand the latest rise over   -                         -
//	save result        -                        persister: plan step,       -                         -
//	                                            event; fenced: → fenced
//	persister crash    -                        PersisterRestarted,         PersisterRestarted only   -
//	                                            restart after a delay
//	restart timer      -                        restart, offer the minimum  ignored                   -
//	ownership lost     → fenced                 → fenced                    ignored                   -
//	Stop               join the read → stopping persister stopped           join → stopping           -
//	                   (ErrHardStop)            (ErrHardStop) → stopping
//	Poison             wait for the read up to  flush up to the flush       no flush → stopping       -
//	                   the flush timeout, then  timeout (a persister that
//	                   as running; else         crashed, before or during
//	                   ErrNotRecovered; the     it, restarts at once; one
//	                   ownership's end ends     gone ends it; so does the
//	                   the wait, told:          ownership's end, told:
//	                   OwnershipLost; no        OwnershipLost) → stopping
//	                   vchannel: no wait
//	actor Stopped      Stopped → stopped        Stopped → stopped           Stopped → stopped         -
//
// * Past the Stopping handler the mailbox hands the actor no more user
// messages (mailbox.refuse): see the package doc, under Phases.
//
// → fenced publishes OwnershipLost, stops the persister and the actor; so
// does a tracker that lost the order of its vchannels (becomeBroken),
// without the event.
// Becoming running (the load result's "→ running") restarts the stall
// clock (HeldSince := Recovered's time) and arms the stall timer if there
// is a vchannel; → fenced and every Stopping disarm it.
type phase uint8

const (
	// recovering: reading the stored checkpoint; no persister yet.
	recovering phase = iota
	// running: recovered; the persister saves the minimum.
	running
	// fenced: ownership lost, or the order of the vchannels (becomeBroken);
	// the stop is on its way, nothing is saved.
	fenced
	// stopping: the Stopping handler ran; children are being stopped.
	stopping
	// stopped: Stopped was published. Terminal.
	stopped
)

var phaseNames = [...]string{"recovering", "running", "fenced", "stopping", "stopped"}

func (f phase) String() string { return phaseNames[f] }

// pchannel owns one pchannel's vchannel checkpoints. Only its mailbox
// goroutine touches its fields.
type pchannel struct {
	cfg     *config
	tracker *tracker.Tracker
	// spawn hands the tracker from one incarnation to the next (a restart),
	// with persistedBefore: the last checkpoint the catalog acknowledged
	// before the restart, reported until recovery reads the stored one.
	spawn           *spawn
	persistedBefore wal.MessageID
	// recoveredBefore is set when an incarnation before a restart read the
	// stored checkpoint: Stopped.Recovered holds for the actor.
	recoveredBefore bool
	// restarted is set for an incarnation after the first: it reads the
	// stored checkpoint again, whatever WithPreloaded gave the first.
	restarted bool
	// handed is what this incarnation handed on, forgotten if it stops.
	handed *handedOn
	// stopBegan is set once the Stopping handler ran: the mailbox refuses
	// user messages from then on (closing).
	stopBegan bool
	// stoppedSeen is set by Stopped: protoactor has let go of the actor
	// (gone).
	stoppedSeen bool
	// listing is the actor's in its system's directory, nil on a mailbox
	// not lowwater's.
	listing *listing
	// spawnMinimum is the minimum of the vchannels the incarnation began
	// with: the start message ID when the catalog holds nothing, as in
	// the reference, unless a vchannel added during recovery is below it.
	spawnMinimum wal.MessageID

	phase phase
	// plain is set when protoactor dispatches to this actor with nothing
	// around it (plainDispatch): see shippedStraight.
	plain bool
	// straightFrom is the reply address of the last batch found to have
	// come straight from its Sender: that Sender's batches all come from
	// the same *PID, so the next is known by a pointer's comparison,
	// where a look-up in the process registry was a third of handling a
	// batch of one update.
	straightFrom *actor.PID
	// graceful is set as the stop begins, if it is a Poison's (beginStop).
	graceful bool
	// unflushed says why a stop left the minimum unsaved, for Stopped.
	unflushed error
	// flushReplies is the PID the flush's answer comes to, kept until the
	// actor has stopped (dropFlushReplies): the persister may answer after
	// the flush has ended, and until it has stopped.
	flushReplies *actor.PID

	// recovering
	recovery recovery

	// running (and after). status is the persister's plan as published by
	// the persister: the one source of persisted, in flight and fenced.
	// Non-nil once recovered.
	start     wal.MessageID
	status    *saveStatus
	persister *actor.PID
	// persisterInbox is the persister's mailbox, and mailbox this actor's
	// own (see handOver).
	persisterInbox *mailbox
	mailbox        *mailbox
	// pendingTarget is the latest move of the minimum not yet handed to
	// the persister: a rise, as the *messages.MinimumAdvanced published
	// (see advanced), or a fall, as minimumFell (see addVChannel).
	pendingTarget any
	// due is a rise of the minimum applied and not yet published (see
	// updateDirect).
	due   dueRise
	crash crashes
	// fells are the requests for Adds that pulled the minimum down, not
	// known to be answered (see fellReply).
	fells []*fellReply

	// stall watches the minimum for stalls (WithStallAfter).
	stall stallWatch

	// unwatch ends the ownership watch, if any; watch is its seq.
	unwatch func() bool
	watch   uint64

	// told is, for each vchannel told to be below the persisted
	// checkpoint (AddedBehind), the checkpoint it was told against: it
	// is told again only against a higher one.
	told map[string]wal.MessageID

	// stopWatchers are told the Stopped event straight (Poison), beside
	// the event stream: theirs is this actor's, whatever other actor of
	// the pchannel's name stops, and whichever subscriber panics on it.
	stopWatchers []*actor.PID

	self   *actor.PID
	root   *actor.RootContext
	events *eventstream.EventStream
}

// stallWatch is stall detection: when the minimum last rose, the one
// timer, and the stall in force. A rise only stores its time (and, when no
// timer is armed, arms one: after a stall, or while there was no
// vchannel); the timer, when it fires, compares.
type stallWatch struct {
	// since is State.HeldSince: the At of the last MinimumAdvanced, or of
	// Recovered if later, or the actor's start.
	since time.Time
	// timer is armed while running with a vchannel and no stall in force;
	// nil otherwise. timerSeq tells its timerFired from stale ones.
	timer    *time.Timer
	timerSeq uint64
	// stalled is the MinimumStalled in force, nil when none.
	stalled *messages.MinimumStalled
}

// dueRise is the start of a run of rises not yet published: the minimum
// before the first, and when it was applied. set is false when none is due.
type dueRise struct {
	set  bool
	from wal.MessageID
	at   time.Time
}

// recovery is the state of reading the stored checkpoint.
type recovery struct {
	attempt  int
	backoff  backoff.BackOff
	call     *call
	timer    *time.Timer
	timerSeq uint64
	// watch fires watchSeq once the read in flight is overdue (loadOverdue).
	watch    *time.Timer
	watchSeq uint64
	// overdue is the ErrCatalogOverdue the read in flight was reported
	// with, if it was: its outcome is then Late, and a stop that waited
	// for it in vain says so.
	overdue error
	// added are the vchannels added meanwhile and not dropped since: those
	// still below the stored checkpoint once it is read are told then
	// (AddedBehind), as no Add could be.
	added map[string]struct{}
	// closed is the error of a read that found the catalog closed, for
	// good: nothing is read again, not even by a stop.
	closed error
	// failed is the error of the last failed read, for GetState.
	failed error
}

// crashes is the persister's supervision: its recent crashes, kept bounded
// (see HandleFailure), and the restart waiting for its delay, if any.
type crashes struct {
	restarts int
	recent   []time.Time
	timer    *time.Timer // non-nil while a restart waits
	timerSeq uint64
	// seen counts the crashes a flush saw to, whose Failure is still to
	// come: the flush waited inside the Stopping handler, and the Failure
	// waited behind it.
	seen int
}

// newPChannel makes an incarnation; it takes what it starts from (the
// tracker above all) as it starts, by its PID (see spawn).
func newPChannel(cfg *config, from *spawn) *pchannel {
	return &pchannel{cfg: cfg, spawn: from}
}

// Receive is one type switch: commands first (the hot path; every phase
// applies them alike), then what every phase answers alike, then the
// phase's own step function for the rest of the lifecycle.
func (p *pchannel) Receive(ctx actor.Context) {
	if p.self == nil {
		p.startLate(ctx)
	}
	p.publishDue()
	switch m := ctx.Message().(type) {
	case *messages.UpdateCheckpoint:
		respond(ctx, m, p.update(m))
	case *messages.UpdateBatch:
		if m == nil {
			p.applied(ctx, m, nil, false, messages.ErrNilCommand)
			return
		}
		p.updateBatch(ctx, m)
	case *messages.AddVChannel:
		p.addVChannel(ctx, m)
	case *messages.DropVChannel:
		p.dropVChannel(ctx, m)
	case *messages.GetState:
		if _, waits := requester(ctx); waits {
			ctx.Respond(p.state(m != nil && m.IncludeCheckpoints))
		}
	case *tellStoppedTo:
		p.stopWatchers = append(p.stopWatchers, m.watcher)
	case *actor.Stopped:
		p.stoppedSeen = true
		p.dropFlushReplies()
		if p.listing != nil {
			p.listing.delist(ctx.Self())
		}
		if p.self == nil {
			p.becomeStoppedUnstarted(ctx)
			return
		}
		p.becomeStopped()
	default:
		switch p.phase {
		case recovering:
			p.stepRecovering(ctx, m)
		case running:
			p.stepRunning(ctx, m)
		default:
			p.stepStopping(ctx, m)
		}
	}
}

// stepRecovering: the stored checkpoint is being read, or the read waits
// for its retry.
func (p *pchannel) stepRecovering(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *actor.Started:
		p.started(ctx)
	case *callDone:
		if p.recovery.call != nil && m.seq == p.recovery.call.seq {
			p.recovery.call = nil
			p.loadDone(ctx, m)
		}
	case *timerFired:
		switch m.seq {
		case p.recovery.timerSeq:
			p.load(ctx)
		case p.recovery.watchSeq:
			p.loadOverdue()
		}
	case *ownershipLost:
		if p.ours(m) {
			p.becomeFenced(ctx, m.cause)
		}
	case *actor.Stopping:
		if p.self == nil {
			p.phase = stopping // never started: nothing to flush
			if p.listing != nil {
				p.listing.stopping.Store(true)
			}
			return
		}
		p.beginStop()
		p.stopRecovering(ctx)
	case *actor.Restarting:
		p.quiet()
		p.handOn()
	default:
		p.other(ctx)
	}
}

// stepRunning: recovered; the persister saves.
func (p *pchannel) stepRunning(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case mailboxDrained:
		p.handOver(ctx)
	case *timerFired:
		switch {
		case p.crash.timer != nil && m.seq == p.crash.timerSeq:
			p.restartPersister(ctx)
		case p.stall.timer != nil && m.seq == p.stall.timerSeq:
			p.checkStall()
		}
	case *ownershipLost:
		if p.ours(m) {
			p.becomeFenced(ctx, m.cause)
		}
	case *actor.Stopping:
		p.beginStop()
		if p.graceful {
			p.flush(ctx, time.Now().Add(p.cfg.flushTime))
		} else {
			p.unflushed = messages.ErrHardStop
		}
		p.quiet()
		p.phase = stopping
	case *actor.Restarting:
		p.quiet()
		p.handOn()
	case savedAbove:
		p.savedAbove(m.persisted)
	default:
		p.other(ctx)
	}
}

// ours reports whether m is this incarnation's: its persister's, or its
// own watch's, not a watch of an incarnation before, or of an actor of
// the same name before it, that fired as it stopped.
func (p *pchannel) ours(m *ownershipLost) bool { return m.watch == 0 || m.watch == p.watch }

// savedAbove tells the vchannels below persisted not told against it
// yet. Each was added after the save of persisted began: no vchannel below
// the minimum it saved was live then, and checkpoints only move up.
func (p *pchannel) savedAbove(persisted wal.MessageID) {
	if p.tracker == nil {
		return
	}
	below := slices.DeleteFunc(p.tracker.Below(persisted), func(name string) bool {
		t, ok := p.told[name]
		if !ok {
			return false
		}
		c, err := wal.Compare(t, persisted)
		return err == nil && c >= 0
	})
	for _, name := range below {
		p.markTold(name, persisted)
	}
	p.addedBehind(below, persisted)
}

// markTold notes that vchannel was told (or counts as told) to be below
// persisted.
func (p *pchannel) markTold(vchannel string, persisted wal.MessageID) {
	if p.told == nil {
		p.told = make(map[string]wal.MessageID)
	}
	p.told[vchannel] = persisted
}

// stepStopping: fenced, or past the Stopping handler. Commands are still
// applied in memory (Receive) while fenced, but nothing more is saved or
// recovered: late results and timers are ignored. Past the Stopping
// handler, the mailbox refuses every user message (closing).
func (p *pchannel) stepStopping(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case savedAbove: // fenced: a save that landed before the fence
		p.savedAbove(m.persisted)
	case *actor.Stopping:
		p.beginStop()
		p.quiet()
		p.phase = stopping
	case *actor.Restarting:
		p.quiet()
		p.phase = stopping
		p.handOn()
	default:
		p.other(ctx)
	}
}

// other answers what no phase takes. A request of a type lowwater does not
// take gets a typed error rather than a timeout. A command sent by value
// (messages.UpdateCheckpoint where *messages.UpdateCheckpoint is meant,
// which compiles, since Send takes any) is rejected as a bad command is,
// told by CommandRejected and a Warn line: sent with Send, it was dropped
// without a word. Any other message sent with Send is dropped with a Warn
// line, the one place its sender's mistake shows, but for those that come
// unasked in the course of things and pass silently: results and timers
// that are no longer wanted (the seq tells), and protoactor's own
// (Terminated, ReceiveTimeout).
func (p *pchannel) other(ctx actor.Context) {
	msg := ctx.Message()
	var cmd messages.Command
	switch m := msg.(type) {
	case messages.UpdateCheckpoint:
		cmd = &m
	case messages.UpdateBatch:
		cmd = &m
	case messages.AddVChannel:
		cmd = &m
	case messages.DropVChannel:
		cmd = &m
	case messages.GetState:
	default:
		switch _, waits := requester(ctx); {
		case waits:
			ctx.Respond(fmt.Errorf("%w: %T", messages.ErrUnknownMessage, msg))
		case ctx.Sender() != nil: // gave up waiting
		case !expected(msg):
			p.cfg.logger.Warn("message dropped: a pchannel takes the commands of package messages, each by pointer",
				zap.String("type", fmt.Sprintf("%T", msg)))
		}
		return
	}
	err := fmt.Errorf("%w: %T sent by value: send a pointer, &%[2]T{…}", messages.ErrUnknownMessage, msg)
	if cmd == nil { // a GetState, which changes nothing and is not told
		if _, waits := requester(ctx); waits {
			ctx.Respond(err)
		}
		return
	}
	p.applied(ctx, cmd, nil, false, err)
}

// expected reports whether msg may come to a pchannel unasked for without
// a fault of its sender's: a type of this package (a result or timer
// that is no longer wanted) or of protoactor's actor package.
func expected(msg any) bool {
	t := reflect.TypeOf(msg)
	if t == nil {
		return false
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.PkgPath() {
	case ownPackage, protoactorPackage:
		return true
	}
	return false
}

var (
	ownPackage        = reflect.TypeFor[pchannel]().PkgPath()
	protoactorPackage = reflect.TypeFor[actor.Terminated]().PkgPath()
)

// The cases of Receive that are not the hot path live in methods of their
// own: inlined, their zap fields and closures made Receive's frame 670
// bytes, and every mailbox wake-up (a new goroutine, with a small stack)
// paid for copying its stack to a larger one.

func (p *pchannel) addVChannel(ctx actor.Context, m *messages.AddVChannel) {
	if m == nil {
		p.applied(ctx, m, nil, false, messages.ErrNilCommand)
		return
	}
	if err := validVChannel(m.VChannel); err != nil {
		p.applied(ctx, m, nil, false, err)
		return
	}
	from := p.tracker.Minimum()
	advanced, err := p.tracker.Add(m.VChannel, m.Checkpoint)
	if err == nil {
		if p.phase == recovering {
			if p.recovery.added == nil {
				p.recovery.added = make(map[string]struct{})
			}
			p.recovery.added[m.VChannel] = struct{}{}
		}
		delete(p.told, m.VChannel) // told of an earlier life of the name
		p.publish(&messages.VChannelAdded{Header: p.header(), VChannel: m.VChannel, Checkpoint: m.Checkpoint})
		p.cfg.logger.Debug("vchannel added", zap.String("vchannel", m.VChannel), zap.Stringer("checkpoint", stringer{m.Checkpoint}))
		if persisted := p.persisted(); persisted != nil {
			// A save that lands from here on, the persister tells
			// (savedAbove).
			p.savedAbove(persisted)
		}
		if p.phase == running && p.tracker.Holder() == m.VChannel && (!advanced || from == nil) {
			// The minimum fell to the new vchannel's checkpoint, or the
			// vchannel came into an empty pchannel, where the persister
			// still targets the minimum from before the last one left:
			// an Add is a rise only to the tracker. The persister's
			// target, not saved yet (failing, or behind the save in
			// flight), may be above a live vchannel now: its next save,
			// a retry included, takes the new minimum, or nothing if
			// that is not above the persisted value. Only a save
			// already in flight may still land above it.
			if advanced {
				p.advanced(from) // its event and stall clock, once
				advanced = false
			}
			fell := minimumFell{to: p.tracker.Minimum()}
			if ctx.Sender() == nil || p.crash.timer != nil {
				// Nobody waits (or a restarting persister is offered
				// the minimum anyway): handed over with the burst.
				p.pendingTarget = fell
				p.handOverWithoutDrain()
			} else {
				// The persister answers the request once it holds the
				// new target: no save it starts after the reply, a retry
				// whose timer is due included, takes the old one.
				p.pendingTarget = nil
				asker, _ := requester(ctx)
				fell.reply = &fellReply{sender: ctx.Sender(), success: success(asker, m)}
				p.fells = append(slices.DeleteFunc(p.fells, (*fellReply).answered), fell.reply)
				ctx.Send(p.persister, fell)
				return
			}
		}
	}
	p.applied(ctx, m, from, advanced, err)
}

func (p *pchannel) dropVChannel(ctx actor.Context, m *messages.DropVChannel) {
	if m == nil {
		p.applied(ctx, m, nil, false, messages.ErrNilCommand)
		return
	}
	from := p.tracker.Minimum()
	advanced, err := p.tracker.Drop(m.VChannel)
	if p.mailbox != nil {
		p.mailbox.drops.handled(m, err == nil)
	}
	if err == nil {
		delete(p.recovery.added, m.VChannel)
		delete(p.told, m.VChannel)
		ev := &messages.VChannelDropped{Header: p.header(), VChannel: m.VChannel}
		p.publish(ev)
		p.cfg.logger.Debug("vchannel dropped", zap.String("vchannel", m.VChannel))
		if p.phase == running && p.tracker.Len() == 0 && p.stall.stalled != nil {
			p.resume(ev.At) // nothing holds the minimum back any more
		}
	}
	p.applied(ctx, m, from, advanced, err)
}

func (p *pchannel) started(ctx actor.Context) {
	// take first: should it panic, the incarnation never started (p.self
	// stays nil), and its stop is told as such (becomeStoppedUnstarted).
	h := p.spawn.take(ctx.Self())
	p.self, p.root, p.events = ctx.Self(), ctx.ActorSystem().Root, ctx.ActorSystem().EventStream
	p.tracker, p.spawnMinimum, p.persistedBefore, p.restarted = h.tracker, h.tracker.Minimum(), h.persisted, h.restarted
	p.recoveredBefore = h.recovered
	p.stopWatchers = h.stopWatchers
	if h.stop != nil {
		// The incarnation before was stopping when its restart came, and
		// had flushed what it could: this one ends the stop, as it was,
		// with no recovery, no persister and no command.
		p.stopBegan, p.graceful, p.unflushed, p.phase = true, h.stop.graceful, h.stop.unflushed, stopping
		ctx.Stop(p.self)
		return
	}
	p.plain = plainDispatch(ctx)
	p.stall.since = time.Now()
	if err := p.tracker.Broken(); err != nil {
		p.becomeBroken(err) // handed on by the incarnation before
		return
	}
	if o := p.cfg.ownership; o != nil {
		if o.Err() != nil {
			p.becomeFenced(ctx, context.Cause(o)) // ended before we began
			return
		}
		root, self, watch := ctx.ActorSystem().Root, ctx.Self(), nextSeq()
		p.watch = watch
		p.unwatch = context.AfterFunc(o, func() { sendLate(root, self, &ownershipLost{cause: context.Cause(o), watch: watch}) })
	}
	if p.cfg.preloaded != nil && !p.restarted {
		p.recovery.attempt = 1
		p.loadDone(ctx, &callDone{value: *p.cfg.preloaded})
		return
	}
	p.load(ctx)
}

// update applies one UpdateCheckpoint; the caller answers its sender.
func (p *pchannel) update(m *messages.UpdateCheckpoint) error {
	if m == nil {
		return p.settle(m, nil, false, messages.ErrNilCommand)
	}
	from := p.tracker.Minimum()
	advanced, err := p.tracker.Update(m.VChannel, m.Checkpoint)
	if err == nil && p.cfg.counters != nil {
		p.cfg.counters.updates.Add(1)
	}
	return p.settle(m, from, advanced, err)
}

// closing tells the mailbox to refuse user messages (mailbox.refuse): the
// Stopping handler has run. A restart does not count: the actor lives on.
func (p *pchannel) closing() bool { return p.stopBegan }

func (p *pchannel) gone() bool { return p.stoppedSeen }

// handOn hands the tracker, the save status and the stop under way, if
// any, to the next incarnation: the actor restarts.
func (p *pchannel) handOn() {
	p.dropFlushReplies()
	const carry = "; its vchannels and checkpoints carry over"
	f := p.failure()
	if f != nil {
		p.cfg.logger.Warn("pchannel restarting after it panicked"+carry, reasonField(f.Value))
	} else {
		p.cfg.logger.Warn("pchannel restarting: its supervisor restarts it after another actor's failure (a sibling's, under an all-for-one strategy)" + carry)
	}
	if p.self == nil {
		// It never handled its Started (a receiver middleware panicked
		// on it): there is nothing to hand on, and the next incarnation
		// starts from the configuration.
		return
	}
	h := handedOn{tracker: p.tracker, status: p.status, persisted: p.persistedBefore, recovered: p.recovered(), stopWatchers: p.stopWatchers}
	if p.stopBegan {
		h.stop = &stopUnderWay{graceful: p.graceful, unflushed: p.unflushed}
		if p.unflushed == nil && p.phase != stopping {
			h.stop.unflushed = cutByFailure(p.phase, f)
		}
	}
	p.handed = p.spawn.handOn(p.self, h)
}

// cutByFailure is why a stop left the minimum unsaved when its Stopping
// handler failed before it ended (a subscriber that ended the goroutine
// on an event the handler published, the Recovered of the read it
// waited for): the next
// incarnation ends the stop without a flush, and Stopped names the
// failure rather than a timeout that never ran out. f is nil when the
// failure was taken already.
func cutByFailure(in phase, f *PChannelPanicError) error {
	kept := messages.ErrFlushTimeout
	if in == recovering {
		kept = messages.ErrNotRecovered
	}
	if f == nil {
		return fmt.Errorf("%w: the pchannel failed while it stopped", kept)
	}
	return fmt.Errorf("%w: the pchannel failed while it stopped: %w", kept, f)
}

// receiveDirect takes an UpdateCheckpoint sent without a sender, and the
// hand-over of a rise to the persister, as Receive would, without
// protoactor's dispatch around them (see directReceiver).
func (p *pchannel) receiveDirect(msg any) bool {
	// No tracker: the incarnation has not started (startLate).
	if p.phase >= stopping || p.tracker == nil {
		return false
	}
	switch m := msg.(type) {
	case *messages.UpdateCheckpoint:
		p.updateDirect(m)
		return true
	case mailboxDrained:
		p.publishDue()
		if p.phase != running {
			return true // nothing is handed to a persister
		}
		if p.mailbox == nil || p.persisterInbox == nil {
			return false
		}
		p.handOver(nil)
		return true
	}
	return false
}

// updateDirect is update for an UpdateCheckpoint that nobody waits on,
// taken by receiveDirect. A rise is only noted: it is published (advanced)
// once the updates queued behind it are applied, as the mailbox drains or
// after its turn of Throughput messages, or before the actor handles
// anything else or publishes another event. A run of rising updates costs
// one event, one allocation and one reading of the clock, not one each,
// and what anyone can observe (events, replies, GetState, the persister's
// target) is what it was, but for the events the run folded into one.
func (p *pchannel) updateDirect(m *messages.UpdateCheckpoint) {
	if m == nil {
		p.publishDue()
		_ = p.settle(m, nil, false, messages.ErrNilCommand)
		return
	}
	from := p.tracker.Minimum()
	advanced, err := p.tracker.Update(m.VChannel, m.Checkpoint)
	if err != nil {
		p.publishDue()
		_ = p.settle(m, from, false, err)
		return
	}
	if p.cfg.counters != nil {
		p.cfg.counters.updates.Add(1)
	}
	if advanced && !p.due.set {
		p.due = dueRise{set: true, from: from, at: time.Now()}
	}
}

// publishDue publishes the rise due, if any, as one MinimumAdvanced from
// the minimum before the run to the minimum now, stamped with the time of
// the run's first rise: a lag measured from it is never shortened.
func (p *pchannel) publishDue() {
	if !p.due.set {
		return
	}
	d := p.due
	p.due = dueRise{}
	p.advancedAt(d.from, d.at)
}

// applied finishes a single command: reply, events, persister.
func (p *pchannel) applied(ctx actor.Context, cmd messages.Command, from wal.MessageID, advanced bool, err error) {
	respond(ctx, cmd, p.settle(cmd, from, advanced, err))
}

// respond answers the command being handled, if someone asked and still
// waits: with err, or with its success.
func respond(ctx actor.Context, cmd messages.Command, err error) {
	switch asker, waits := requester(ctx); {
	case !waits:
	case err != nil:
		ctx.Respond(err)
	default:
		ctx.Respond(success(asker, cmd))
	}
}

// requester is the process of whoever asked for the message being
// handled, and whether it waits for the answer: not for a message sent
// rather than asked, nor for a requester gone from the registry (a future
// that gave up), to whom the answer would be a dead letter, which
// protoactor logs.
func requester(ctx actor.Context) (actor.Process, bool) {
	if ctx.Sender() == nil {
		return nil, false
	}
	return ctx.ActorSystem().ProcessRegistry.Get(ctx.Sender())
}

// success is the reply to cmd, applied in full, for the requester asker:
// nil, or for an actor in this system, whose mailbox cannot carry nil, a
// *messages.Applied. Futures, a Sender's replies and every other process
// take nil as any message.
func success(asker actor.Process, cmd messages.Command) any {
	if _, isActor := asker.(*actor.ActorProcess); isActor {
		return &messages.Applied{Command: cmd}
	}
	return nil
}

// settle finishes a single command but for its reply, which it returns:
// a rejection is published and logged, a rise of the minimum from from
// is published and handed on.
func (p *pchannel) settle(cmd messages.Command, from wal.MessageID, advanced bool, err error) error {
	if err != nil {
		p.reject(cmd, err)
		return err
	}
	if advanced {
		p.advanced(from)
	}
	return nil
}

func (p *pchannel) updateBatch(ctx actor.Context, m *messages.UpdateBatch) {
	from := p.tracker.Minimum()
	var rejected []messages.Rejection
	var tags []staleTag
	if p.mailbox != nil {
		tags = p.mailbox.drops.take(m)
	}
	rose, skipped := false, 0
	for i, u := range m.Updates {
		if tags != nil && stale(tags, u.VChannel) {
			// A Sender's, made before a Drop of the vchannel that came
			// first: as if applied to the vchannel dropped (drops.go).
			skipped++
			p.cfg.logger.Debug("update made before its vchannel's drop skipped", zap.String("vchannel", u.VChannel),
				zap.Stringer("checkpoint", stringer{u.Checkpoint}))
			continue
		}
		advanced, err := p.tracker.Update(u.VChannel, u.Checkpoint)
		if err != nil {
			rejected = append(rejected, messages.Rejection{Index: i, VChannel: u.VChannel, Err: err})
			p.reject(m, err)
		}
		rose = rose || advanced
	}
	if p.cfg.counters != nil {
		p.cfg.counters.updates.Add(uint64(len(m.Updates) - len(rejected) - skipped))
	}
	// Updates only raise checkpoints, so the minimum ends above where it
	// began once it rose within the batch: one event, one save.
	if rose && p.tracker.Broken() == nil {
		p.advanced(from)
	}
	if ctx.Sender() == nil {
		return
	}
	switch {
	case rejected != nil:
		respond(ctx, m, &messages.BatchError{Rejected: rejected})
	case p.shippedStraight(ctx):
		ctx.Respond(batchConsumed{})
	default:
		respond(ctx, m, nil)
	}
}

// shippedStraight reports whether the batch being handled came from a
// Sender straight to this pchannel, through protoactor's plain dispatch:
// then only this pchannel saw it, and once answered the Sender may build
// its next batch in the same buffer (batchConsumed). Through an actor in
// between, or a middleware, someone else may hold it still.
//
// The answer for a reply address holds for the Sender's life: the address
// is registered to that Sender alone, and its id is never given again.
func (p *pchannel) shippedStraight(ctx actor.Context) bool {
	if !p.plain {
		return false
	}
	from := ctx.Sender()
	if from == p.straightFrom {
		return true
	}
	proc, ok := ctx.ActorSystem().ProcessRegistry.Get(from)
	if !ok {
		return false
	}
	if r, ok := proc.(replyProcess); !ok || !r.s.pchannel.Equal(ctx.Self()) {
		return false
	}
	p.straightFrom = from
	return true
}

func (p *pchannel) reject(cmd messages.Command, err error) {
	p.publish(&messages.CommandRejected{Header: p.header(), Command: cmd, Err: err})
	p.cfg.logger.Warn("command rejected", zap.String("command", fmt.Sprintf("%T", cmd)), errorField(err))
	if broken := p.tracker.Broken(); broken != nil && p.phase < fenced {
		p.becomeBroken(broken)
	}
}

// advanced publishes the new minimum. The persister gets the same message,
// the latest one only, when the mailbox has run empty (or after a long
// run of messages; see mailbox): a burst of rises costs it one message,
// and the save it starts carries the burst's last minimum, where handing
// over every rise would start one on the first. The persister coalesces
// further: only the latest minimum is ever pending there.
//
// A rise also restarts the stall clock: it stores the event's time, and
// ends a stall in force (see checkStall).
func (p *pchannel) advanced(from wal.MessageID) { p.advancedAt(from, time.Now()) }

// advancedAt is advanced for a rise applied at at.
func (p *pchannel) advancedAt(from wal.MessageID, at time.Time) {
	ev := &messages.MinimumAdvanced{Header: messages.Header{PChannel: p.cfg.pchannel, At: at}, From: from, To: p.tracker.Minimum(), Holder: p.tracker.Holder()}
	p.publish(ev)
	p.stall.since = ev.At
	if p.phase == running {
		p.pendingTarget = ev
		p.handOverWithoutDrain()
		if p.cfg.stallAfter > 0 {
			p.rose(ev.At)
		}
	}
}

// handOverWithoutDrain hands the move of the minimum over at once when the
// actor runs on a mailbox of the caller's (actor.WithMailbox), which never
// tells it that it drained: else no rise would ever be saved. Bursts are
// then not coalesced.
func (p *pchannel) handOverWithoutDrain() {
	if p.mailbox == nil && p.crash.timer == nil {
		p.notifyPersister()
	}
}

// rose ends a stall in force, and arms the stall timer if none is: after
// a stall, or after a time with no vchannel. Otherwise the timer armed
// already will see the new since when it fires: nothing to do here.
func (p *pchannel) rose(at time.Time) {
	if p.stall.stalled != nil {
		p.resume(at)
	}
	if p.stall.timer == nil {
		p.armStall(p.cfg.stallAfter)
	}
}

func (p *pchannel) armStall(d time.Duration) {
	p.stall.timerSeq = nextSeq()
	p.stall.timer = afterFunc(d, p.root, p.self, p.stall.timerSeq)
}

func (p *pchannel) disarmStall() {
	stopTimer(p.stall.timer)
	p.stall.timer = nil
}

// checkStall runs when the stall timer fires. If the minimum rose since
// it was armed, it re-arms for what is left of the stall-after duration
// from that rise; else the minimum has not risen for that long, and the
// stall is published, once: no timer runs until the minimum rises again
// (advanced) or the last vchannel goes (dropVChannel). With no vchannel
// there is no stall and no timer: the next Add is a rise, which arms it.
func (p *pchannel) checkStall() {
	p.stall.timer = nil
	if p.tracker.Len() == 0 {
		return
	}
	now := time.Now()
	held := now.Sub(p.stall.since)
	if left := p.cfg.stallAfter - held; left > 0 {
		p.armStall(left)
		return
	}
	ev := &messages.MinimumStalled{Header: messages.Header{PChannel: p.cfg.pchannel, At: now},
		Holder: p.tracker.Holder(), Checkpoint: p.tracker.Minimum(), Since: p.stall.since, For: held}
	p.stall.stalled = ev
	p.publish(ev)
	p.cfg.logger.Warn("minimum stalled", zap.String("holder", ev.Holder), zap.Stringer("checkpoint", stringer{ev.Checkpoint}),
		zap.Duration("for", held))
}

// resume ends the stall in force at at.
func (p *pchannel) resume(at time.Time) {
	s := p.stall.stalled
	p.stall.stalled = nil
	ev := &messages.MinimumResumed{Header: messages.Header{PChannel: p.cfg.pchannel, At: at}, Holder: s.Holder, StalledFor: at.Sub(s.Since)}
	p.publish(ev)
	p.cfg.logger.Info("minimum resumed", zap.String("holder", s.Holder), zap.Duration("stalledFor", ev.StalledFor))
}

// wantsDrained asks the mailbox for mailboxDrained while a move of the
// minimum waits to be published or handed to the persister.
func (p *pchannel) wantsDrained() bool { return p.pendingTarget != nil || p.due.set }

// notifyPersister hands the latest move of the minimum to the persister,
// straight to its mailbox: one posted there is refused as forged.
func (p *pchannel) notifyPersister() {
	if ev := p.pendingTarget; ev != nil && p.persisterInbox != nil {
		p.pendingTarget = nil
		p.persisterInbox.push(ev)
	}
}

// handOver is notifyPersister for a drained mailbox: the rise goes
// straight to the persister's mailbox, which this goroutine then runs, if
// it is idle, once it has let go of this one (runAfter), rather than
// waking another goroutine for it.
//
// ctx may be nil when both mailboxes are known (receiveDirect).
func (p *pchannel) handOver(ctx actor.Context) {
	ev := p.pendingTarget
	if ev == nil {
		return
	}
	if p.mailbox == nil || p.persisterInbox == nil {
		p.notifyPersister()
		return
	}
	p.pendingTarget = nil
	p.persisterInbox.user.push(ev)
	p.mailbox.runAfter(wake{p.persisterInbox})
}

// failure is why the pchannel failed, if it did since it was last resumed
// (see mailbox.takeFailure).
func (p *pchannel) failure() *PChannelPanicError {
	if p.mailbox == nil {
		return nil
	}
	return p.mailbox.takeFailure()
}

// ownMailbox learns the actor's mailbox (see mailboxOwner), and lists
// the actor in its system's directory, as protoactor registers the
// mailbox, before Spawn returns.
func (p *pchannel) ownMailbox(m *mailbox) {
	p.mailbox = m
	if p.listing == nil && m.root != nil {
		if self := m.self(); self != nil {
			sys := m.root.ActorSystem()
			p.listing = directoryOf(sys).list(sys, self, m, p.cfg.pchannel)
		}
	}
}

// offerMinimum hands the persister the current minimum: a new persister
// (spawned or restarted) starts from its floor and this, and needs nothing
// else from the parent. Any move pending is superseded by it.
func (p *pchannel) offerMinimum(ctx actor.Context) {
	p.pendingTarget = nil
	ctx.Send(p.persister, offer{minimum: p.tracker.Minimum()})
}

// savePoint is the persister's status, or, before a persister runs, the
// last checkpoint acknowledged before a restart (persistedBefore).
func (p *pchannel) savePoint() savePoint {
	if p.status == nil {
		return savePoint{persisted: p.persistedBefore}
	}
	return p.status.load()
}

// addedBehind tells, sorted, vchannels added below persisted: logged
// first, so that whoever waits for the event finds the line written.
func (p *pchannel) addedBehind(vchannels []string, persisted wal.MessageID) {
	if len(vchannels) == 0 {
		return
	}
	slices.Sort(vchannels)
	ev := &messages.AddedBehind{Header: p.header(), VChannels: vchannels, Persisted: persisted, Minimum: p.tracker.Minimum()}
	p.cfg.logger.Warn("vchannels added below the persisted checkpoint: a restart before they pass it starts past their records",
		zap.Strings("vchannels", ev.VChannels), zap.Stringer("persisted", stringer{ev.Persisted}), zap.Stringer("minimum", stringer{ev.Minimum}))
	p.publish(ev)
}

// persisted returns the persisted checkpoint, nil during recovery, when
// the stored one is not known yet.
func (p *pchannel) persisted() wal.MessageID {
	if p.status == nil {
		return nil
	}
	return p.savePoint().persisted
}

func (p *pchannel) state(withVChannels bool) *messages.State {
	s := &messages.State{
		PChannel:       p.cfg.pchannel,
		WALName:        p.cfg.walName,
		StartMessageID: p.start,
		Minimum:        p.tracker.Minimum(),
		Holder:         p.tracker.Holder(),
		VChannels:      p.tracker.Len(),
		Recovered:      p.status != nil,
		Stalled:        p.stall.stalled != nil,
	}
	if !s.Recovered {
		s.RecoveryFailure, s.RecoveryClosed = p.recovery.failed, p.recovery.closed != nil
	}
	if s.Holder != "" {
		s.HeldSince = p.stall.since
	}
	sp := p.savePoint()
	s.Persisted, s.SaveInFlight = sp.persisted, sp.inFlight
	if withVChannels {
		s.Checkpoints = p.tracker.Checkpoints()
	}
	return s
}

// load reads the stored checkpoint through call; the result comes back as
// a callDone. A panicking catalog counts as a failed read, not a crash.
func (p *pchannel) load(ctx actor.Context) {
	stopTimer(p.recovery.timer)
	stopTimer(p.recovery.watch) // a graceful stop reads again with no loadDone
	p.recovery.attempt++
	p.recovery.overdue = nil
	catalog, name := p.cfg.catalog, p.cfg.pchannel
	site := &callSite{root: ctx.ActorSystem().Root, self: p.self, op: "Load", timeout: p.cfg.saveTimeout,
		fn: catalogFunc(func(c context.Context, _ wal.MessageID) (wal.MessageID, error) { return catalog.Load(c, name) })}
	p.recovery.call = startCall(site, nextSeq(), nil)
	p.recovery.watchSeq = nextSeq()
	p.recovery.watch = afterFunc(overdueAfter(p.cfg.saveTimeout), ctx.ActorSystem().Root, p.self, p.recovery.watchSeq)
}

// loadOverdue reports the recovery read in flight if it is still running
// joinGrace past its deadline: the catalog ignores its context. As for a
// save (persister.overdue), it is still waited for, and read again only
// once it returns, so that no read piles onto a store that hangs.
func (p *pchannel) loadOverdue() {
	k := p.recovery.call
	if k == nil {
		return
	}
	wait, err := k.overdue()
	if wait > 0 {
		p.recovery.watchSeq = nextSeq()
		p.recovery.watch = afterFunc(wait, p.root, p.self, p.recovery.watchSeq)
		return
	}
	if err != nil {
		p.readOverdue(err)
	}
}

// readOverdue reports the read in flight overdue (err, ErrCatalogOverdue).
func (p *pchannel) readOverdue(err error) {
	p.recovery.overdue, p.recovery.failed = err, err
	p.publish(&messages.RecoveryFailed{Header: p.header(), Err: err, Attempt: p.recovery.attempt})
	p.cfg.logger.Error("recovery read overran its deadline; waiting for the catalog", zap.Int("attempt", p.recovery.attempt),
		zap.Duration("saveTimeout", p.cfg.saveTimeout))
}

// awaitRead waits for the read in flight until deadline, reporting it
// overdue as the watchdog (loadOverdue) would: a graceful stop waits for
// it inside its handler, where the watchdog's timer cannot reach the
// actor.
func (p *pchannel) awaitRead(deadline time.Time, cut, lost <-chan struct{}) (callDone, bool) {
	k := p.recovery.call
	for {
		until := deadline
		if p.recovery.overdue == nil {
			switch wait, err := k.overdue(); {
			case err != nil:
				p.readOverdue(err)
			case wait > 0:
				if t := time.Now().Add(wait); t.Before(deadline) {
					until = t
				}
			}
		}
		res, ok := k.wait(until, cut, lost)
		if ok || until.Equal(deadline) || closed(cut) || closed(lost) {
			return res, ok
		}
	}
}

// loadDone takes a recovery read's result: running on success, else a
// retry after the backoff.
func (p *pchannel) loadDone(ctx actor.Context, m *callDone) {
	stopTimer(p.recovery.watch)
	if wait, ok := p.loaded(ctx, m); !ok && wait > 0 {
		p.recovery.timerSeq = nextSeq()
		p.recovery.timer = afterFunc(wait, ctx.ActorSystem().Root, p.self, p.recovery.timerSeq)
	}
}

// loaded becomes running on a good read; on a failed one it publishes
// RecoveryFailed and returns how long to wait before the next read.
func (p *pchannel) loaded(ctx actor.Context, m *callDone) (time.Duration, bool) {
	err := m.err
	if err == nil && m.value != nil {
		// A record of another WAL is as unusable as a corrupt one, and so
		// is one of a registered type that does not read back or cannot
		// be ordered (written by a build whose type compared it): no save
		// could ever pass it.
		werr := wal.Check(p.cfg.walName, m.value)
		if werr == nil {
			_, werr = wal.Marshal(m.value)
		}
		if werr != nil {
			// In m too: a stop waiting on the read tells it (recoverBy).
			err = &persistence.CorruptRecordError{PChannel: p.cfg.pchannel, Err: werr}
			m.err = err
		}
	}
	if err == nil {
		p.becomeRunning(ctx, m.value)
		return 0, true
	}
	p.recovery.failed = err
	if errors.Is(answered(err), persistence.ErrClosed) {
		// Closed for good: no read is tried again (NextRetry 0), and
		// the pchannel never recovers; its stop says why.
		p.recovery.closed = err
		p.publish(&messages.RecoveryFailed{Header: p.header(), Err: err, Attempt: p.recovery.attempt, Late: p.recovery.overdue != nil})
		p.cfg.logger.Error("catalog closed as the stored checkpoint was read: the pchannel does not recover",
			zap.Int("attempt", p.recovery.attempt), errorField(err))
		return 0, false
	}
	if p.recovery.backoff == nil {
		p.recovery.backoff = p.cfg.backoff.New()
	}
	wait := p.recovery.backoff.NextBackOff()
	p.publish(&messages.RecoveryFailed{Header: p.header(), Err: err, Attempt: p.recovery.attempt, NextRetry: wait, Late: p.recovery.overdue != nil})
	log := p.cfg.logger.Warn
	if errors.Is(answered(err), persistence.ErrCorruptRecord) {
		// Never start from nothing over a record we cannot read: that
		// could regress the stored checkpoint. An operator must repair
		// or delete it; until then we retry at the backoff's pace.
		log = p.cfg.logger.Error
	}
	log("recovery failed", zap.Int("attempt", p.recovery.attempt), zap.Duration("nextRetry", wait), errorField(err), stackField(err))
	return wait, false
}

// becomeRunning ends recovery with the stored checkpoint and spawns the
// persister, which starts from it as its floor.
func (p *pchannel) becomeRunning(ctx actor.Context, stored wal.MessageID) {
	p.phase = running
	p.status = newSaveStatus(stored)
	p.start = stored
	if p.start == nil {
		p.start = p.spawnMinimum
		// A vchannel added below it while the catalog was read is live
		// as consumption starts, and nothing durable says where: a
		// consumer opened at the spawn's minimum would skip its records
		// before that, and the first save, of the minimum it holds down,
		// would start the next run lower. (Nil, the log's beginning,
		// stays: it covers every vchannel.)
		if low := p.tracker.Minimum(); p.start != nil && low != nil && p.tracker.Broken() == nil {
			if c, err := wal.Compare(low, p.start); err == nil && c < 0 {
				p.start = low
			}
		}
	}
	rec := &messages.Recovered{Header: p.header(), StartMessageID: p.start, FromCatalog: stored != nil, Minimum: p.tracker.Minimum(),
		Attempts: p.recovery.attempt}
	p.publish(rec)
	// Every vchannel below the stored checkpoint counts as told against
	// it: those given at spawn (or handed on by a restart) are older news,
	// which it covers, and the persister's word on them, to come at its
	// first offer, says nothing new. Those added during recovery are told
	// now, as no Add could be.
	if stored != nil {
		var added []string
		for _, name := range p.tracker.Below(stored) {
			p.markTold(name, stored)
			if _, ok := p.recovery.added[name]; ok {
				added = append(added, name)
			}
		}
		p.addedBehind(added, stored)
	}
	p.recovery.added = nil
	// The stall clock starts over: a pchannel is not stalled by the time
	// it took to recover.
	p.stall.since = rec.At
	if p.cfg.stallAfter > 0 && p.tracker.Len() > 0 {
		p.armStall(p.cfg.stallAfter)
	}
	p.cfg.logger.Info("recovered", zap.Stringer("start", stringer{p.start}), zap.Bool("fromCatalog", stored != nil), zap.Int("attempts", p.recovery.attempt))
	props, inbox := persisterProps(p.cfg, p.status)
	pid, err := ctx.SpawnNamed(props, "persister")
	if err != nil {
		// Only a duplicate name fails, and this actor spawns one persister.
		p.cfg.logger.Error("cannot spawn persister", errorField(err))
		return
	}
	p.persister, p.persisterInbox = pid, *inbox
	p.offerMinimum(ctx)
}

// becomeFenced stops saving at once and stops the actor: another owner
// may already be saving, and only the catalog's fencing stood between us.
func (p *pchannel) becomeFenced(ctx actor.Context, cause error) {
	p.phase = fenced
	p.pendingTarget = nil
	p.disarmStall()
	p.tellLost(cause)
	if p.persister != nil {
		ctx.Stop(p.persister)
	}
	ctx.Stop(ctx.Self())
}

// tellLost says that the ownership ended, for cause, and that the stop
// saves nothing more.
func (p *pchannel) tellLost(cause error) {
	// The cause is the ownership context's, which the catalog (or the
	// caller) set: checked as a catalog's error, since it is published
	// and errors.Is is asked of it.
	cause = checkCatalogError(cause)
	p.unflushed = cause
	p.publish(&messages.OwnershipLost{Header: p.header(), Cause: cause})
	p.cfg.logger.Warn("ownership lost; stopping", errorField(cause))
}

// becomeBroken stops saving at once and stops the actor: the tracker has
// lost the order of its vchannels (tracker.Broken), so its minimum means
// nothing, and saving it could skip data. Only an ID type registered by
// the user whose comparisons panic, over and over, can bring it about.
func (p *pchannel) becomeBroken(err error) {
	p.phase = fenced
	p.pendingTarget = nil
	p.disarmStall()
	p.unflushed = err
	p.cfg.logger.Error("vchannel order lost; stopping without saving", errorField(err))
	if p.persister != nil {
		p.root.Stop(p.persister)
	}
	p.root.Stop(p.self)
}

// recovered reports whether this incarnation, or one before a restart,
// read the stored checkpoint (Stopped.Recovered); GetState's Recovered
// is this incarnation's alone.
func (p *pchannel) recovered() bool { return p.status != nil || p.recoveredBefore }

// becomeStopped publishes Stopped, reading the persister's status: it is
// final, the persister having stopped before its parent.
func (p *pchannel) becomeStopped() {
	p.phase = stopped
	p.spawn.forget(p.self, p.handed)
	sp := p.savePoint()
	// What the stop leaves persisted, above vchannels added during its
	// last save: the persister's word (savedAbove) would come too late
	// for the mailbox. Told from the same reading Stopped reports.
	if sp.persisted != nil && p.tracker.Broken() == nil {
		p.savedAbove(sp.persisted)
	}
	ev := &messages.Stopped{Header: p.header(), Graceful: p.graceful, Recovered: p.recovered(), LastPersisted: sp.persisted, Flushed: true}
	min := p.tracker.Minimum()
	if broken := p.tracker.Broken(); broken != nil {
		// No minimum is known: none was flushed, and none can be named.
		ev.Flushed, ev.Reason = false, broken
	} else if left, err := unsaved(sp.persisted, min); left {
		ev.Flushed, ev.Dropped, ev.Reason = false, min, p.unflushed
		switch {
		case err != nil:
			ev.Reason = err // whether it was saved cannot be told
		case sp.closed && ev.Reason == nil:
			ev.Reason = persistence.ErrClosed // the persister stopped saving at once
		case sp.fenced:
			// The ownership's cause (say, its session ended), or the
			// persister's if it learned first (a record of a higher
			// term, say), said to be ErrFenced.
			if ev.Reason == nil {
				ev.Reason = sp.fencedBy
			}
			switch {
			case ev.Reason == nil:
				ev.Reason = persistence.ErrFenced
			case !errors.Is(ev.Reason, persistence.ErrFenced):
				ev.Reason = fmt.Errorf("%w: %w", persistence.ErrFenced, ev.Reason)
			}
		case ev.Reason == nil || ev.Reason == messages.ErrFlushTimeout:
			ev.Reason = flushTimeout(sp)
		}
	}
	p.tellStopped(ev, p.failure(), "")
}

// flushTimeout is ErrFlushTimeout with what the catalog did meanwhile,
// from the persister's last word: a caller who reads the Stopped alone
// (Poison's) learns whether the catalog failed, and how, or never
// answered, where the PersistFailed events said it to subscribers only.
func flushTimeout(sp savePoint) error {
	switch {
	case sp.unanswered && sp.overdue:
		return fmt.Errorf("%w: the catalog had not answered the save in flight, which overran its deadline: %w", messages.ErrFlushTimeout, ErrCatalogOverdue)
	case sp.unanswered && sp.failure != nil:
		return fmt.Errorf("%w: the catalog had not answered the save in flight; the one before failed: %w", messages.ErrFlushTimeout, sp.failure)
	case sp.unanswered:
		return fmt.Errorf("%w: the catalog had not answered the save in flight", messages.ErrFlushTimeout)
	case sp.failure != nil:
		return fmt.Errorf("%w: the last save failed: %w", messages.ErrFlushTimeout, sp.failure)
	}
	return messages.ErrFlushTimeout
}

// tellStopped logs and publishes ev, with f, the panic the actor stopped
// after, if there was one; note ends the log message.
func (p *pchannel) tellStopped(ev *messages.Stopped, f *PChannelPanicError, note string) {
	fields := []zap.Field{zap.Bool("graceful", ev.Graceful), zap.Bool("recovered", ev.Recovered), zap.Stringer("persisted", stringer{ev.LastPersisted}),
		zap.Bool("flushed", ev.Flushed), zap.Stringer("dropped", stringer{ev.Dropped}), errorField(ev.Reason)}
	// Logged first: whoever ends on seeing Stopped (a test whose logger
	// dies with it) must find the actor done with its logger.
	switch {
	case f != nil:
		ev.Failure = f
		p.cfg.logger.Warn("stopped after it panicked, before any restart"+note, append(fields, zap.String("command", f.Command), reasonField(f.Value))...)
	case !ev.Flushed && ev.Dropped != nil:
		// A minimum not known saved (a save that ran out of time may yet
		// have landed): the next owner replays from the checkpoint it
		// finds, which a filter of Warn and above must not hide.
		p.cfg.logger.Warn("stopped before its minimum was known saved"+note, fields...)
	default:
		p.cfg.logger.Info("stopped"+note, fields...)
	}
	publishLast(p.events, p.cfg, ev)
	for _, w := range p.stopWatchers {
		sendLate(p.root, w, stoppedTold{ev: ev})
	}
}

// tellStoppedTo asks the actor to send its Stopped event to watcher too.
type tellStoppedTo struct{ watcher *actor.PID }

// publishLast publishes ev, an event published as protoactor stops or
// restarts the actor (Stopped, the last one), on a goroutine of its own,
// and waits for it. A subscriber that ended the goroutine protoactor
// runs that on (runtime.Goexit, as t.FailNow does), which no recover
// stops, cut it short: protoactor never told the actor's watchers or its
// parent, and a StopFuture or PoisonFuture waited out its timeout.
func publishLast(events *eventstream.EventStream, cfg *config, ev messages.Event) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		returned := false
		defer func() {
			if !returned {
				cfg.logger.Error("event subscriber ended its goroutine", zap.String("event", fmt.Sprintf("%T", ev)), errorField(ErrGoexit))
			}
		}()
		publish(events, cfg, ev)
		returned = true
	}()
	<-done
}

// startLate starts an incarnation that never handled its Started, on the
// first message of another kind: its Started panicked (in a receiver
// middleware) and its supervisor resumed it. It would otherwise panic on
// every command, having no tracker, and publish nothing as it stopped.
func (p *pchannel) startLate(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return
	}
	p.cfg.logger.Warn("pchannel starting on its first message: its supervisor resumed it after its Started failed",
		zap.String("message", fmt.Sprintf("%T", ctx.Message())))
	p.started(ctx)
}

// becomeStoppedUnstarted ends an incarnation that never handled its
// Started: a receiver middleware panicked on it, and the supervisor
// stopped the actor rather than restarting it. What the incarnation
// before handed on, if one did, is taken, so that no later actor of that
// name starts from it, and Stopped tells it as that one would have: the
// checkpoint persisted, the minimum left unsaved. A first incarnation
// tracked, recovered and saved nothing: it has neither.
func (p *pchannel) becomeStoppedUnstarted(ctx actor.Context) {
	f := p.failure()
	h, handed := p.spawn.takeHanded(ctx.Self())
	if f == nil && !handed {
		return // never started, and never failed: not a pchannel's stop
	}
	p.phase, p.events, p.root = stopped, ctx.ActorSystem().EventStream, ctx.ActorSystem().Root
	ev := &messages.Stopped{Header: p.header(), Reason: messages.ErrHardStop}
	if handed {
		p.stopWatchers = h.stopWatchers
		ev.Recovered, ev.LastPersisted, ev.Flushed, ev.Reason = h.recovered, h.persisted, true, nil
		if h.stop != nil {
			ev.Graceful = h.stop.graceful
		}
		min := h.tracker.Minimum()
		if left, err := unsaved(h.persisted, min); left {
			ev.Flushed, ev.Dropped, ev.Reason = false, min, messages.ErrHardStop
			switch {
			case err != nil:
				ev.Reason = err
			case h.stop != nil && h.stop.unflushed != nil:
				ev.Reason = h.stop.unflushed
			}
		}
	}
	p.tellStopped(ev, f, "; it never started")
}

// unsaved reports whether a stop leaves min unsaved: it is above the
// persisted checkpoint, or cannot be ordered against it (a registered ID
// type whose comparison panics: err), which counts as unsaved.
func unsaved(persisted, min wal.MessageID) (bool, error) {
	switch {
	case min == nil:
		return false, nil
	case persisted == nil:
		return true, nil
	}
	c, err := wal.Compare(persisted, min)
	return err != nil || c < 0, err
}

// HandleFailure makes the pchannel its persister's supervisor. The
// persister crashes only for a bug of its own (a catalog's panic is a
// failed save): it is restarted after a growing delay, and the new one
// starts from the status its predecessor published and the minimum
// offered again, so nothing is lost.
//
// protoactor's RestartStatistics keeps every failure's time forever; the
// pchannel keeps its own, bounded: crashes of the last minute, and no more
// than it takes the delay to reach its cap.
//
// It runs on the mailbox goroutine, as a system message, not through
// Receive: the rises applied before the failure are published first.
func (p *pchannel) HandleFailure(system *actor.ActorSystem, _ actor.Supervisor, _ *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	p.publishDue()
	c := &p.crash
	if c.seen > 0 {
		c.seen-- // a crash the flush saw to (flush)
		return
	}
	if p.status != nil {
		select {
		case <-p.status.crashed: // sent before the Failure (see crashReporter)
		default:
		}
	}
	delay := p.persisterCrashed(reason, false)
	if p.phase != running {
		return // the stop under way ends the persister anyway
	}
	stopTimer(c.timer)
	c.timerSeq = nextSeq()
	c.timer = afterFunc(delay, system.Root, p.self, c.timerSeq)
}

// persisterCrashed counts a crash of the persister and tells it, and
// returns the delay before its restart: none if atOnce, though the crash
// counts towards the next one's.
func (p *pchannel) persisterCrashed(reason any, atOnce bool) time.Duration {
	c := &p.crash
	c.restarts++
	now := time.Now()
	c.recent = recentCrashes(c.recent, now, crashesToCap(p.cfg.backoff))
	delay := restartDelay(p.cfg.backoff, len(c.recent))
	if atOnce {
		delay = 0
	}
	p.publish(&messages.PersisterRestarted{Header: p.header(), Reason: reason, Restarts: c.restarts})
	// The crashed persister saves nothing more, and the one that follows
	// ignores the moves queued for it and starts from the minimum offered
	// then: the Adds waiting for it need not wait for its restart.
	p.answerFells()
	p.cfg.logger.Error("persister crashed; restarting", reasonField(reason), zap.Duration("delay", delay), zap.Int("restarts", c.restarts))
	return delay
}

// recentCrashes appends now to the crashes of the last minute, keeping at
// most limit of them (the newest).
func recentCrashes(recent []time.Time, now time.Time, limit int) []time.Time {
	i := 0
	for i < len(recent) && now.Sub(recent[i]) >= time.Minute {
		i++
	}
	recent = append(recent[:0], recent[i:]...)
	if len(recent) >= limit {
		recent = append(recent[:0], recent[len(recent)-limit+1:]...)
	}
	return append(recent, now)
}

// crashesToCap is the number of recent crashes at which restartDelay
// reaches the backoff's cap; more change nothing. Bounded by 1024 for a
// multiplier so close to 1 that the cap is far away.
func crashesToCap(b saveplan.Backoff) int {
	if b.Multiplier <= 1 || b.Max <= b.Initial {
		return 1
	}
	n := math.Ceil(math.Log(float64(b.Max)/float64(b.Initial))/math.Log(b.Multiplier)) + 1
	return int(min(max(n, 1), 1024))
}

// restartDelay grows with recent crashes like the save backoff, without
// jitter: Initial × Multiplier^(n-1), capped at Max.
func restartDelay(b saveplan.Backoff, failures int) time.Duration {
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(max(failures-1, 0)))
	return time.Duration(min(d, float64(b.Max)))
}

func (p *pchannel) restartPersister(ctx actor.Context) {
	stopTimer(p.crash.timer)
	p.crash.timer = nil
	// As actor.Supervisor's RestartChildren does, which the context given
	// to Receive need not offer (a context decorator's).
	proc, _ := ctx.ActorSystem().ProcessRegistry.Get(p.persister)
	proc.SendSystemMessage(p.persister, &actor.Restart{})
	p.offerMinimum(ctx)
}

// answerFells answers the Adds waiting for the persister, when it will
// not: it stops, or it crashed and the one that follows ignores the moves
// queued for it. They were applied, and no save takes a target above them
// from then on.
func (p *pchannel) answerFells() {
	for _, r := range p.fells {
		r.answer(p.root)
	}
	p.fells = nil
}

// quiet ends what runs for this actor off the mailbox: the ownership
// watch, the timers and the recovery read (joined within joinGrace). The
// Adds waiting for the persister are answered: it saves nothing more
// that the flush, if any, did not.
func (p *pchannel) quiet() {
	p.answerFells()
	p.pendingTarget = nil // nothing is handed to the persister any more
	if p.unwatch != nil {
		p.unwatch()
	}
	stopTimer(p.recovery.timer)
	stopTimer(p.recovery.watch)
	p.recovery.call.end(p.cfg)
	p.recovery.call = nil
	stopTimer(p.crash.timer)
	p.crash.timer = nil
	p.disarmStall()
}

// stopRecovering is a stop that came before recovery ended. A graceful
// one waits for the recovery read, up to the stop flush timeout, and then
// flushes as a stop while running would: the stored checkpoint is the
// floor, and nothing may be saved before it is known. If it cannot be read
// in time, nothing is saved and Stopped says why (ErrNotRecovered). With
// no vchannel there is no minimum to save, and nothing to wait for: a
// read that hangs would hold the stop for the whole flush timeout.
func (p *pchannel) stopRecovering(ctx actor.Context) {
	switch {
	case !p.graceful:
		p.unflushed = messages.ErrHardStop
	case p.tracker.Minimum() == nil && p.tracker.Broken() == nil:
		// Nothing to save.
	default:
		deadline := time.Now().Add(p.cfg.flushTime)
		if p.recoverBy(ctx, deadline) {
			p.flush(ctx, deadline)
		}
	}
	p.quiet()
	p.phase = stopping
}

// recoverBy reads the stored checkpoint until it is read or deadline
// passes: the read in flight, else one at once, and after a failure
// another after the backoff.
func (p *pchannel) recoverBy(ctx actor.Context, deadline time.Time) bool {
	// A hard stop while it waits ends the wait (see flush), and so does
	// the ownership's end, told then, as the flush tells it: nothing
	// read would be saved.
	var cut, lost <-chan struct{}
	if p.mailbox != nil {
		cut = p.mailbox.armStopCut()
		defer p.mailbox.disarmStopCut()
	}
	if o := p.cfg.ownership; o != nil {
		lost = o.Done()
	}
	lastErr := p.recovery.closed
	for p.recovery.closed == nil && time.Now().Before(deadline) && !closed(lost) {
		if p.recovery.call == nil {
			p.load(ctx)
		}
		res, ok := p.awaitRead(deadline, cut, lost)
		if !ok {
			if p.recovery.overdue != nil {
				lastErr = p.recovery.overdue // what kept the read
			}
			break
		}
		p.recovery.call = nil
		wait, ok := p.loaded(ctx, &res)
		if ok {
			// Recovered: unless a hard stop came meanwhile, the flush
			// follows.
			return !p.cutShort(cut)
		}
		lastErr = res.err
		if p.recovery.closed != nil {
			break // for good: another read would wait out the deadline for nothing
		}
		if !sleepUntil(time.Now().Add(wait), deadline, cut, lost) {
			break
		}
	}
	if p.cutShort(cut) {
		return false
	}
	if closed(lost) {
		p.tellLost(context.Cause(p.cfg.ownership))
		return false
	}
	p.unflushed = messages.ErrNotRecovered
	if lastErr != nil {
		p.unflushed = fmt.Errorf("%w: %w", messages.ErrNotRecovered, lastErr)
	}
	return false
}

// beginStop marks the stop begun, graceful only if it is the Poison's: the
// mailbox has handed the pill on. A hard Stop posted after the pill and
// before it was handed on is handled first, and is hard.
//
// An incarnation that ends the stop of the one before (started) keeps
// that stop's kind: its stop has begun already.
func (p *pchannel) beginStop() {
	if !p.stopBegan {
		p.graceful = p.mailbox != nil && p.mailbox.tookPoison()
	}
	p.stopBegan = true
	if p.listing != nil {
		p.listing.stopping.Store(true)
	}
}

// cutShort reports whether cut is closed: a hard stop ended the graceful
// one, which then saves nothing more.
func (p *pchannel) cutShort(cut <-chan struct{}) bool {
	if !closed(cut) {
		return false
	}
	p.graceful, p.unflushed = false, messages.ErrHardStop
	return true
}

// closed reports whether ch is closed; nil never is.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sleepUntil waits until t, and reports false if deadline comes first,
// or cut or lost is closed.
func sleepUntil(t, deadline time.Time, cut, lost <-chan struct{}) bool {
	if !t.Before(deadline) {
		return false
	}
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-cut:
	case <-lost:
	}
	return false
}

// flush is a graceful stop while running: it hands the persister the
// latest minimum and waits, up to deadline, for it to be saved. This is
// the one bounded wait in a handler, and the mailbox is closing anyway.
//
// A persister that crashes meanwhile tells so (crashReporter), while its
// Failure waits behind this handler: the flush sees to the crash as
// HandleFailure would, restarts it at once, as it does one that crashed
// before, and asks again. One that crashes again restarts after the delay
// a crash while running waits. A persister that is gone (stopped by
// name) ends the flush at once: its dead letter says so.
func (p *pchannel) flush(ctx actor.Context, deadline time.Time) {
	if p.crash.timer != nil {
		p.restartPersister(ctx) // a crashed persister restarts at once to flush
	}
	// A stop can come before the mailbox ran empty: hand the latest rise
	// over first, as the drained mailbox would have, then ask for the flush.
	p.notifyPersister()
	// A hard stop while it waits ends the wait.
	var cut <-chan struct{}
	if p.mailbox != nil {
		cut = p.mailbox.armStopCut()
		defer p.mailbox.disarmStopCut()
	}
	registry := ctx.ActorSystem().ProcessRegistry
	replies := &flushReplies{ch: make(chan any, 1)}
	self, _ := registry.Add(replies, "flush"+registry.NextId())
	// Removed once the persister has stopped: removed here, an answer
	// that came after the flush ended (the ownership ended it, or the
	// deadline), or the dead-letter response to a request a stopped
	// persister never read, was a dead letter, logged by protoactor
	// under the names of lowwater's PIDs.
	p.dropFlushReplies()
	p.flushReplies = self
	seq := replies.next()
	ctx.RequestWithCustomSender(p.persister, &flushRequest{seq: seq}, self)
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	restart := time.NewTimer(0)
	restart.Stop()
	defer restart.Stop()
	var restarting <-chan time.Time
	var lastCrash error
	crashes := 0
	// An ownership that ends meanwhile ends the wait: another owner may
	// be saving already, each save of ours is refused, and the loss is
	// told as in any other phase. Its own message would never be read:
	// past Stopping the mailbox hands the actor none, and a stop that
	// came first would wait out its deadline, the loss untold.
	var lost <-chan struct{}
	if o := p.cfg.ownership; o != nil {
		lost = o.Done()
	}
	answered := func(res any) {
		if _, gone := res.(*actor.DeadLetterResponse); gone {
			p.unflushed = fmt.Errorf("%w: the persister is gone: %w", messages.ErrFlushTimeout, actor.ErrDeadLetter)
		}
	}
	for {
		select {
		case res := <-replies.ch:
			answered(res)
			return
		case reason := <-p.status.crashed:
			p.crash.seen++
			crashes++
			lastCrash = fmt.Errorf("persister crashed: %v", reason)
			if err, ok := reason.(error); ok {
				lastCrash = fmt.Errorf("persister crashed: %w", err)
			}
			restart.Reset(p.persisterCrashed(reason, crashes == 1))
			restarting = restart.C
		case <-restarting:
			restarting = nil
			select {
			case res := <-replies.ch:
				// The crashed persister answered before it crashed:
				// the minimum was saved.
				answered(res)
				return
			default:
			}
			// The next request is numbered before the restart, which
			// the crashed persister's answers all came before (they
			// came before its crash), and the next one's all after.
			seq = replies.next()
			p.restartPersister(ctx)
			ctx.RequestWithCustomSender(p.persister, &flushRequest{seq: seq}, self)
		case <-cut:
			p.graceful, p.unflushed = false, messages.ErrHardStop
			return
		case <-lost:
			select {
			case res := <-replies.ch:
				answered(res) // saved before the loss was seen
				return
			default:
			}
			p.tellLost(context.Cause(p.cfg.ownership))
			return
		case <-timeout.C:
			p.unflushed = messages.ErrFlushTimeout
			if lastCrash != nil {
				p.unflushed = fmt.Errorf("%w: %w", messages.ErrFlushTimeout, lastCrash)
			}
			return
		}
	}
}

// flushReplies is where a flush's answers come. It takes in the answer to
// the request asked last, and a dead letter (the persister is gone), and
// drops the rest: the answers to requests that a crashed persister left
// queued for the one that follows, which takes them before the minimum
// offered to it, and a crash's own answer (answerPanicked), the crash
// itself coming on the status. One place is enough: the request asked
// last has one answer, and next empties the place.
type flushReplies struct {
	mu    sync.Mutex
	asked uint64 // guarded by mu
	ch    chan any
}

// next numbers the next request, and lets go of an answer taken in
// before, to a request asked before (the flush has looked for one).
func (r *flushReplies) next() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	select {
	case <-r.ch:
	default:
	}
	return r.asked
}

func (r *flushReplies) SendUserMessage(_ *actor.PID, message any) {
	msg := actor.UnwrapEnvelopeMessage(message)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch m := msg.(type) {
	case flushed:
		if m.seq != r.asked {
			return
		}
	case *actor.DeadLetterResponse:
	default:
		return
	}
	select {
	case r.ch <- msg:
	default:
	}
}

func (*flushReplies) SendSystemMessage(*actor.PID, any) {}
func (*flushReplies) Stop(*actor.PID)                   {}

// dropFlushReplies removes the last flush's reply PID, if any: as the
// actor stops, as another flush begins, and as it restarts (handOn),
// since that incarnation sees no Stopped. (A flush runs only once the
// actor started: root is set.)
func (p *pchannel) dropFlushReplies() {
	if p.flushReplies != nil {
		p.root.ActorSystem().ProcessRegistry.Remove(p.flushReplies)
		p.flushReplies = nil
	}
}

func (p *pchannel) header() messages.Header { return newHeader(p.cfg.pchannel) }

// newHeader stamps an event of pchannel now.
func newHeader(pchannel string) messages.Header {
	return messages.Header{PChannel: pchannel, At: time.Now()}
}

// publish hands ev to the EventStream's subscribers, which run here, on
// the mailbox goroutine, guarded (see the package function).
func (p *pchannel) publish(ev messages.Event) { publish(p.events, p.cfg, ev) }

// publish hands ev to the EventStream's subscribers, which run on the
// caller's goroutine. A panicking subscriber is logged, not let through:
// in a PChannel actor, the restart it would cause rebuilds the tracker
// from the vchannels given at spawn, forgetting those added since, and a
// minimum above one of them could then be saved (I1); in a persister, it
// would crash it amid a save or a flush. Subscribers after it miss the
// event: the panic is counted (Counters.SubscriberPanics), since the
// metrics collector, a subscriber itself, may be among them.
func publish(events *eventstream.EventStream, cfg *config, ev messages.Event) {
	defer func() {
		if r := recover(); r != nil {
			if cfg.counters != nil {
				cfg.counters.subscriberPanics.Add(1)
			}
			// The stack names the subscriber, which the event and the
			// value alone do not.
			cfg.logger.Error("event subscriber panicked", zap.String("event", fmt.Sprintf("%T", ev)), reasonField(r),
				zap.String("stack", string(debug.Stack())))
		}
	}()
	events.Publish(ev)
}

// reasonField logs why something panicked as text: zap.Any would run the
// panic value's own MarshalJSON or MarshalLogObject, on the actor's
// goroutine, and a value that panics there too made the log line a second
// failure. fmt recovers a panicking Error, String or Format method; the
// text is cut and quoted as an ID's is (a subscriber's panic is a third
// party's).
func reasonField(r any) zap.Field { return zap.String("reason", shorten.Value(r)) }

// stackField logs where a catalog panicked, if err says it did: the
// error's text names the panic's value, and its author needs the place.
func stackField(err error) zap.Field {
	var panicked *CatalogPanicError
	if !errors.As(err, &panicked) || panicked.Stack == nil {
		return zap.Skip()
	}
	return zap.String("stack", string(panicked.Stack))
}

// errorField logs err as its text, quoted when it holds a control
// character and cut to what shows in 1 KiB, past lowwater's own longest: a
// catalog's error may be a megabyte of anything, and a failing save logs
// it on every retry. Events carry the error itself, for errors.Is.
func errorField(err error) zap.Field {
	if err == nil {
		return zap.Skip()
	}
	return zap.String("error", shorten.Within(fmt.Sprint(err), 1<<10))
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// afterFunc sends timerFired{seq} to pid after d.
func afterFunc(d time.Duration, root *actor.RootContext, pid *actor.PID, seq uint64) *time.Timer {
	return time.AfterFunc(d, func() { sendLate(root, pid, &timerFired{seq: seq}) })
}

// stringer formats a possibly nil ID for zap.
type stringer struct{ id wal.MessageID }

func (s stringer) String() string { return wal.String(s.id) }
