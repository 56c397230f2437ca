package invariants

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"pgregory.net/rapid"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// TestModel drives one PChannel actor (and its restarts on the same
// catalog) with random commands, valid and invalid, catalog faults,
// outages, a second writer, persister crashes, graceful and hard stops and
// the passing of (fake) time, and after every step checks it against a
// plain reference model:
//
//   - GetState equals the model exactly: checkpoints, minimum, start
//     message ID, persisted, recovered, save in flight;
//   - every reply, every command event and every log line of a command is
//     the one the model predicts (I7: a rejection changes nothing);
//   - every catalog call is checked as it starts: it saves the persister's
//     latest target (a retry saves the latest minimum), strictly above
//     the persisted value (it never goes backward), which was a minimum of this incarnation (I1), with at
//     most one save in flight (I4), and retries follow the backoff exactly:
//     the next attempt starts NextRetry after a failure (never sooner, and
//     NextRetry is never below the initial interval), unless a graceful
//     stop cut the wait short or the target was meanwhile replaced by one
//     not above the persisted value (then the next save waits for a rise);
//   - every call's outcome produces exactly the lifecycle events the model
//     predicts (CheckpointPersisted, PersistFailed, PersisterRestarted,
//     Recovered, RecoveryFailed, Stopped), and the catalog's history equals
//     the model's prediction: non-decreasing, acknowledged values strictly
//     increasing across restarts (I2);
//   - after "settle" (catalog healthy, time passes) the target is persisted
//     within one backoff cap of the catalog's recovery (I3), and a graceful
//     stop that can flush does flush;
//   - each case runs in its own synctest bubble, which fails if any
//     goroutine is left when the case ends (I6), under -race in make test.
//
// 100 cases by default (make test); make soak runs -rapid.checks=10000.
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		rapid.SyncTest(rt, runModel)
	})
}

const modelPChannel = "pch-model"

// modelConfig is drawn per case: the defaults, or a faster, jitter-free
// schedule, so that both the promised defaults and exact intervals are
// exercised. Fake time makes the defaults free.
type modelConfig struct {
	backoff     actors.Backoff
	saveTimeout time.Duration
	flushTime   time.Duration
	minInterval time.Duration
}

func (c modelConfig) String() string {
	return fmt.Sprintf("backoff %+v, save timeout %v, flush %v, min interval %v", c.backoff, c.saveTimeout, c.flushTime, c.minInterval)
}

// opt is an optional checkpoint value: the model works on Kafka offsets.
type opt struct {
	v  int64
	ok bool
}

func some(v int64) opt { return opt{v: v, ok: true} }

func optOf(id wal.MessageID) opt {
	if id == nil {
		return opt{}
	}
	return some(int64(id.(wal.KafkaID)))
}

func (o opt) id() wal.MessageID {
	if !o.ok {
		return nil
	}
	return wal.KafkaID(o.v)
}

// less is wal.Less: none is below every value.
func (o opt) less(p opt) bool { return p.ok && (!o.ok || o.v < p.v) }

func (o opt) String() string { return wal.String(o.id()) }

func maxOpt(a, b opt) opt {
	if a.less(b) {
		return b
	}
	return a
}

type persisterState int

const (
	psNone persisterState = iota // not recovered: no persister
	psUp                         // synced with the parent
	psDown                       // crashed, restart pending at restartAt
)

type stepKind int

const (
	stepCommand stepKind = iota
	stepTime
	stepSpawn
	stepGraceful
	stepHard
	stepOther
)

// expectation matches one event.
type expectation struct {
	desc  string
	match func(messages.Event) error
}

type model struct {
	t   *rapid.T
	cfg modelConfig
	// overdueSeen holds the calls (by their index in the probe) already
	// reported overdue.
	overdueSeen map[int]bool
	// flushDeadline is when the graceful stop in progress gives up its
	// flush; zero outside one.
	flushDeadline time.Time
	sys           *actor.ActorSystem
	sub           *eventstream.Subscription
	rec           *recorder
	logs          *observer.ObservedLogs
	logger        *zap.Logger
	mem           *persistence.Memory
	probe         *probe
	// crashNext makes the logger panic on the persister's next "save
	// failed" line: a bug on the persister's goroutine, which crashes it
	// (a catalog's panic no longer does). crashArmed is the model's copy.
	crashNext  *atomic.Bool
	crashArmed bool
	// loseOwnership ends the current incarnation's ownership context;
	// ownershipLost is set for the step in which it did.
	loseOwnership context.CancelCauseFunc
	ownershipLost bool

	// The current incarnation of the actor.
	pid      *actor.PID
	inc      int
	vcs      map[string]int64
	minima   map[int64]bool // every minimum this incarnation had (I1)
	spawnMin opt
	start    opt
	ps       persisterState
	// restartAt is when a crashed persister comes back.
	restartAt time.Time
	crashes   []time.Time
	// target is the value the persister wants saved (its plan's target).
	target opt
	// floor is the persister's (and the parent's) persisted value.
	floor    opt
	floors   map[int64]bool // every floor value this incarnation held
	attempts int            // plan.Attempt()
	loads    int            // recovery reads so far
	preload  *opt           // Recovered is due without a Load
	// The previous save of the current plan, for the retry schedule:
	// retry is its NextRetry when it failed plainly, ok whether it saved.
	lastSave      *call
	lastSaveRetry time.Duration
	lastSaveOK    bool
	lastLoad      *call
	lastLoadRetry time.Duration
	// lastFailure is when a call last failed (I3). void is set when,
	// since then, the persister had nothing pending: an Add lowered the
	// minimum and the next rise replaced the target with one at or below
	// the persisted value. Its retry timer then finds nothing to do, and
	// the next save waits for a rise, not for the backoff.
	lastFailure time.Time
	void        bool
	healedAt    time.Time

	// The whole case.
	stored  opt // what the catalog holds, as predicted
	history []int64
	rivals  map[int64]bool
	lastAck opt

	evCursor, callStart, callEnd int
	expectCmd                    []expectation
	expectStop                   *expectation
	wantLogs                     map[string]int
	// life holds the step's lifecycle events not yet matched; stepEvents
	// all of the step's events, for messages.
	life, stepEvents []messages.Event
}

