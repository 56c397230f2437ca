package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/core/tracker"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// NewProps returns the Props of the actor that keeps the checkpoint of one
// pchannel of the named WAL, saved to catalog. Spawn it wherever the
// caller's actor tree wants it; spawning never blocks on the catalog.
//
// An invalid option is an error here, never a panic later.
func NewProps(pchannel, walName string, catalog persistence.Catalog, opts ...Option) (*actor.Props, error) {
	cfg, err := newConfig(pchannel, walName, catalog, opts)
	if err != nil {
		return nil, err
	}
	return actor.PropsFromProducer(
		func() actor.Actor { return newPChannel(cfg) },
		actor.WithMailbox(newDrainingMailbox),
	), nil
}

var _ actor.SupervisorStrategy = (*pchannel)(nil)

// pchannel owns one pchannel's vchannel checkpoints. Only its mailbox
// goroutine touches its fields.
type pchannel struct {
	cfg     *config
	tracker *tracker.Tracker
	// spawnMinimum is the minimum of the vchannels given at spawn: the start
	// message ID when the catalog holds nothing (semantics 7).
	spawnMinimum wal.MessageID

	recovered bool
	start     wal.MessageID
	// persisted is the parent's view of the floor: read at recovery, then
	// raised by the persister's reports. Invariant: it never decreases.
	persisted wal.MessageID
	saving    bool
	fenced    bool

	recovery  recovery
	persister *actor.PID
	// pendingAdvance is the latest rise of the minimum not yet handed to
	// the persister (see advanced).
	pendingAdvance *messages.MinimumAdvanced
	// restarts counts persister crashes; restartTimer delays the next one.
	restarts     int
	restartTimer *time.Timer
	supervisor   actor.Supervisor
	// crashed is true while the persister waits for its restart, its
	// mailbox suspended: a stop must restart it before asking it to flush.
	crashed bool

	graceful bool
	stopping bool
	// unwatch ends the ownership watch, if any.
	unwatch func() bool

	self   *actor.PID
	events *eventstream.EventStream
}

// recovery is the state of reading the stored checkpoint.
type recovery struct {
	attempt int
	backoff backoff.BackOff
	timer   *time.Timer
	cancel  context.CancelFunc
	done    chan struct{}
}

func newPChannel(cfg *config) *pchannel {
	t := cfg.newTracker()
	return &pchannel{cfg: cfg, tracker: t, spawnMinimum: t.Minimum()}
}

// Receive is one type switch: commands first (the hot path), then the
// persister's reports, then lifecycle.
func (p *pchannel) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.UpdateCheckpoint:
		if m == nil {
			p.applied(ctx, m, nil, false, messages.ErrNilCommand)
			return
		}
		from := p.tracker.Minimum()
		advanced, err := p.tracker.Update(m.VChannel, m.Checkpoint)
		if err == nil && p.cfg.counters != nil {
			p.cfg.counters.Updates.Add(1)
		}
		p.applied(ctx, m, from, advanced, err)
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
		ctx.Respond(p.state(m != nil && m.WithVChannels))

	case mailboxDrained:
		p.notifyPersister(ctx)
	case *persisterStatus:
		p.raiseFloor(m.persisted)
		p.saving = m.inFlight
		if m.fenced {
			p.loseOwnership(ctx, persistence.ErrFenced)
		}
	case *ownershipLost:
		p.loseOwnership(ctx, m.cause)
	case *persisterStarted:
		p.syncPersister(ctx)
	case *restartPersister:
		p.restartPersister(m)

	case *loaded:
		p.onLoaded(ctx, m)
	case *retryRecovery:
		p.load(ctx)
	case *actor.Started:
		p.started(ctx)
	case drainRequested:
		p.graceful = true
	case *actor.Stopping:
		p.stop(ctx)
	case *actor.Stopped:
		p.publishStopped(ctx)
	case *actor.Restarting:
		// A panic in this actor is a bug; its supervisor restarts it from
		// the vchannels given at spawn. Leave no goroutine behind.
		p.stop(ctx)
	default:
		// A request of a type lowwater does not take gets a typed error
		// rather than a timeout. Messages without a sender pass silently:
		// protoactor's own (Terminated, ReceiveTimeout) come that way.
		if ctx.Sender() != nil {
			p.unknown(ctx)
		}
	}
}

func (p *pchannel) unknown(ctx actor.Context) {
	ctx.Respond(fmt.Errorf("%w: %T", messages.ErrUnknownMessage, ctx.Message()))
}