func runModel(t *rapid.T) {
	cfg := modelConfig{backoff: actors.DefaultBackoff(), saveTimeout: actors.DefaultSaveTimeout, flushTime: actors.DefaultStopFlushTimeout}
	if rapid.Bool().Draw(t, "fastConfig") {
		cfg = modelConfig{
			backoff:     actors.Backoff{Initial: 50 * time.Millisecond, Max: 400 * time.Millisecond, Multiplier: 2},
			saveTimeout: 300 * time.Millisecond,
			flushTime:   time.Second,
		}
	}
	cfg.minInterval = rapid.SampledFrom([]time.Duration{0, 0, 200 * time.Millisecond, 10 * time.Second}).Draw(t, "minInterval")
	t.Logf("config: %s", cfg)

	core, logs := observer.New(zap.DebugLevel)
	crashNext := new(atomic.Bool)
	m := &model{
		t:         t,
		cfg:       cfg,
		sys:       actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop()))),
		rec:       newRecorder(modelPChannel),
		logs:      logs,
		crashNext: crashNext,
		logger: zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
			if e.Message == "save failed" && crashNext.CompareAndSwap(true, false) {
				panic(persisterBug{})
			}
			return nil
		})),
		mem:      persistence.NewMemory(),
		rivals:   map[int64]bool{},
		wantLogs: map[string]int{},
	}
	m.probe = newProbe(faultinject.Wrap(m.mem))
	m.sub = m.sys.EventStream.Subscribe(m.rec.Observe)
	t.Cleanup(m.teardown)
	// Calls abandoned by a stop (a stubborn catalog) return in the
	// bubble's fake time before the case ends, however it ends: a
	// deferred call runs on the bubble's main goroutine, a Cleanup may not.
	defer func() {
		if m.pid != nil {
			_ = m.sys.Root.StopFuture(m.pid).Wait() // no call starts after this
			m.pid = nil
		}
		if d := time.Until(m.probe.stubbornEnd()); d > 0 {
			time.Sleep(d)
		}
	}()

	initial := map[string]int64{}
	for _, name := range rapid.SliceOfNDistinct(rapid.SampledFrom(vchannelNames[1:]), 0, 4, rapid.ID[string]).Draw(t, "initialVChannels") {
		initial[name] = rapid.Int64Range(0, 20).Draw(t, "initialCheckpoint")
	}
	if rapid.IntRange(0, 4).Draw(t, "initialLoadFaults") == 0 {
		m.actLoadFaults(t)
	}
	m.spawn(initial, false)

	t.Repeat(map[string]func(*rapid.T){
		"add":         m.actAdd,
		"update":      m.actUpdate,
		"advance":     m.actAdvance,
		"advanceMin":  m.actAdvance,
		"batch":       m.actBatch,
		"drop":        m.actDrop,
		"badInput":    m.actBadInput,
		"saveFaults":  m.actSaveFaults,
		"loadFaults":  m.actLoadFaults,
		"outage":      m.actOutage,
		"rival":       m.actRival,
		"storedAhead": m.actStoredAhead,
		"tick":        m.actTick,
		"settle":      m.actSettle,
		"restart":     m.actRestart,
		"slowStop":    m.actSlowSaveThenStop,
		"crash":       m.actCrash,
		"ownership":   m.actOwnershipLost,
	})

	// The end of every case: a healthy catalog, then a graceful stop that
	// must flush.
	m.actSettle(t)
	m.stop(true)
}

var vchannelNames = []string{"", "a", "b", "c", "d", "e"}

// persisterBug is the panic of the logger that crashes the persister.
type persisterBug struct{}

// actCrash arms a persister crash on its next failed save.
func (m *model) actCrash(t *rapid.T) {
	m.crashNext.Store(true)
	m.crashArmed = true
	m.reconcile(stepOther)
}

// teardown stops whatever is left; it runs even when the case failed.
func (m *model) teardown() {
	if m.pid != nil {
		_ = m.sys.Root.StopFuture(m.pid).Wait()
		m.pid = nil
	}

	m.sys.EventStream.Unsubscribe(m.sub)
	_ = m.probe.Close() // ends any hang; closes the Memory
	m.sys.Shutdown()
	drainDeadLetters(m.sys)
}

// drainDeadLetters lets fake time pass after an actor system is shut down
// in a bubble. A timer that fires at the very instant its actor stops (fake
// time makes equal instants common) sends a dead letter, and protoactor's
// dead-letter throttle then waits DeadLetterThrottleInterval on a ticker in
// a goroutine of its own; time stops when the bubble's main goroutine
// returns, so that goroutine would be left blocked.
func drainDeadLetters(sys *actor.ActorSystem) {
	time.Sleep(2 * sys.Config.DeadLetterThrottleInterval)
	synctest.Wait()
}

// --- the reference model of the tracker ---------------------------------

func (m *model) minimum() opt {
	var lo opt
	for _, v := range m.vcs {
		if !lo.ok || v < lo.v {
			lo = some(v)
		}
	}
	return lo
}

func (m *model) highest() int64 {
	var hi int64
	for _, v := range m.vcs {
		hi = max(hi, v)
	}
	return max(hi, m.stored.v)
}

func (m *model) checkpoints() map[string]wal.MessageID {
	out := make(map[string]wal.MessageID, len(m.vcs))
	for name, v := range m.vcs {
		out[name] = wal.KafkaID(v)
	}
	return out
}

// validate is the model's reading of Add's and Update's argument checks.
func validate(name string, cp wal.MessageID) error {
	switch {
	case name == "":
		return messages.ErrEmptyVChannel
	case cp == nil:
		return messages.ErrNilCheckpoint
	}
	if _, ok := cp.(wal.KafkaID); !ok {
		return messages.ErrWALMismatch
	}
	return nil
}

func (m *model) add(name string, cp wal.MessageID) error {
	if err := validate(name, cp); err != nil {
		return err
	}
	if _, ok := m.vcs[name]; ok {
		return messages.ErrVChannelExists
	}
	m.vcs[name] = int64(cp.(wal.KafkaID))
	return nil
}

func (m *model) update(name string, cp wal.MessageID) error {
	if err := validate(name, cp); err != nil {
		return err
	}
	cur, ok := m.vcs[name]
	v := int64(cp.(wal.KafkaID))
	switch {
	case !ok:
		return messages.ErrVChannelNotFound
	case v < cur:
		return messages.ErrCheckpointRollback
	}
	m.vcs[name] = v
	return nil
}

func (m *model) drop(name string) error {
	if name == "" {
		return messages.ErrEmptyVChannel
	}
	if _, ok := m.vcs[name]; !ok {
		return messages.ErrVChannelNotFound
	}
	delete(m.vcs, name)
	return nil
}

// moved records a minimum change from before: the minimum joins the
// incarnation's minima; when it rose, MinimumAdvanced is due and the
// persister (if it is up) takes it as its target; when it fell (an Add
// below it), the persister takes it as its target all the same
// (a retry saves the latest minimum, not the one that failed).
func (m *model) moved(before opt) {
	after := m.minimum()
	if after.ok {
		m.minima[after.v] = true
	}
	if after.ok && after.less(before) && m.ps == psUp {
		m.target = after
		if !m.floor.less(m.target) {
			m.void = true
		}
	}
	if !before.less(after) {
		return
	}
	m.expectCmd = append(m.expectCmd, expectation{
		desc: fmt.Sprintf("MinimumAdvanced(%s→%s)", before, after),
		match: func(ev messages.Event) error {
			e, ok := ev.(*messages.MinimumAdvanced)
			if !ok || optOf(e.From) != before || optOf(e.To) != after {
				return errMismatch
			}
			return nil
		},
	})
	if m.ps == psUp {
		m.target = after
		if !m.floor.less(m.target) {
			m.void = true
		}
	}
}

var errMismatch = errors.New("mismatch")

func (m *model) expectRejected(cmd messages.Command, want error) {
	m.wantLogs["command rejected"]++
	m.expectCmd = append(m.expectCmd, expectation{
		desc: fmt.Sprintf("CommandRejected(%T, %v)", cmd, want),
		match: func(ev messages.Event) error {
			e, ok := ev.(*messages.CommandRejected)
			if !ok || e.Command != cmd || !errors.Is(e.Err, want) {
				return errMismatch
			}
			return nil
		},
	})
}

// --- drawing commands ------------------------------------------------------

// drawCheckpoint draws a checkpoint: mostly a valid Kafka offset up to hi,
// sometimes nil, a typed nil, or an ID of another WAL.
func drawCheckpoint(t *rapid.T, hi int64) wal.MessageID {
	v := rapid.Int64Range(0, hi).Draw(t, "offset")
	switch rapid.IntRange(0, 11).Draw(t, "checkpointKind") {
	case 0:
		return nil
	case 1:
		return (*wal.KafkaID)(nil)
	case 2:
		return wal.RocksMQID(v)
	case 3:
		return wal.PulsarID{LedgerID: v}
	default:
		return wal.KafkaID(v)
	}
}

// deliver sends cmd with RequestFuture (and returns the reply) or with
// Send (no reply; the rejection is only published and logged).
func (m *model) deliver(t *rapid.T, cmd messages.Command) (reply error, asked bool) {
	if rapid.Bool().Draw(t, "request") {
		return actors.Request(ctxtest.Within(time.Minute), m.sys.Root, m.pid, cmd), true
	}
	m.sys.Root.Send(m.pid, cmd)
	return nil, false
}

func (m *model) wantReply(reply error, asked bool, want error, cmd messages.Command) {
	if !asked {
		return
	}
	if want == nil {
		require.NoError(m.t, reply, "%T %+v", cmd, cmd)
		return
	}
	require.ErrorIs(m.t, reply, want, "%T %+v", cmd, cmd)
}

func (m *model) actAdd(t *rapid.T) {
	name := rapid.SampledFrom(vchannelNames).Draw(t, "vchannel")
	cp := drawCheckpoint(t, m.highest()+3)
	cmd := &messages.AddVChannel{VChannel: name, Checkpoint: cp}
	before := m.minimum()
	want := m.add(name, cp)
	reply, asked := m.deliver(t, cmd)
	m.wantReply(reply, asked, want, cmd)
	if want != nil {
		m.expectRejected(cmd, want)
	} else {
		m.wantLogs["vchannel added"]++
		m.expectCmd = append(m.expectCmd, expectation{
			desc: fmt.Sprintf("VChannelAdded(%s@%s)", name, cp),
			match: func(ev messages.Event) error {
				e, ok := ev.(*messages.VChannelAdded)
				if !ok || e.VChannel != name || e.Checkpoint != cp {
					return errMismatch
				}
				return nil
			},
		})
		m.moved(before)
	}
	m.reconcile(stepCommand)
}

func (m *model) actUpdate(t *rapid.T) {
	name := rapid.SampledFrom(vchannelNames).Draw(t, "vchannel")
	cp := drawCheckpoint(t, m.highest()+3)
	m.updateOne(t, name, cp)
}

// actAdvance moves a vchannel at the minimum forward by 0 to 3, so that
// the minimum rises often and saves happen.
func (m *model) actAdvance(t *rapid.T) {
	lo := m.minimum()
	if !lo.ok {
		t.Skip("no vchannel")
	}
	var at []string
	for name, v := range m.vcs {
		if v == lo.v {
			at = append(at, name)
		}
	}
	slices.Sort(at)
	name := rapid.SampledFrom(at).Draw(t, "vchannel")
	m.updateOne(t, name, wal.KafkaID(lo.v+rapid.Int64Range(0, 3).Draw(t, "delta")))
}

func (m *model) updateOne(t *rapid.T, name string, cp wal.MessageID) {
	cmd := &messages.UpdateCheckpoint{VChannel: name, Checkpoint: cp}
	before := m.minimum()
	want := m.update(name, cp)
	reply, asked := m.deliver(t, cmd)
	m.wantReply(reply, asked, want, cmd)
	if want != nil {
		m.expectRejected(cmd, want)
	} else {
		m.moved(before)
	}
	m.reconcile(stepCommand)
}

func (m *model) actBatch(t *rapid.T) {
	n := rapid.IntRange(0, 5).Draw(t, "batchSize")
	updates := make([]messages.VChannelCheckpoint, n)
	for i := range updates {
		if lo := m.minimum(); lo.ok && rapid.Bool().Draw(t, "advanceEntry") {
			names := slices.Sorted(maps.Keys(m.vcs))
			name := rapid.SampledFrom(names).Draw(t, "vchannel")
			updates[i] = messages.VChannelCheckpoint{VChannel: name, Checkpoint: wal.KafkaID(m.vcs[name] + rapid.Int64Range(0, 3).Draw(t, "delta"))}
			continue
		}
		updates[i] = messages.VChannelCheckpoint{
			VChannel:   rapid.SampledFrom(vchannelNames).Draw(t, "vchannel"),
			Checkpoint: drawCheckpoint(t, m.highest()+3),
		}
	}
	m.batch(t, updates)
}

// batch sends an UpdateBatch and checks its reply and events.
func (m *model) batch(t *rapid.T, updates []messages.VChannelCheckpoint) {
	cmd := &messages.UpdateBatch{Updates: updates}
	before := m.minimum()
	type rejection struct {
		index int
		name  string
		err   error
	}
	var rejected []rejection
	for i, u := range updates {
		if err := m.update(u.VChannel, u.Checkpoint); err != nil {
			rejected = append(rejected, rejection{i, u.VChannel, err})
			m.expectRejected(cmd, err)
		}
	}
	m.moved(before)
	reply, asked := m.deliver(t, cmd)
	if asked {
		if rejected == nil {
			require.NoError(t, reply)
		} else {
			var be *messages.BatchError
			require.ErrorAs(t, reply, &be)
			require.Len(t, be.Rejected, len(rejected), "%v", be)
			for i, r := range rejected {
				got := be.Rejected[i]
				require.Equal(t, r.index, got.Index)
				require.Equal(t, r.name, got.VChannel)
				require.ErrorIs(t, got.Err, r.err)
			}
		}
	}
	m.reconcile(stepCommand)
}

func (m *model) actDrop(t *rapid.T) {
	name := rapid.SampledFrom(vchannelNames).Draw(t, "vchannel")
	cmd := &messages.DropVChannel{VChannel: name}
	before := m.minimum()
	want := m.drop(name)
	reply, asked := m.deliver(t, cmd)
	m.wantReply(reply, asked, want, cmd)
	if want != nil {
		m.expectRejected(cmd, want)
	} else {
		m.wantLogs["vchannel dropped"]++
		m.expectCmd = append(m.expectCmd, expectation{
			desc: "VChannelDropped(" + name + ")",
			match: func(ev messages.Event) error {
				if e, ok := ev.(*messages.VChannelDropped); !ok || e.VChannel != name {
					return errMismatch
				}
				return nil
			},
		})
		m.moved(before)
	}
	m.reconcile(stepCommand)
}

// actBadInput sends what no well-typed caller should: nil command
// pointers, a nil GetState, a message of no known type.
func (m *model) actBadInput(t *rapid.T) {
	switch kind := rapid.IntRange(0, 5).Draw(t, "badKind"); kind {
	case 0, 1, 2, 3:
		cmd := []messages.Command{(*messages.AddVChannel)(nil), (*messages.UpdateCheckpoint)(nil),
			(*messages.DropVChannel)(nil), (*messages.UpdateBatch)(nil)}[kind]
		reply, asked := m.deliver(t, cmd)
		m.wantReply(reply, asked, messages.ErrNilCommand, cmd)
		m.expectRejected(cmd, messages.ErrNilCommand)
	case 4:
		res, err := m.sys.Root.RequestFuture(m.pid, (*messages.GetState)(nil), time.Minute).Result()
		require.NoError(t, err)
		st, ok := res.(*messages.State)
		require.True(t, ok, "reply %T", res)
		require.Nil(t, st.Checkpoints)
		require.Equal(t, len(m.vcs), st.VChannels)
	case 5:
		m.sys.Root.Send(m.pid, "not a lowwater message")
	}
	m.reconcile(stepCommand)
}