// The cases of Receive that are not the hot path live in methods of their
// own: inlined, their zap fields and closures made Receive's frame 670
// bytes, and every mailbox wake-up (a new goroutine, with a small stack)
// paid for copying its stack to a larger one.

func (p *pchannel) addVChannel(ctx actor.Context, m *messages.AddVChannel) {
	if m == nil {
		p.applied(ctx, m, nil, false, messages.ErrNilCommand)
		return
	}
	from := p.tracker.Minimum()
	advanced, err := p.tracker.Add(m.VChannel, m.Checkpoint)
	if err == nil {
		p.publish(&messages.VChannelAdded{Header: p.header(), VChannel: m.VChannel, Checkpoint: m.Checkpoint})
		p.cfg.logger.Info("vchannel added", zap.String("vchannel", m.VChannel), zap.Stringer("checkpoint", m.Checkpoint))
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
	if err == nil {
		p.publish(&messages.VChannelDropped{Header: p.header(), VChannel: m.VChannel})
		p.cfg.logger.Info("vchannel dropped", zap.String("vchannel", m.VChannel))
	}
	p.applied(ctx, m, from, advanced, err)
}

func (p *pchannel) started(ctx actor.Context) {
	p.self, p.events = ctx.Self(), ctx.ActorSystem().EventStream
	if o := p.cfg.ownership; o != nil {
		root, self := ctx.ActorSystem().Root, ctx.Self()
		p.unwatch = context.AfterFunc(o, func() { root.Send(self, &ownershipLost{cause: context.Cause(o)}) })
	}
	if p.cfg.preloaded != nil {
		p.recovery.attempt = 1
		p.onLoaded(ctx, &loaded{checkpoint: *p.cfg.preloaded})
		return
	}
	p.load(ctx)
}

func (p *pchannel) syncPersister(ctx actor.Context) {
	ctx.Respond(&persisterSync{persisted: p.persisted, minimum: p.tracker.Minimum(), cfg: p.cfg})
}

func (p *pchannel) restartPersister(m *restartPersister) {
	if !p.stopping && p.crashed {
		p.crashed = false
		p.supervisor.RestartChildren(m.pid)
	}
}

// applied finishes a single command: reply, events, persister.
func (p *pchannel) applied(ctx actor.Context, cmd messages.Command, from wal.MessageID, advanced bool, err error) {
	if err != nil {
		p.reject(ctx, cmd, err)
		if ctx.Sender() != nil {
			ctx.Respond(err)
		}
		return
	}
	if advanced {
		p.advanced(from)
	}
	if ctx.Sender() != nil {
		ctx.Respond(nil)
	}
}

func (p *pchannel) updateBatch(ctx actor.Context, m *messages.UpdateBatch) {
	from := p.tracker.Minimum()
	var rejected []messages.Rejection
	for i, u := range m.Updates {
		if _, err := p.tracker.Update(u.VChannel, u.Checkpoint); err != nil {
			rejected = append(rejected, messages.Rejection{Index: i, VChannel: u.VChannel, Err: err})
			p.reject(ctx, m, err)
		}
	}
	if p.cfg.counters != nil {
		p.cfg.counters.Updates.Add(uint64(len(m.Updates) - len(rejected)))
	}
	// Updates only raise checkpoints, so the minimum rose within the batch
	// exactly when it ends above where it began: one event, one save.
	if wal.Less(from, p.tracker.Minimum()) {
		p.advanced(from)
	}
	if ctx.Sender() == nil {
		return
	}
	if rejected != nil {
		ctx.Respond(&messages.BatchError{Rejected: rejected})
		return
	}
	ctx.Respond(nil)
}

func (p *pchannel) reject(ctx actor.Context, cmd messages.Command, err error) {
	p.publish(&messages.CommandRejected{Header: p.header(), Command: cmd, Err: err})
	p.cfg.logger.Warn("command rejected", zap.String("command", fmt.Sprintf("%T", cmd)), zap.Error(err))
}

// advanced publishes the new minimum. The persister gets the same message,
// the latest one only, when the mailbox has run empty (or after a long
// run of messages; see mailbox): a burst of rises costs it one message,
// and the save it starts carries the burst's last minimum, where handing
// over every rise would start one on the first. The persister coalesces
// further: only the latest minimum is ever pending there.
func (p *pchannel) advanced(from wal.MessageID) {
	ev := &messages.MinimumAdvanced{Header: p.header(), From: from, To: p.tracker.Minimum()}
	p.publish(ev)
	if p.persister != nil && !p.fenced {
		p.pendingAdvance = ev
	}
}

// wantsDrained asks the mailbox for mailboxDrained while a rise of the
// minimum waits to be handed to the persister.
func (p *pchannel) wantsDrained() bool { return p.pendingAdvance != nil }

// notifyPersister hands the latest rise of the minimum to the persister.
func (p *pchannel) notifyPersister(ctx actor.Context) {
	ev := p.pendingAdvance
	p.pendingAdvance = nil
	if ev != nil && p.persister != nil && !p.fenced {
		ctx.Send(p.persister, ev)
	}
}

func (p *pchannel) state(withVChannels bool) *messages.State {
	s := &messages.State{
		PChannel:       p.cfg.pchannel,
		WALName:        p.cfg.walName,
		StartMessageID: p.start,
		Minimum:        p.tracker.Minimum(),
		Persisted:      p.persisted,
		VChannels:      p.tracker.Len(),
		Recovered:      p.recovered,
		SaveInFlight:   p.saving,
	}
	if withVChannels {
		s.Checkpoints = p.tracker.Checkpoints()
	}
	return s
}

// load reads the stored checkpoint off the mailbox goroutine; the result
// comes back as a loaded message. A panicking catalog counts as a failed
// read, not a crash.
func (p *pchannel) load(ctx actor.Context) {
	if p.stopping {
		return
	}
	p.recovery.attempt++
	c, cancel := context.WithTimeout(context.Background(), p.cfg.saveTimeout)
	done := make(chan struct{})
	p.recovery.cancel, p.recovery.done = cancel, done
	root, self, catalog, name := ctx.ActorSystem().Root, ctx.Self(), p.cfg.catalog, p.cfg.pchannel
	go func() {
		defer close(done)
		defer cancel()
		id, err := loadRecovering(c, catalog, name)
		root.Send(self, &loaded{checkpoint: id, err: err})
	}()
}

func loadRecovering(ctx context.Context, catalog persistence.Catalog, pchannel string) (id wal.MessageID, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("lowwater: catalog panicked in Load: %v", r)
		}
	}()
	return catalog.Load(ctx, pchannel)
}