// --- faults, outages, a second writer, time --------------------------------

func (m *model) drawFaults(t *rapid.T) []fault {
	n := rapid.IntRange(1, 3).Draw(t, "faults")
	out := make([]fault, n)
	for i := range out {
		k := rapid.SampledFrom([]faultKind{fError, fError, fLostReply, fLatency, fHang, fPanic, fStubborn}).Draw(t, "fault")
		out[i] = fault{kind: k}
		switch k {
		case fLatency:
			out[i].delay = time.Duration(rapid.Int64Range(1, int64(m.cfg.saveTimeout/time.Millisecond)-1).Draw(t, "latencyMs")) * time.Millisecond
		case fStubborn:
			// Below the save timeout, past it, past the flush timeout and
			// the join grace, or far past everything.
			out[i].delay = rapid.SampledFrom([]time.Duration{m.cfg.saveTimeout / 2, m.cfg.saveTimeout + time.Second,
				m.cfg.flushTime + time.Second, 10 * time.Minute}).Draw(t, "stubbornDelay")
		}
	}
	return out
}

func (m *model) actSaveFaults(t *rapid.T) {
	m.probe.script(faultinject.OpSave, m.drawFaults(t)...)
	m.reconcile(stepOther)
}

func (m *model) actLoadFaults(t *rapid.T) {
	m.probe.script(faultinject.OpLoad, m.drawFaults(t)...)
	if m.pid != nil {
		m.reconcile(stepOther)
	}
}

func (m *model) actOutage(t *rapid.T) {
	down := !m.probe.isDown()
	m.probe.setDown(down)
	if !down {
		m.healedAt = time.Now()
	}
	m.reconcile(stepOther)
}

// actRival is a second writer saving a higher checkpoint straight to the
// store: the actor's next lower save meets a real StoredAheadError.
func (m *model) actRival(t *rapid.T) {
	w := rapid.Int64Range(0, m.highest()+5).Draw(t, "rival")
	if m.stored.ok {
		w = m.stored.v + 1 + rapid.Int64Range(0, 8).Draw(t, "rivalAhead")
	}
	require.NoError(t, m.mem.Save(context.Background(), modelPChannel, wal.KafkaID(w)))
	m.stored = some(w)
	m.history = append(m.history, w)
	m.rivals[w] = true
	m.reconcile(stepOther)
}

// actStoredAhead is a second writer that saves a higher checkpoint, which
// faultinject's StoredAhead reports to the actor's next save (the value is
// in the store too). When that save is above it, the report is stale, as a
// racing store's could be: adopting it must not stop the actor from saving.
func (m *model) actStoredAhead(t *rapid.T) {
	w := m.stored.v + 1 + rapid.Int64Range(0, 8).Draw(t, "aheadBy")
	require.NoError(t, m.mem.Save(context.Background(), modelPChannel, wal.KafkaID(w)))
	m.stored = some(w)
	m.history = append(m.history, w)
	m.rivals[w] = true
	m.probe.script(faultinject.OpSave, fault{kind: fStoredAhead, stored: wal.KafkaID(w)})
	m.reconcile(stepOther)
}

func (m *model) actTick(t *rapid.T) {
	b := m.cfg.backoff
	d := rapid.SampledFrom([]time.Duration{time.Millisecond, b.Initial, b.Max / 2, b.Max, 2 * b.Max, m.cfg.saveTimeout, 16 * time.Minute}).Draw(t, "tick")
	time.Sleep(d) // moves the bubble's fake clock; synchronisation is synctest.Wait
	m.reconcile(stepTime)
}

// pending reports whether the actor still has something to do before it is
// settled: recover, restart its persister, or save its target.
func (m *model) pending() bool {
	return m.ps != psUp || m.floor.less(m.target)
}

// actSettle ends any outage and lets time pass until the actor settled:
// recovered, persister up, target persisted (I3). Faults still queued are
// used up by the retries meanwhile.
func (m *model) actSettle(t *rapid.T) {
	if m.probe.isDown() {
		m.probe.setDown(false)
		m.healedAt = time.Now()
		m.reconcile(stepOther)
	}
	step := m.cfg.backoff.Max + m.cfg.saveTimeout + m.cfg.minInterval
	for i := 0; m.pending() && i < 200; i++ {
		// A stubborn call holds the one save slot until it returns.
		time.Sleep(max(step, time.Until(m.probe.stubbornEnd())))
		m.reconcile(stepTime)
	}
	require.False(t, m.pending(), "not settled: persister %d, persisted %s, target %s", m.ps, m.floor, m.target)

	// I3: once the catalog is healthy again (after the last failed call
	// and the end of any outage), the next call comes within one backoff
	// cap: a retry, a recovery read or a restarted persister's save.
	// before is the last call started before then, which may have ended
	// after: a retry in flight as the outage ended, which succeeded,
	// leaves the next save to the minimum interval, not the backoff.
	healthy := m.lastFailure
	if m.healedAt.After(healthy) {
		healthy = m.healedAt
	}
	var before, after *call
	for _, c := range m.probe.snapshot(0) {
		switch {
		case c.incarnation != m.inc:
		case c.start.Before(healthy):
			before = &c
		case !c.start.Before(healthy) && after == nil:
			after = &c
		}
	}
	if before != nil && after != nil && !m.void {
		if o := classify(before); o != oOK && o != oStoredAhead {
			require.LessOrEqual(t, after.start.Sub(healthy), m.cfg.backoff.Max,
				"I3: after %s failed, the catalog was healthy at %v, yet the next call %s came only %v later",
				before, healthy.UnixMilli(), after, after.start.Sub(healthy))
		}
	}
}

// actSlowSaveThenStop puts a slow save in flight with a newer minimum
// pending behind it, then stops gracefully: the flush must save both, min
// save interval or not.
func (m *model) actSlowSaveThenStop(t *rapid.T) {
	if m.ps != psUp || len(m.vcs) == 0 || m.probe.isDown() || m.probe.queued(faultinject.OpSave) > 0 {
		t.Skip("needs a persister up, a vchannel and no fault queued")
	}
	if calls := m.probe.snapshot(m.callEnd); len(calls) > 0 {
		t.Skip("a call is in flight")
	}
	limit := min(m.cfg.saveTimeout, m.cfg.flushTime)/time.Millisecond - 1
	d := time.Duration(rapid.Int64Range(1, int64(limit)).Draw(t, "slowMs")) * time.Millisecond
	m.probe.script(faultinject.OpSave, fault{kind: fLatency, delay: d})
	for range 2 {
		to := m.highest() + 1
		var updates []messages.VChannelCheckpoint
		for _, name := range slices.Sorted(maps.Keys(m.vcs)) {
			updates = append(updates, messages.VChannelCheckpoint{VChannel: name, Checkpoint: wal.KafkaID(to)})
		}
		m.batch(t, updates)
	}
	m.stop(true)
	m.spawn(maps.Clone(m.vcs), false)
}

func (m *model) actRestart(t *rapid.T) {
	m.stop(rapid.Bool().Draw(t, "graceful"))
	vcs := maps.Clone(m.vcs)
	switch rapid.IntRange(0, 2).Draw(t, "restartVChannels") {
	case 1: // the WAL's metadata lists no vchannel
		vcs = map[string]int64{}
	case 2: // stale metadata: checkpoints behind where they were
		for name, v := range vcs {
			vcs[name] = max(0, v-rapid.Int64Range(0, 5).Draw(t, "stale"))
		}
	}
	m.spawn(vcs, rapid.Bool().Draw(t, "preload"))
}

// --- lifecycle ------------------------------------------------------------

func (m *model) spawn(vcs map[string]int64, preload bool) {
	t := m.t
	m.inc++
	m.probe.setIncarnation(m.inc)
	m.vcs = vcs
	m.minima = map[int64]bool{}
	m.spawnMin = m.minimum()
	if m.spawnMin.ok {
		m.minima[m.spawnMin.v] = true
	}
	m.start, m.ps, m.crashes, m.target, m.floor = opt{}, psNone, nil, opt{}, opt{}
	m.floors = map[int64]bool{}
	m.attempts, m.loads, m.lastSave, m.lastLoad, m.preload = 0, 0, nil, nil, nil
	m.lastFailure, m.healedAt = time.Time{}, time.Time{}

	owner, lose := context.WithCancelCause(context.Background())
	m.loseOwnership = lose
	opts := []actors.Option{
		actors.WithOwnership(owner),
		actors.WithLogger(m.logger),
		actors.WithBackoff(m.cfg.backoff),
		actors.WithSaveTimeout(m.cfg.saveTimeout),
		actors.WithStopFlushTimeout(m.cfg.flushTime),
		actors.WithMinSaveInterval(m.cfg.minInterval),
		actors.WithVChannels(m.checkpoints()),
	}
	if preload {
		stored, err := m.mem.Load(context.Background(), modelPChannel)
		require.NoError(t, err)
		require.Equal(t, m.stored.id(), stored)
		want := m.stored
		m.preload = &want
		opts = append(opts, actors.WithPreloaded(stored))
	}
	props, err := actors.NewProps(modelPChannel, wal.Kafka, m.probe, opts...)
	require.NoError(t, err)
	m.pid = m.sys.Root.Spawn(props)
	m.reconcile(stepSpawn)
}

// recovered is the model's half of recovery: what the actor must announce
// once the stored checkpoint stored is known.
func (m *model) recovered(stored opt, attempts int) {
	m.start = stored
	if !stored.ok {
		// The spawn's minimum, or a vchannel's added below it during
		// recovery.
		m.start = m.spawnMin
		if now := m.minimum(); m.start.ok && now.ok && now.v < m.start.v {
			m.start = now
		}
	}
	start, fromCatalog := m.start, stored.ok
	m.expectLife(fmt.Sprintf("Recovered(%s, fromCatalog=%v, attempts=%d)", start, fromCatalog, attempts), func(ev messages.Event) error {
		e, ok := ev.(*messages.Recovered)
		if !ok || optOf(e.StartMessageID) != start || e.FromCatalog != fromCatalog || e.Attempts != attempts {
			return errMismatch
		}
		return nil
	})
	m.floor = stored
	if stored.ok {
		m.floors[stored.v] = true
	}
	m.syncPersister()
}

// syncPersister is a (re)started persister syncing with its parent: a
// fresh plan whose target is the current minimum.
func (m *model) syncPersister() {
	m.ps = psUp
	m.target = m.minimum()
	m.attempts, m.lastSave = 0, nil
	if !m.floor.less(m.target) {
		m.void = true
	}
}

// flushGuaranteed reports whether a graceful stop now must leave nothing
// pending: the catalog is healthy, no fault is queued, and whatever is in
// flight ends well within the flush timeout.
func (m *model) flushGuaranteed() bool {
	if m.ps == psNone {
		return false
	}
	var inFlight *call
	if calls := m.probe.snapshot(m.callEnd); len(calls) > 0 && !calls[len(calls)-1].returned {
		inFlight = &calls[len(calls)-1]
	}
	if inFlight == nil && !m.pending() {
		return true
	}
	if m.probe.isDown() || m.probe.queued(faultinject.OpSave) > 0 || m.crashArmed {
		return false
	}
	return inFlight == nil ||
		inFlight.fault.kind == fLatency && inFlight.start.Add(inFlight.fault.delay).Before(time.Now().Add(m.cfg.flushTime))
}

// stop stops the current incarnation and checks its Stopped event.
func (m *model) stop(graceful bool) {
	t := m.t
	m.advanceClock(time.Now())
	guaranteed := graceful && m.flushGuaranteed()
	if graceful && m.ps == psDown {
		// A graceful stop restarts a crashed persister at once, so that it
		// can flush.
		m.syncPersister()
	}
	kind, fut := stepHard, m.sys.Root.StopFuture
	if graceful {
		kind, fut = stepGraceful, m.sys.Root.PoisonFuture
		m.flushDeadline = time.Now().Add(m.cfg.flushTime)
		defer func() { m.flushDeadline = time.Time{} }()
	}
	require.NoError(t, fut(m.pid).Wait())
	m.pid = nil
	m.expectStopped(graceful, guaranteed)
	m.reconcile(kind)
	if guaranteed {
		require.False(t, m.floor.less(m.target), "graceful stop did not flush: persisted %s, target %s", m.floor, m.target)
	}
}

// errOwnershipLost is the cause the model's ownership ends with.
var errOwnershipLost = errors.New("model: ownership moved to another node")

// actOwnershipLost ends the incarnation's ownership, in whatever phase it
// is: the actor publishes OwnershipLost, stops saving and stops itself, as
// a hard stop (no flush). A new owner takes over: a new incarnation.
func (m *model) actOwnershipLost(t *rapid.T) {
	m.advanceClock(time.Now())
	m.loseOwnership(errOwnershipLost)
	// The actor stops by itself, joining a stubborn call for up to the
	// join grace: let fake time pass until it published Stopped.
	for i := 0; !slices.ContainsFunc(m.rec.Since(m.evCursor), isStopped); i++ {
		require.Less(t, i, 1000, "no Stopped after the ownership loss")
		time.Sleep(time.Millisecond)
		synctest.Wait()
	}
	m.pid = nil
	m.ownershipLost = true
	m.expectStopped(false, false)
	m.reconcile(stepHard)
	m.ownershipLost = false
	m.spawn(maps.Clone(m.vcs), rapid.Bool().Draw(t, "preload"))
}