func (p *pchannel) onLoaded(ctx actor.Context, m *loaded) {
	p.recovery.cancel, p.recovery.done = nil, nil
	if p.stopping || p.recovered {
		return
	}
	err := m.err
	if err == nil && m.checkpoint != nil {
		if werr := wal.Check(p.cfg.walName, m.checkpoint); werr != nil {
			// A record of another WAL is as unusable as a corrupt one.
			err = &persistence.CorruptRecordError{PChannel: p.cfg.pchannel, Err: werr}
		}
	}
	if err != nil {
		if p.recovery.backoff == nil {
			// Built on the first failure: most recoveries never fail.
			p.recovery.backoff = p.cfg.backoff.New()
		}
		wait := p.recovery.backoff.NextBackOff()
		p.publish(&messages.RecoveryFailed{Header: p.header(), Err: err, Attempt: p.recovery.attempt, NextRetry: wait})
		log := p.cfg.logger.Warn
		if errors.Is(err, persistence.ErrCorruptRecord) {
			// Never start from nothing over a record we cannot read: that
			// could regress the stored checkpoint. An operator must repair
			// or delete it; until then we retry at the backoff's pace.
			log = p.cfg.logger.Error
		}
		log("recovery failed", zap.Int("attempt", p.recovery.attempt), zap.Duration("nextRetry", wait), zap.Error(err))
		root, self := ctx.ActorSystem().Root, ctx.Self()
		p.recovery.timer = time.AfterFunc(wait, func() { root.Send(self, &retryRecovery{}) })
		return
	}
	p.recovered = true
	p.persisted = m.checkpoint
	p.start = m.checkpoint
	if p.start == nil {
		p.start = p.spawnMinimum
	}
	p.publish(&messages.Recovered{Header: p.header(), StartMessageID: p.start, FromCatalog: m.checkpoint != nil, Attempts: p.recovery.attempt})
	p.cfg.logger.Info("recovered", zap.Stringer("start", stringer{p.start}), zap.Bool("fromCatalog", m.checkpoint != nil), zap.Int("attempts", p.recovery.attempt))
	pid, err := ctx.SpawnNamed(persisterProps, "persister")
	if err != nil {
		// Only a duplicate name fails, and this actor spawns one persister.
		p.cfg.logger.Error("cannot spawn persister", zap.Error(err))
		return
	}
	p.persister = pid
}