// expectStopped predicts the Stopped event of a stop.
func (m *model) expectStopped(graceful, guaranteed bool) {
	m.expectStop = &expectation{
		desc: fmt.Sprintf("Stopped(graceful=%v)", graceful),
		match: func(ev messages.Event) error {
			e, ok := ev.(*messages.Stopped)
			if !ok || e.Graceful != graceful {
				return errMismatch
			}
			last := optOf(e.LastPersisted)
			if graceful && !guaranteed {
				// A flush that timed out may not have told the parent of a
				// save it made; the value is still one it acknowledged.
				if m.floor.less(last) || last.ok && !m.floors[last.v] {
					return fmt.Errorf("last persisted %s: not at or below %s, or never persisted (%v)", last, m.floor, m.floors)
				}
			} else if last != m.floor {
				return fmt.Errorf("last persisted %s, want %s", last, m.floor)
			}
			lo := m.minimum()
			flushed := !last.less(lo)
			if e.Flushed != flushed {
				return fmt.Errorf("flushed %v, want %v (persisted %s, minimum %s)", e.Flushed, flushed, last, lo)
			}
			if dropped := optOf(e.Dropped); flushed && dropped.ok || !flushed && dropped != lo {
				return fmt.Errorf("dropped %s with flushed %v, minimum %s", dropped, flushed, lo)
			}
			switch {
			case flushed && e.Reason != nil:
				return fmt.Errorf("flushed, yet a reason: %v", e.Reason)
			case !flushed && m.ownershipLost && !errors.Is(e.Reason, errOwnershipLost):
				return fmt.Errorf("reason %v, want the ownership's cause", e.Reason)
			case !flushed && !graceful && !m.ownershipLost && !errors.Is(e.Reason, messages.ErrHardStop):
				return fmt.Errorf("reason %v, want ErrHardStop", e.Reason)
			case !flushed && graceful && !errors.Is(e.Reason, messages.ErrFlushTimeout) && !errors.Is(e.Reason, messages.ErrNotRecovered):
				return fmt.Errorf("reason %v, want ErrFlushTimeout or ErrNotRecovered", e.Reason)
			}
			return nil
		},
	}
}

// advanceClock restarts a crashed persister whose delay has passed by now:
// it syncs with the current minimum (no command runs while time passes).
func (m *model) advanceClock(now time.Time) {
	if m.ps == psDown && !now.Before(m.restartAt) {
		m.syncPersister()
	}
}

// restartDelay is the actor's documented delay before restarting a crashed
// persister: Initial × Multiplier^(n-1), capped at Max, n the crashes in the
// last minute.
func restartDelay(b actors.Backoff, crashes []time.Time, now time.Time) time.Duration {
	n := 0
	for _, c := range crashes {
		if now.Sub(c) < time.Minute {
			n++
		}
	}
	d := float64(b.Initial) * math.Pow(b.Multiplier, float64(max(n-1, 0)))
	return time.Duration(min(d, float64(b.Max)))
}

// --- reconciling the actor with the model -------------------------------

// lifecycleEvent reports the events that the persister and recovery
// publish, as opposed to those of commands.
// joinGrace is actors' grace past a call's deadline: a stubborn call still
// running then is reported overdue.
const joinGrace = 100 * time.Millisecond

// overdueReport reports whether ev tells of a catalog call that overran
// its deadline ignoring its context (actors.ErrCatalogOverdue).
func overdueReport(ev messages.Event) bool {
	switch e := ev.(type) {
	case *messages.PersistFailed:
		return errors.Is(e.Err, actors.ErrCatalogOverdue)
	case *messages.RecoveryFailed:
		return errors.Is(e.Err, actors.ErrCatalogOverdue)
	}
	return false
}

// checkOverdue finds the call an overdue report tells of: a stubborn call
// of its op, not reported before, that had run the save timeout and the
// join grace and was still running when the report was made, with no
// retry announced (NextRetry 0).
func (m *model) checkOverdue(ev messages.Event) {
	m.t.Helper()
	op, next := faultinject.OpSave, time.Duration(0)
	switch e := ev.(type) {
	case *messages.PersistFailed:
		next = e.NextRetry
	case *messages.RecoveryFailed:
		op, next = faultinject.OpLoad, e.NextRetry
	}
	require.Zero(m.t, next, "an overdue call is waited for, not retried: %s", eventString(ev))
	at := ev.EventHeader().At
	for i, c := range m.probe.snapshot(0) {
		due := c.start.Add(m.cfg.saveTimeout + joinGrace)
		if c.op != op || c.fault.kind != fStubborn || m.overdueSeen[i] || at.Before(due) || c.returned && c.end.Before(at) {
			continue
		}
		if m.overdueSeen == nil {
			m.overdueSeen = map[int]bool{}
		}
		m.overdueSeen[i] = true
		return
	}
	m.t.Fatalf("%s answers no stubborn call still running past its deadline; step events: %s", eventString(ev), describe(m.stepEvents))
}

func lifecycleEvent(ev messages.Event) bool {
	switch ev.(type) {
	case *messages.VChannelAdded, *messages.VChannelDropped, *messages.MinimumAdvanced, *messages.CommandRejected:
		return false
	}
	return true
}

func (m *model) expectLife(desc string, match func(messages.Event) error) messages.Event {
	m.t.Helper()
	if len(m.life) == 0 {
		m.t.Fatalf("missing %s; step events: %s", desc, describe(m.stepEvents))
	}
	ev := m.life[0]
	m.life = m.life[1:]
	if err := match(ev); err != nil {
		m.t.Fatalf("want %s, got %s: %v; step events: %s", desc, eventString(ev), err, describe(m.stepEvents))
	}
	return ev
}

// reconcile waits until every actor is idle or waiting on a timer, then
// checks everything that happened in the step against the model.
func (m *model) reconcile(kind stepKind) {
	t := m.t
	t.Helper()
	synctest.Wait()
	now := time.Now()

	evs := m.rec.Since(m.evCursor)
	m.evCursor += len(evs)
	m.stepEvents, m.life = evs, nil
	var cmdEvs []messages.Event
	for _, ev := range evs {
		if lifecycleEvent(ev) {
			m.life = append(m.life, ev)
		} else {
			cmdEvs = append(cmdEvs, ev)
		}
	}

	// Command events: exactly those predicted, in order.
	want := m.expectCmd
	m.expectCmd = nil
	descs := make([]string, len(want))
	for i, w := range want {
		descs[i] = w.desc
	}
	require.Len(t, cmdEvs, len(want), "command events: want [%s], got %s", strings.Join(descs, "; "), describe(cmdEvs))
	for i, w := range want {
		require.NoError(t, w.match(cmdEvs[i]), "want %s, got %s", w.desc, eventString(cmdEvs[i]))
	}

	// Logs of commands: one line per rejection or change, never a success
	// line for a rejected command.
	got := map[string]int{}
	for _, e := range m.logs.TakeAll() {
		msg := e.Message
		if strings.HasPrefix(msg, "vchannel added below the persisted checkpoint") {
			msg = "vchannel added"
		}
		switch msg {
		case "command rejected", "vchannel added", "vchannel dropped":
			got[msg]++
		}
	}
	for _, msg := range []string{"command rejected", "vchannel added", "vchannel dropped"} {
		require.Equal(t, m.wantLogs[msg], got[msg], "log lines %q", msg)
	}
	clear(m.wantLogs)

	// A stubborn call (one ignoring its context) still running the join
	// grace past its deadline is reported then, once, beside its own
	// outcome later: each report must answer such a call of its op.
	m.life = slices.DeleteFunc(m.life, func(ev messages.Event) bool {
		if !overdueReport(ev) {
			return false
		}
		m.checkOverdue(ev)
		return true
	})

	// An Add below the persisted checkpoint is told (AddedBehind), as it is
	// applied or once a save computed before it lands: when depends on
	// the race of the two actors, so the model checks what it says, not
	// when it comes. Its Persisted is checked once the calls are walked.
	var behind []*messages.AddedBehind
	m.life = slices.DeleteFunc(m.life, func(ev messages.Event) bool {
		b, ok := ev.(*messages.AddedBehind)
		if ok {
			require.NotEmpty(t, b.VChannels, "AddedBehind names no vchannel")
			require.True(t, slices.IsSorted(b.VChannels), "AddedBehind's vchannels unsorted: %v", b.VChannels)
			require.True(t, optOf(b.Minimum).less(optOf(b.Persisted)), "AddedBehind's minimum %s is not below its persisted %s",
				wal.String(b.Minimum), wal.String(b.Persisted))
			behind = append(behind, b)
		}
		return ok
	})

	// An ownership loss is announced before the stop it causes, and before
	// any call's outcome that the stop cut short.
	if m.ownershipLost {
		i := slices.IndexFunc(m.life, func(ev messages.Event) bool { _, ok := ev.(*messages.OwnershipLost); return ok })
		require.GreaterOrEqual(t, i, 0, "no OwnershipLost; step events: %s", describe(m.stepEvents))
		require.ErrorIs(t, m.life[i].(*messages.OwnershipLost).Cause, errOwnershipLost)
		m.life = slices.Delete(m.life, i, i+1)
	}

	// Lifecycle: walk the catalog calls in order; each predicts events.
	if m.preload != nil {
		stored := *m.preload
		m.preload = nil
		m.recovered(stored, 1)
	}
	base := m.callEnd
	calls := m.probe.snapshot(base)
	for i := range calls {
		c := &calls[i]
		if c.incarnation != m.inc && base+i < m.callStart {
			// Abandoned by a stopped incarnation (a stubborn call the stop
			// no longer waited for): its late result reached no actor.
			m.callEnd++
			continue
		}
		if base+i >= m.callStart {
			m.advanceClock(c.start)
			m.callStarted(c, kind)
			m.callStart++
		}
		if !c.returned {
			require.Equal(t, len(calls)-1, i, "I4: call %s still in flight while %s started", c, &calls[len(calls)-1])
			break
		}
		m.advanceClock(c.end)
		m.callEnded(c, kind, i == len(calls)-1)
		m.callEnd++
	}
	m.advanceClock(now)
	for _, b := range behind {
		require.True(t, m.floors[optOf(b.Persisted).v], "AddedBehind's persisted %s was never persisted (%v)", wal.String(b.Persisted), m.floors)
	}
	if m.expectStop != nil {
		m.expectLife(m.expectStop.desc, m.expectStop.match)
		m.expectStop = nil
	}
	if len(m.life) > 0 {
		t.Fatalf("unexpected events: %s; step events: %s", describe(m.life), describe(m.stepEvents))
	}

	// I4 across the whole case.
	inFlight, peak := m.probe.savesInFlight()
	require.LessOrEqual(t, peak, 1, "I4: %d saves in flight at once", peak)

	// The catalog holds what the model predicts; I1 and I2 on its history.
	require.Equal(t, m.history, kafkaValues(t, m.mem.History(modelPChannel)), "catalog history")
	for i, v := range m.history {
		if i > 0 {
			require.LessOrEqual(t, m.history[i-1], v, "I2: stored checkpoint went backward: %v", m.history)
		}
	}

	if m.pid == nil {
		return
	}
	st, err := actors.GetState(ctxtest.Within(time.Minute), m.sys.Root, m.pid, actors.IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, m.checkpoints(), st.Checkpoints, "checkpoints")
	require.Equal(t, m.minimum().id(), st.Minimum, "minimum")
	require.Equal(t, len(m.vcs), st.VChannels)
	require.Equal(t, modelPChannel, st.PChannel)
	require.Equal(t, wal.Kafka, st.WALName)
	require.Equal(t, m.ps != psNone, st.Recovered, "recovered")
	require.Equal(t, m.start.id(), st.StartMessageID, "start message ID")
	require.Equal(t, m.floor.id(), st.Persisted, "persisted")
	require.Equal(t, inFlight > 0, st.SaveInFlight, "save in flight")
}

func isStopped(ev messages.Event) bool {
	_, ok := ev.(*messages.Stopped)
	return ok
}

func kafkaValues(t *rapid.T, ids []wal.MessageID) []int64 {
	var out []int64
	for _, id := range ids {
		k, ok := id.(wal.KafkaID)
		require.True(t, ok, "stored %T", id)
		out = append(out, int64(k))
	}
	return out
}

// callStarted checks a call as it starts.
func (m *model) callStarted(c *call, kind stepKind) {
	t := m.t
	require.Equal(t, m.inc, c.incarnation, "call %s by a stopped incarnation", c)
	switch c.op {
	case faultinject.OpLoad:
		require.Equal(t, psNone, m.ps, "Load %s after recovery", c)
		require.Nil(t, m.preload)
		m.loads++
		switch {
		case m.lastLoad == nil:
		case kind == stepGraceful:
			// A graceful stop reads at once, then retries on the backoff
			// until its flush timeout.
			require.False(t, c.start.Before(m.lastLoad.end), "recovery read %s before the previous one ended", c)
		default:
			require.Equal(t, m.lastLoad.end.Add(m.lastLoadRetry), c.start, "recovery retry %d: not NextRetry after the failure", m.loads)
		}
	case faultinject.OpSave:
		require.Equal(t, psUp, m.ps, "save %s with no persister up", c)
		v := optOf(c.value)
		require.Equal(t, m.target, v, "save %s is not the latest target: a retry saves the latest minimum", c)
		require.True(t, m.floor.less(v), "save %s not above persisted %s: the stored checkpoint went backward", c, m.floor)
		require.True(t, m.minima[v.v], "I1: save %s was never a minimum of this incarnation (%v)", c, m.minima)
		m.attempts++
		if m.lastSave == nil {
			break
		}
		switch {
		case kind == stepGraceful:
			// A graceful stop cuts any wait short.
			require.False(t, c.start.Before(m.lastSave.end), "save %s before the previous one ended", c)
		case m.lastSaveRetry > 0 && m.void:
			require.False(t, c.start.Before(m.lastSave.end.Add(m.lastSaveRetry)),
				"retry %s: sooner than NextRetry %v after the failure at %v", c, m.lastSaveRetry, m.lastSave.end.UnixMilli())
		case m.lastSaveRetry > 0:
			require.Equal(t, m.lastSave.end.Add(m.lastSaveRetry), c.start,
				"retry %s: not NextRetry %v after the failure at %v", c, m.lastSaveRetry, m.lastSave.end.UnixMilli())
		case m.lastSaveOK && m.cfg.minInterval > 0:
			require.False(t, c.start.Before(m.lastSave.end.Add(m.cfg.minInterval)), "save %s within the min save interval", c)
		}
	}
}