// HandleFailure makes the pchannel its persister's supervisor: a crash
// (say, a panic inside a catalog) restarts the persister after a growing
// delay. The new persister asks for the floor and the minimum, so nothing
// is lost: both live here, not in the persister.
func (p *pchannel) HandleFailure(system *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	rs.Fail()
	p.supervisor = supervisor
	p.crashed = true
	p.restarts++
	p.saving = false
	delay := restartDelay(p.cfg.backoff, rs.NumberOfFailures(time.Minute))
	p.publish(&messages.PersisterRestarted{Header: p.header(), Reason: reason, Restarts: p.restarts})
	p.cfg.logger.Error("persister crashed; restarting", zap.Any("reason", reason), zap.Duration("delay", delay), zap.Int("restarts", p.restarts))
	root, self := system.Root, p.self
	p.restartTimer = time.AfterFunc(delay, func() { root.Send(self, &restartPersister{pid: child}) })
}

// restartDelay grows with recent crashes like the save backoff, without
// jitter: Initial × Multiplier^(n-1), capped at Max.
func restartDelay(b Backoff, failures int) time.Duration {
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(max(failures-1, 0)))
	return time.Duration(min(d, float64(b.Max)))
}

// stop ends whatever runs off the mailbox. A graceful stop first gives the
// persister up to the flush timeout to save the pending minimum; this is
// the one bounded wait in a handler, and the mailbox is closing anyway.
func (p *pchannel) stop(ctx actor.Context) {
	p.stopping = true
	if p.unwatch != nil {
		p.unwatch()
	}
	stopTimer(p.restartTimer)
	stopTimer(p.recovery.timer)
	if p.recovery.cancel != nil {
		p.recovery.cancel()
		<-p.recovery.done
	}
	if !p.graceful || p.persister == nil || p.fenced {
		return
	}
	if p.crashed {
		p.crashed = false
		p.supervisor.RestartChildren(p.persister)
	}
	// A stop can come before the mailbox ran empty: hand the latest rise
	// over first, as the drained mailbox would have, then ask for the flush.
	p.notifyPersister(ctx)
	flush := &flushRequest{persisted: p.persisted, minimum: p.tracker.Minimum(), cfg: p.cfg}
	res, err := ctx.RequestFuture(p.persister, flush, p.cfg.flushTime).Result()
	if r, ok := res.(*flushResult); ok && err == nil {
		p.raiseFloor(r.persisted)
	}
}

// loseOwnership stops saving at once and stops the actor: another owner
// may already be saving, and only the catalog's fencing stood between us.
func (p *pchannel) loseOwnership(ctx actor.Context, cause error) {
	if p.fenced {
		return
	}
	p.fenced = true
	p.publish(&messages.OwnershipLost{Header: p.header(), Cause: cause})
	p.cfg.logger.Warn("ownership lost; stopping", zap.Error(cause))
	if p.persister != nil {
		ctx.Stop(p.persister)
	}
	ctx.Stop(ctx.Self())
}

func (p *pchannel) publishStopped(ctx actor.Context) {
	ev := &messages.Stopped{Header: p.header(), Graceful: p.graceful, LastPersisted: p.persisted, Flushed: true}
	if min := p.tracker.Minimum(); wal.Less(p.persisted, min) {
		ev.Flushed, ev.Dropped = false, min
	}
	p.publish(ev)
	p.cfg.logger.Info("stopped", zap.Bool("graceful", ev.Graceful), zap.Stringer("persisted", stringer{ev.LastPersisted}),
		zap.Bool("flushed", ev.Flushed), zap.Stringer("dropped", stringer{ev.Dropped}))
}

func (p *pchannel) raiseFloor(v wal.MessageID) {
	if wal.Less(p.persisted, v) {
		p.persisted = v
	}
}

func (p *pchannel) header() messages.Header { return messages.NewHeader(p.cfg.pchannel) }

// publish hands ev to the EventStream's subscribers, which run here, on
// the mailbox goroutine. A panicking subscriber is logged, not let through:
// the restart it would cause rebuilds the tracker from the vchannels given
// at spawn, forgetting those added since, and a minimum above one of them
// could then be saved (I1). Subscribers after it miss the event.
func (p *pchannel) publish(ev messages.Event) {
	defer func() {
		if r := recover(); r != nil {
			p.cfg.logger.Error("event subscriber panicked", zap.String("event", fmt.Sprintf("%T", ev)), zap.Any("reason", r))
		}
	}()
	p.events.Publish(ev)
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// stringer formats a possibly nil ID for zap.
type stringer struct{ id wal.MessageID }

func (s stringer) String() string { return wal.String(s.id) }