// callEnded predicts a call's outcome from its fault and the store, and
// checks the events it caused. last says it is the step's last call.
func (m *model) callEnded(c *call, kind stepKind, last bool) {
	t := m.t
	got := classify(c)
	stopping := kind == stepGraceful || kind == stepHard
	canceled := got == oCanceled && (kind == stepGraceful || kind == stepHard)
	if canceled {
		// A stop cancelled it: a latency or a hang that had not ended, or
		// any call that started at the very instant the flush gave up (in
		// the bubble's fake time, the retry timer and the flush deadline
		// can fire together, in either order).
		atDeadline := kind == stepGraceful && !c.start.Before(m.flushDeadline)
		if !atDeadline {
			require.Contains(t, []faultKind{fLatency, fHang}, c.fault.kind, "cancelled call %s", c)
		}
		return
	}
	var want outcome
	commit := false
	switch c.fault.kind {
	case fDown, fError:
		want = oInjected
	case fLostReply:
		want, commit = oInjected, c.op == faultinject.OpSave
	case fHang:
		want = oDeadline
	case fPanic:
		want = oPanic
	case fStoredAhead:
		want = oStoredAhead
	case fStubborn:
		want = oInjected
	default:
		want, commit = oOK, c.op == faultinject.OpSave
	}
	if c.op == faultinject.OpSave && commit {
		v := optOf(c.value)
		if v.less(m.stored) {
			commit = false
			if want == oOK {
				want = oStoredAhead
			}
		}
		if commit {
			m.stored = v
			m.history = append(m.history, v.v)
		}
	}
	require.Equal(t, want, got, "call %s with fault %s", c, c.fault)
	if got != oOK && got != oStoredAhead {
		// The retry finds nothing to do if the target was replaced, while
		// this call was in flight, by one at or below the floor.
		m.lastFailure, m.void = c.end, c.op == faultinject.OpSave && !m.floor.less(m.target)
	}
	if stopping && last && (len(m.life) == 0 || isStopped(m.life[0])) {
		// The call ended as the stop completed (the flush timed out at the
		// same instant): its result reached no actor, and nothing tells
		// of it but the store.
		return
	}

	b := m.cfg.backoff
	inRange := func(d time.Duration) error {
		if d < b.Initial || d > b.Max {
			return fmt.Errorf("next retry %v outside [%v, %v]", d, b.Initial, b.Max)
		}
		return nil
	}

	if c.op == faultinject.OpLoad {
		if got == oOK {
			require.Equal(t, m.stored.id(), c.loaded, "Load returned")
			m.recovered(m.stored, m.loads)
			m.lastLoad = nil
			return
		}
		attempt := m.loads
		ev := m.expectLife(fmt.Sprintf("RecoveryFailed(#%d)", attempt), func(ev messages.Event) error {
			e, ok := ev.(*messages.RecoveryFailed)
			if !ok || e.Attempt != attempt || e.Err == nil {
				return errMismatch
			}
			return inRange(e.NextRetry)
		})
		m.lastLoad, m.lastLoadRetry = c, ev.(*messages.RecoveryFailed).NextRetry
		return
	}

	v, attempts := c.value, m.attempts
	m.lastSave, m.lastSaveRetry, m.lastSaveOK = c, 0, false
	switch {
	case got == oOK:
		m.expectLife(fmt.Sprintf("CheckpointPersisted(%s, attempts=%d)", v, attempts), func(ev messages.Event) error {
			e, ok := ev.(*messages.CheckpointPersisted)
			if !ok || e.Value != v || e.Attempts != attempts {
				return errMismatch
			}
			return nil
		})
		// I2: acknowledged values rise strictly, across restarts too.
		require.True(t, m.lastAck.less(optOf(v)), "I2: acknowledged %s after %s", v, m.lastAck)
		m.lastAck = optOf(v)
		m.floor, m.attempts, m.lastSaveOK = optOf(v), 0, true
		m.floors[m.floor.v] = true
	case got == oStoredAhead:
		var sa *persistence.StoredAheadError
		require.ErrorAs(t, c.err, &sa)
		if c.fault.kind == fStoredAhead {
			require.Equal(t, c.fault.stored, sa.Stored)
		} else {
			require.Equal(t, m.stored.id(), sa.Stored)
		}
		// A report that does not reach the value saved proves nothing (a
		// racing store's may be stale): the value is tried again, at once
		// after its first attempt, on the backoff after a later one, and
		// its attempts go on.
		stale := optOf(sa.Stored).less(optOf(v))
		if stale && attempts > 1 {
			ev := m.expectLife(fmt.Sprintf("PersistFailed(%s, #%d, stale stored ahead)", v, attempts), func(ev messages.Event) error {
				e, ok := ev.(*messages.PersistFailed)
				if !ok || e.Value != v || e.Attempt != attempts || !errors.Is(e.Err, persistence.ErrStoredAhead) {
					return errMismatch
				}
				return inRange(e.NextRetry)
			})
			m.lastSaveRetry = ev.(*messages.PersistFailed).NextRetry
			m.lastFailure, m.void = c.end, !m.floor.less(m.target)
			m.crashed(c, kind)
			break
		}
		m.expectLife(fmt.Sprintf("PersistFailed(%s, stored ahead)", v), func(ev messages.Event) error {
			e, ok := ev.(*messages.PersistFailed)
			if !ok || e.Value != v || e.Attempt != attempts || e.NextRetry != 0 || !errors.Is(e.Err, persistence.ErrStoredAhead) {
				return errMismatch
			}
			return nil
		})
		if !stale {
			m.floor, m.attempts = maxOpt(m.floor, optOf(sa.Stored)), 0
			m.floors[m.floor.v] = true
		}
		m.crashed(c, kind)
	default:
		// A failed save, a catalog's panic included: retried after the
		// backoff.
		ev := m.expectLife(fmt.Sprintf("PersistFailed(%s, #%d)", v, attempts), func(ev messages.Event) error {
			e, ok := ev.(*messages.PersistFailed)
			if !ok || e.Value != v || e.Attempt != attempts || e.Err == nil {
				return errMismatch
			}
			if got == oPanic && !strings.Contains(e.Err.Error(), "panicked") {
				return fmt.Errorf("error %v does not tell of the panic", e.Err)
			}
			return inRange(e.NextRetry)
		})
		m.lastSaveRetry = ev.(*messages.PersistFailed).NextRetry
		m.crashed(c, kind)
	}
}

// crashed is the persister crashing, if armed, on the "save failed" line
// that follows a PersistFailed: its supervisor restarts it after the
// restart delay (at once if a graceful stop needs it), from its floor and
// the current minimum. During a graceful stop's flush the parent, which
// waits inside its Stopping handler, learns of the crash from the
// persister itself, restarts it at once and asks for the flush again.
func (m *model) crashed(c *call, kind stepKind) {
	if !m.crashArmed {
		return
	}
	m.crashArmed = false
	m.crashes = append(m.crashes, c.end)
	restarts := len(m.crashes)
	m.expectLife(fmt.Sprintf("PersisterRestarted(#%d)", restarts), func(ev messages.Event) error {
		if e, ok := ev.(*messages.PersisterRestarted); !ok || e.Restarts != restarts {
			return errMismatch
		}
		return nil
	})
	m.ps, m.restartAt = psDown, c.end.Add(restartDelay(m.cfg.backoff, m.crashes, c.end))
	m.lastSave = nil
	if kind == stepGraceful {
		// The flush restarts it at once, and asks again. (A second crash
		// in one flush, which would wait out the delay, cannot happen
		// here: a crash is armed once, and no action runs in a stop.)
		m.restartAt = c.end
	}
}
