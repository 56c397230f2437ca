package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// senderRig is a real actor system with one pchannel on a Memory catalog.
type senderRig struct {
	system   *actor.ActorSystem
	pchannel *actor.PID
	// stopped is set by a test that stops the pchannel itself: a Poison
	// to a stopped actor would be a dead letter, logged on a goroutine
	// that outlives the test.
	stopped bool
}

func newSenderRig(t *testing.T, vchannels map[string]wal.MessageID) *senderRig {
	t.Helper()
	// A reply to a Sender closed before it came is a dead letter, whose
	// throttle outlives its interval on a goroutine of its own.
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	catalog := persistence.NewMemory()
	walName := wal.Kafka
	for _, id := range vchannels {
		walName, _ = wal.NameOf(id)
		break
	}
	props, err := NewProps("p", walName, catalog, WithVChannels(vchannels))
	require.NoError(t, err)
	r := &senderRig{system: system, pchannel: system.Root.Spawn(props)}
	t.Cleanup(func() {
		if !r.stopped {
			_ = system.Root.PoisonFuture(r.pchannel).Wait()
		}
		system.Shutdown()
		_ = catalog.Close()
	})
	return r
}

func (r *senderRig) checkpoints(t *testing.T) map[string]wal.MessageID {
	t.Helper()
	st, err := GetState(ctxtest.Within(10*time.Second), r.system.Root, r.pchannel, IncludeCheckpoints())
	require.NoError(t, err)
	return st.Checkpoints
}

func newTestSender(t *testing.T, system *actor.ActorSystem, pid *actor.PID, opts ...SenderOption) *Sender {
	t.Helper()
	s, err := NewSender(system, pid, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

func ctx10s(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func kafkaAt(n int, id int64) map[string]wal.MessageID {
	m := make(map[string]wal.MessageID, n)
	for i := range n {
		m[fmt.Sprintf("v%d", i)] = wal.KafkaID(id)
	}
	return m
}

// heldSender is a Sender, not closed at the end, whose first update,
// kafka:1 of v0, is in flight and held by a gate at gpid in front of the
// pchannel until the gate is released.
func heldSender(t *testing.T) (r *senderRig, gpid *actor.PID, s *Sender) {
	t.Helper()
	r = newSenderRig(t, kafkaAt(1, 0))
	g := &gate{target: r.pchannel}
	gpid = r.system.Root.Spawn(g.props())
	s, err := NewSender(r.system, gpid)
	require.NoError(t, err)
	require.NoError(t, s.Update("v0", wal.KafkaID(1)))
	return r, gpid, s
}

// gate stands in front of a pchannel and holds the batches it gets until
// released, so that a test decides when the Sender's batch in flight is
// answered. It records the size of every batch.
type gate struct {
	target *actor.PID
	mu     sync.Mutex
	sizes  []int
}

type gateRelease struct{}

func (g *gate) props() *actor.Props {
	var held []func(actor.Context)
	open := false
	return actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.UpdateBatch:
			g.mu.Lock()
			g.sizes = append(g.sizes, len(m.Updates))
			g.mu.Unlock()
			sender := ctx.Sender()
			forward := func(ctx actor.Context) { ctx.RequestWithCustomSender(g.target, m, sender) }
			if open {
				forward(ctx)
				return
			}
			held = append(held, forward)
		case gateRelease:
			open = true
			for _, f := range held {
				f(ctx)
			}
			held = nil
		}
	})
}

func (g *gate) batchSizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.sizes...)
}

func TestSenderAppliesExactLatestValues(t *testing.T) {
	r := newSenderRig(t, kafkaAt(10, 0))
	s := newTestSender(t, r.system, r.pchannel)
	want := kafkaAt(10, 0)
	for k := 1; k <= 500; k++ {
		v := fmt.Sprintf("v%d", k%10)
		require.NoError(t, s.Update(v, wal.KafkaID(k)))
		want[v] = wal.KafkaID(k)
	}
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, want, r.checkpoints(t))
}

func TestSenderReportsActorRejectionsPerFlush(t *testing.T) {
	r := newSenderRig(t, kafkaAt(2, 10))
	s := newTestSender(t, r.system, r.pchannel)

	require.NoError(t, s.Update("nope", wal.KafkaID(1)))
	err := s.Flush(ctx10s(t))
	require.ErrorIs(t, err, messages.ErrVChannelNotFound)
	var be *messages.BatchError
	require.ErrorAs(t, err, &be)
	require.Equal(t, []messages.Rejection{{Index: 0, VChannel: "nope", Err: be.Rejected[0].Err}}, be.Rejected)

	// A rollback below the applied checkpoint is the actor's to judge.
	require.NoError(t, s.Update("v0", wal.KafkaID(5)))
	require.NoError(t, s.Update("v1", wal.KafkaID(20)))
	err = s.Flush(ctx10s(t))
	require.ErrorIs(t, err, messages.ErrCheckpointRollback)
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Rejected, 1)
	require.Equal(t, "v0", be.Rejected[0].VChannel)

	// Errors are returned once.
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(10), "v1": wal.KafkaID(20)}, r.checkpoints(t))
}

// The rejections waiting for a Flush are bounded as the buffer is
// (WithMaxPending): those past the bound are counted, not kept, so that a
// producer that flushes seldom does not grow the Sender without bound.
func TestSenderKeepsAtMostMaxPendingRejections(t *testing.T) {
	r := newSenderRig(t, kafkaAt(1, 10))
	s := newTestSender(t, r.system, r.pchannel, WithMaxPending(2))
	for i := range 5 {
		require.NoError(t, s.Update(fmt.Sprintf("nope-%d", i), wal.KafkaID(1)))
	}
	err := s.Flush(ctx10s(t))
	var be *messages.BatchError
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Rejected, 2)
	for i, rej := range be.Rejected {
		require.Equal(t, i, rej.Index)
		require.ErrorIs(t, rej.Err, messages.ErrVChannelNotFound)
	}
	require.ErrorContains(t, err, "3 more rejection(s) not kept")
	require.NoError(t, s.Flush(ctx10s(t)), "the count is reported once")
}

func TestSenderRejectsLocallyWhatItCanJudge(t *testing.T) {
	r := newSenderRig(t, kafkaAt(2, 0))
	g := &gate{target: r.pchannel}
	gpid := r.system.Root.Spawn(g.props())
	s := newTestSender(t, r.system, gpid)

	require.NoError(t, s.Update("v0", wal.KafkaID(10))) // shipped, held by the gate
	require.NoError(t, s.Update("v0", wal.KafkaID(12))) // waits
	require.ErrorIs(t, s.Update("v0", wal.KafkaID(11)), messages.ErrCheckpointRollback)
	require.ErrorIs(t, s.Update("v0", wal.PulsarID{LedgerID: 99}), messages.ErrWALMismatch)
	require.EqualError(t, s.Update("v0", nil), `lowwater: nil checkpoint: vchannel "v0"`)
	require.ErrorIs(t, s.Update("v0", nil), messages.ErrNilCheckpoint)
	require.ErrorIs(t, s.Update("", wal.KafkaID(1)), messages.ErrEmptyVChannel)
	var typedNil *wal.KafkaID
	require.ErrorIs(t, s.Update("v0", typedNil), messages.ErrWALMismatch)
	// A sentinel is told as one: against the 12 waiting for v0 it would be
	// a rollback, and for v1, where nothing waits, it would be buffered
	// (the batches and checkpoints below show it was not).
	require.ErrorIs(t, s.Update("v0", wal.KafkaID(-1)), messages.ErrSentinel)
	require.EqualError(t, s.Update("v1", wal.KafkaID(-2)), `vchannel "v1": wal: a sentinel, not a position: kafka:-2: `+
		`Kafka's clients read -1 as the end of the log and -2 as its start; give a real offset, 0 for the start`)
	require.NoError(t, s.Update("v0", wal.KafkaID(12))) // equal: accepted

	r.system.Root.Send(gpid, gateRelease{})
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(12), "v1": wal.KafkaID(0)}, r.checkpoints(t))
	require.Equal(t, []int{1, 1}, g.batchSizes())
}

// An ID of a WAL registered outside package wal that does not read back
// is refused by Update, as the actor refuses it: buffered, it replaced
// the good update waiting before it, and was then rejected by the actor,
// which applied neither.
func TestSenderRefusesAnIDThatDoesNotReadBack(t *testing.T) {
	require.NoError(t, registerLossy())
	r := newSenderRig(t, map[string]wal.MessageID{"a": lossyID(5), "b": lossyID(5)})
	g := &gate{target: r.pchannel}
	gpid := r.system.Root.Spawn(g.props())
	s := newTestSender(t, r.system, gpid)

	require.NoError(t, s.Update("a", lossyID(10))) // shipped, held by the gate
	require.NoError(t, s.Update("b", lossyID(12))) // waits
	require.ErrorIs(t, s.Update("b", lossyID(300)), wal.ErrCorruptID)
	require.ErrorIs(t, s.Update("c", lossyID(300)), wal.ErrCorruptID, "nothing waiting for it")

	r.system.Root.Send(gpid, gateRelease{})
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"a": lossyID(10), "b": lossyID(12)}, r.checkpoints(t))
}

func TestSenderBufferIsBounded(t *testing.T) {
	const maxPending = 4
	r := newSenderRig(t, kafkaAt(8, 0))
	g := &gate{target: r.pchannel}
	gpid := r.system.Root.Spawn(g.props())
	s := newTestSender(t, r.system, gpid, WithMaxPending(maxPending), WithFullWait(20*time.Millisecond))

	require.NoError(t, s.Update("v0", wal.KafkaID(1))) // in flight
	for i := 1; i <= maxPending; i++ {
		require.NoError(t, s.Update(fmt.Sprintf("v%d", i), wal.KafkaID(1)))
	}
	start := time.Now()
	err := s.Update("v5", wal.KafkaID(1))
	require.ErrorIs(t, err, ErrSenderFull)
	require.EqualError(t, err, "lowwater: sender buffer full: it holds as many vchannels as WithMaxPending allows (4), and no room was made within 20ms")
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	require.NoError(t, s.Update("v1", wal.KafkaID(2)), "a vchannel already waiting never blocks")

	// A blocked Update goes through once the batch in flight is answered.
	s.cfg.fullWait = 10 * time.Second
	blocked := make(chan error, 1)
	go func() { blocked <- s.Update("v5", wal.KafkaID(1)) }()
	r.system.Root.Send(gpid, gateRelease{})
	select {
	case err := <-blocked:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Update still blocked after the gate opened")
	}
	require.NoError(t, s.Flush(ctx10s(t)))
	for i, n := range g.batchSizes() {
		require.LessOrEqual(t, n, maxPending, "batch %d", i)
	}
	want := kafkaAt(8, 0)
	for i := range 6 {
		want[fmt.Sprintf("v%d", i)] = wal.KafkaID(1)
	}
	want["v1"] = wal.KafkaID(2)
	require.Equal(t, want, r.checkpoints(t))
}

func TestSenderConcurrentProducers(t *testing.T) {
	const producers, perProducer, laps = 8, 16, 200
	r := newSenderRig(t, kafkaAt(producers*perProducer, 0))
	s := newTestSender(t, r.system, r.pchannel, WithMaxPending(32))
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lap := 1; lap <= laps; lap++ {
				for j := range perProducer {
					if err := s.Update(fmt.Sprintf("v%d", p*perProducer+j), wal.KafkaID(lap)); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, kafkaAt(producers*perProducer, laps), r.checkpoints(t))
}

// A Sender ships through system.Root, and so through a sender middleware
// set on it in place (WithSenderMiddleware changes system.Root): tracing
// or metrics there see its batches, as they see Request's.
func TestASenderShipsThroughTheRootsSenderMiddleware(t *testing.T) {
	r := newSenderRig(t, kafkaAt(1, 0))
	var seen atomic.Int32
	r.system.Root.WithSenderMiddleware(func(next actor.SenderFunc) actor.SenderFunc {
		return func(c actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*messages.UpdateBatch); ok {
				seen.Add(1)
			}
			next(c, target, env)
		}
	})
	s := newTestSender(t, r.system, r.pchannel)
	require.NoError(t, s.Update("v0", wal.KafkaID(1)))
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, int32(1), seen.Load(), "batches that went through the middleware")
	require.Equal(t, wal.KafkaID(1), r.checkpoints(t)["v0"])
}

// An actor that is no pchannel and answers a batch with what no pchannel
// sends has the batch named with it at once, as Request names an
// unexpected reply, where Flush waited out its context.
func TestSenderNamesAnUnexpectedReply(t *testing.T) {
	r := newSenderRig(t, kafkaAt(1, 0))
	odd := r.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*messages.UpdateBatch); ok {
			c.Respond("hello")
		}
	}))
	defer func() { require.NoError(t, r.system.Root.StopFuture(odd).Wait()) }()
	s := newTestSender(t, r.system, odd)
	require.NoError(t, s.Update("v0", wal.KafkaID(1)))
	err := s.Flush(ctx10s(t))
	var be *messages.BatchError
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Rejected, 1)
	require.Equal(t, "v0", be.Rejected[0].VChannel)
	require.EqualError(t, be.Rejected[0].Err, "lowwater: unexpected reply string to an UpdateBatch")
}

func TestSenderReportsAStoppedPChannel(t *testing.T) {
	r := newSenderRig(t, kafkaAt(1, 0))
	s := newTestSender(t, r.system, r.pchannel)
	require.NoError(t, s.Update("v0", wal.KafkaID(1)))
	require.NoError(t, s.Flush(ctx10s(t)))
	require.NoError(t, r.system.Root.StopFuture(r.pchannel).Wait())
	r.stopped = true

	_ = s.Update("v0", wal.KafkaID(2)) // may be buffered before the Sender learns
	require.ErrorIs(t, s.Flush(ctx10s(t)), ErrPChannelGone)
	require.ErrorIs(t, s.Update("v0", wal.KafkaID(3)), ErrPChannelGone)
	// Its reply process leaves the registry with the pchannel's
	// Terminated, Close or not: one dropped without Close is not kept.
	require.Eventually(t, func() bool {
		_, registered := r.system.ProcessRegistry.Get(s.replies)
		return !registered
	}, 10*time.Second, time.Millisecond, "the reply process of a Sender whose pchannel stopped is still registered")
	require.ErrorIs(t, s.Close(ctx10s(t)), ErrPChannelGone)
}

// The updates a pchannel's end leaves in the buffer, and in the batch in
// flight, are counted by the first error that says it is gone, and by no
// later one: a caller who adds the counts up counts each update once.
func TestSenderCountsUnappliedUpdatesOnce(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	// It never answers: the first batch stays in flight, and the updates
	// after it wait in the buffer.
	silent := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	s := newTestSender(t, system, silent)
	require.NoError(t, s.Update("a", wal.KafkaID(1)))
	require.NoError(t, s.Update("b", wal.KafkaID(1)))
	require.NoError(t, s.Update("c", wal.KafkaID(1)))
	require.NoError(t, system.Root.StopFuture(silent).Wait())

	first := s.Flush(ctx10s(t))
	require.ErrorIs(t, first, ErrPChannelGone)
	require.Contains(t, first.Error(), "2 buffered update(s) not applied; 1 update(s) sent and not answered, which may or may not be applied")
	for _, err := range []error{s.Update("d", wal.KafkaID(2)), s.Flush(ctx10s(t)), s.Close(ctx10s(t))} {
		require.ErrorIs(t, err, ErrPChannelGone)
		require.NotContains(t, err.Error(), "buffered", "counted again")
		require.NotContains(t, err.Error(), "sent", "counted again")
	}
}

// A batch that comes back as a dead letter was refused by a pchannel that
// had stopped taking messages: its updates were not applied, and the
// error says so, apart from those left in the buffer.
func TestSenderCountsARefusedBatch(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	refusing := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.UpdateBatch); ok {
			ctx.Respond(&actor.DeadLetterResponse{Target: ctx.Self()})
		}
	}))
	defer func() { require.NoError(t, system.Root.PoisonFuture(refusing).Wait()) }()
	s := newTestSender(t, system, refusing)
	require.NoError(t, s.Update("a", wal.KafkaID(1)))

	err := s.Flush(ctx10s(t))
	require.ErrorIs(t, err, ErrPChannelGone)
	require.ErrorIs(t, err, actor.ErrDeadLetter)
	require.ErrorContains(t, err, ": 1 update(s) sent and refused, not applied")
	err = s.Flush(ctx10s(t))
	require.ErrorIs(t, err, ErrPChannelGone)
	require.NotContains(t, err.Error(), "sent", "counted again")
}

// A Close whose context ends as the pchannel stops reports the buffered
// updates once, as never sent or as not applied, whichever came first,
// and the update in flight once.
// An end that came between Close's wait and its report went unreported:
// later calls say ErrSenderClosed, and the updates were counted by none.
func TestSenderCloseRacingThePChannelsEndCountsOnce(t *testing.T) {
	system := quietSystem(t)
	counted := regexp.MustCompile(`(\d+) buffered update\(s\) (not applied|never sent)`)
	inFlight := regexp.MustCompile(`(\d+) update\(s\) sent and (not answered|refused)`)
	jitter := func(rng *rand.Rand) {
		for range rng.IntN(64) {
			runtime.Gosched()
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for it := range 2000 {
		silent := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		s, err := NewSender(system, silent)
		require.NoError(t, err)
		for i := range 5 { // one batch in flight, four buffered
			require.NoError(t, s.Update(fmt.Sprintf("v%d", i), wal.KafkaID(1)))
		}
		ctx, cancel := context.WithCancel(context.Background())
		closed := make(chan error, 1)
		go func() { closed <- s.Close(ctx) }()
		jitter(rng)
		if it%2 == 0 {
			cancel()
			system.Root.Stop(silent)
		} else {
			system.Root.Stop(silent)
			cancel()
		}
		errs := []error{<-closed}
		jitter(rng)
		errs = append(errs, s.Flush(ctx10s(t)), s.Update("v0", wal.KafkaID(2)), s.Close(ctx10s(t)))
		total, mentions, flying := 0, 0, 0
		for _, err := range errs {
			if err == nil {
				continue
			}
			for _, m := range counted.FindAllStringSubmatch(err.Error(), -1) {
				n, _ := strconv.Atoi(m[1])
				total, mentions = total+n, mentions+1
			}
			for _, m := range inFlight.FindAllStringSubmatch(err.Error(), -1) {
				n, _ := strconv.Atoi(m[1])
				flying += n
			}
		}
		require.Equal(t, 1, mentions, "iteration %d: the four buffered updates counted in %d errors: %v", it, mentions, errs)
		require.Equal(t, 4, total, "iteration %d: %v", it, errs)
		require.Equal(t, 1, flying, "iteration %d: the update in flight counted %d times: %v", it, flying, errs)
	}
}

func TestSenderCloseShipsWhatIsPending(t *testing.T) {
	r := newSenderRig(t, kafkaAt(3, 0))
	s, err := NewSender(r.system, r.pchannel)
	require.NoError(t, err)
	for k := 1; k <= 100; k++ {
		require.NoError(t, s.Update(fmt.Sprintf("v%d", k%3), wal.KafkaID(k)))
	}
	require.NoError(t, s.Close(ctx10s(t)))
	require.ErrorIs(t, s.Update("v0", wal.KafkaID(1000)), ErrSenderClosed)
	require.ErrorIs(t, s.Close(ctx10s(t)), ErrSenderClosed)
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(99), "v1": wal.KafkaID(100), "v2": wal.KafkaID(98)}, r.checkpoints(t))
}

func TestSenderFlushHonoursItsContext(t *testing.T) {
	r := newSenderRig(t, kafkaAt(1, 0))
	g := &gate{target: r.pchannel}
	gpid := r.system.Root.Spawn(g.props())
	s := newTestSender(t, r.system, gpid)
	require.NoError(t, s.Update("v0", wal.KafkaID(1)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Flush(ctx), context.DeadlineExceeded)
	r.system.Root.Send(gpid, gateRelease{})
	require.NoError(t, s.Flush(ctx10s(t)))
}

// A Flush or Close whose context has no deadline waits for the actor
// DefaultRequestTimeout at most, as Request does: an actor held up (here
// by a gate that never answers) is not waited for for good.
func TestSenderWaitsBoundedWithoutADeadline(t *testing.T) {
	r, gpid, s := heldSender(t)
	began := time.Now()
	err := s.Flush(context.Background())
	took := time.Since(began)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "no answer within 5s")
	require.GreaterOrEqual(t, took, DefaultRequestTimeout)
	require.Less(t, took, 2*DefaultRequestTimeout)
	require.NoError(t, s.Update("v0", wal.KafkaID(2))) // buffered behind it
	err = s.Close(context.Background())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrUpdatesAbandoned)
	require.ErrorContains(t, err, ErrUpdatesAbandoned.Error()+": 1 buffered update(s) never sent; "+
		"1 update(s) sent and not answered, which may or may not be applied")
	require.NotContains(t, err.Error(), "\n", "one line, for a log line")

	// The late answer is taken quietly, and takes the reply process with
	// it: removed at Close, the answer was a dead letter, logged.
	deadLetters := make(chan any, 8)
	sub := r.system.EventStream.Subscribe(func(ev any) {
		if d, ok := ev.(*actor.DeadLetterEvent); ok {
			deadLetters <- d.Message
		}
	})
	defer r.system.EventStream.Unsubscribe(sub)
	_, registered := r.system.ProcessRegistry.GetLocal(s.replies.Id)
	require.True(t, registered, "removed with its batch in flight")
	r.system.Root.Send(gpid, gateRelease{}) // kafka:1 is applied; kafka:2 never sent
	require.Eventually(t, func() bool { return r.checkpoints(t)["v0"] == wal.KafkaID(1) }, 10*time.Second, time.Millisecond)
	_, registered = r.system.ProcessRegistry.GetLocal(s.replies.Id)
	require.False(t, registered, "still registered after its answer")
	select {
	case m := <-deadLetters:
		t.Fatalf("a dead letter: %#v", m)
	default:
	}
}

func TestNewSenderRejectsInvalidOptions(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	pid := actor.NewPID("nonhost", "nobody")
	for name, tc := range map[string]struct {
		system *actor.ActorSystem
		pid    *actor.PID
		opts   []SenderOption
	}{
		"nil system":        {nil, pid, nil},
		"nil pid":           {system, nil, nil},
		"zero max pending":  {system, pid, []SenderOption{WithMaxPending(0)}},
		"negative wait":     {system, pid, []SenderOption{WithFullWait(-time.Second)}},
		"negative pending ": {system, pid, []SenderOption{WithMaxPending(-1)}},
		"nil option":        {system, pid, []SenderOption{WithMaxPending(4), nil}},
	} {
		s, err := NewSender(tc.system, tc.pid, tc.opts...)
		require.ErrorIs(t, err, ErrInvalidOption, name)
		require.Nil(t, s, name)
	}
}

// deadlinePanics is a context whose Deadline panics, as a broken wrapper's
// might.
type deadlinePanics struct{ context.Context }

func (deadlinePanics) Deadline() (time.Time, bool) { panic("broken context") }

// donePanics is a context whose Done panics.
type donePanics struct{ context.Context }

func (donePanics) Done() <-chan struct{} { panic("broken context") }

// A nil context, or one that panics, given to Flush or Close while a batch
// is in flight changes nothing: the Sender, and the pchannel that answers
// it under the Sender's lock, go on as before. Request and GetState refuse
// a nil one too, sending nothing (v0 is not moved to 9).
func TestSenderRefusesNilContext(t *testing.T) {
	r, gpid, s := heldSender(t)
	var noContext context.Context // nil, as a caller's bug passes it
	require.ErrorIs(t, s.Flush(noContext), ErrNilContext)
	require.ErrorIs(t, s.Close(noContext), ErrNilContext)
	require.ErrorIs(t, Request(noContext, r.system.Root, r.pchannel, &messages.UpdateCheckpoint{VChannel: "v0", Checkpoint: wal.KafkaID(9)}), ErrNilContext)
	_, err := GetState(noContext, r.system.Root, r.pchannel)
	require.ErrorIs(t, err, ErrNilContext)
	require.PanicsWithValue(t, "broken context", func() { _ = s.Flush(deadlinePanics{context.Background()}) })
	require.PanicsWithValue(t, "broken context", func() { _ = s.Close(deadlinePanics{context.Background()}) })
	// Close had marked the Sender closed before it read Done: every call
	// after it failed with ErrSenderClosed, and no Close ever ended.
	require.PanicsWithValue(t, "broken context", func() { _ = s.Flush(donePanics{context.Background()}) })
	require.PanicsWithValue(t, "broken context", func() { _ = s.Close(donePanics{context.Background()}) })

	r.system.Root.Send(gpid, gateRelease{})
	require.NoError(t, s.Update("v0", wal.KafkaID(2)), "still open")
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, wal.KafkaID(2), r.checkpoints(t)["v0"])
	require.NoError(t, s.Close(ctx10s(t)))
	require.ErrorIs(t, s.Flush(ctx10s(t)), ErrSenderClosed)
}

func TestSenderForgetsVChannelsPastItsBound(t *testing.T) {
	const n = senderForgetAfter + 100
	kept := make([]string, n)
	for i := range kept {
		kept[i] = fmt.Sprintf("v%d", i)
	}
	// Kept, the names hit the Sender's index of recent strings, which
	// must not outlive the forgetting; built anew, they never do.
	for _, names := range []struct {
		what string
		name func(i int) string
	}{
		{"kept", func(i int) string { return kept[i] }},
		{"built anew", func(i int) string { return fmt.Sprintf("v%d", i) }},
	} {
		t.Run(names.what, func(t *testing.T) {
			r := newSenderRig(t, kafkaAt(n, 0))
			s := newTestSender(t, r.system, r.pchannel)
			for round := int64(1); round <= 3; round++ {
				for i := range n {
					require.NoError(t, s.Update(names.name(i), wal.KafkaID(round*int64(n)+int64(i))))
				}
				require.NoError(t, s.Flush(ctx10s(t)))
				s.mu.Lock()
				remembered := len(s.entries)
				s.mu.Unlock()
				require.LessOrEqual(t, remembered, senderForgetAfter, "round %d", round)
			}
			want := make(map[string]wal.MessageID, n)
			for i := range n {
				want[fmt.Sprintf("v%d", i)] = wal.KafkaID(3*int64(n) + int64(i))
			}
			require.Equal(t, want, r.checkpoints(t))
		})
	}
}

// A name is its bytes, wherever they are: two strings at one address are
// two names when their lengths differ, and one name at two addresses is
// one vchannel.
func TestSenderCoalescesByNameNotByAddress(t *testing.T) {
	r := newSenderRig(t, kafkaAt(11, 0))
	g := &gate{target: r.pchannel}
	gpid := r.system.Root.Spawn(g.props())
	s := newTestSender(t, r.system, gpid)
	require.NoError(t, s.Update("v0", wal.KafkaID(1))) // in flight, held

	backing := "v10"
	v1, v10 := backing[:2], backing // one address
	require.NoError(t, s.Update(v10, wal.KafkaID(5)))
	require.NoError(t, s.Update(v1, wal.KafkaID(6)))
	require.NoError(t, s.Update(strings.Clone("v10"), wal.KafkaID(7)))
	require.NoError(t, s.Update(v1, wal.KafkaID(8)))
	require.ErrorIs(t, s.Update(strings.Clone("v1"), wal.KafkaID(3)), messages.ErrCheckpointRollback)

	r.system.Root.Send(gpid, gateRelease{})
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, []int{1, 2}, g.batchSizes())
	want := kafkaAt(11, 0)
	want["v0"], want["v1"], want["v10"] = wal.KafkaID(1), wal.KafkaID(8), wal.KafkaID(7)
	require.Equal(t, want, r.checkpoints(t))
}

// A batch with a rejection is held by its CommandRejected event: the
// Sender must not build a later batch in its buffer.
func TestSenderLeavesARejectedBatchToItsEvent(t *testing.T) {
	r := newSenderRig(t, kafkaAt(2, 10))
	rejected := make(chan *messages.UpdateBatch, 1)
	sub := r.system.EventStream.Subscribe(func(ev any) {
		if cr, ok := ev.(*messages.CommandRejected); ok {
			if b, ok := cr.Command.(*messages.UpdateBatch); ok {
				rejected <- b
			}
		}
	})
	t.Cleanup(func() { r.system.EventStream.Unsubscribe(sub) })
	s := newTestSender(t, r.system, r.pchannel)

	require.NoError(t, s.Update("v0", wal.KafkaID(5))) // below 10: rejected
	require.ErrorIs(t, s.Flush(ctx10s(t)), messages.ErrCheckpointRollback)
	var b *messages.UpdateBatch
	select {
	case b = <-rejected:
	case <-time.After(10 * time.Second):
		t.Fatal("no CommandRejected for the batch")
	}
	for k := int64(12); k < 40; k++ {
		require.NoError(t, s.Update("v1", wal.KafkaID(k)))
		require.NoError(t, s.Update("v0", wal.KafkaID(k)))
		require.NoError(t, s.Flush(ctx10s(t)))
	}
	require.Equal(t, []messages.VChannelCheckpoint{
		{VChannel: "v0", Checkpoint: wal.KafkaID(5)},
	}, b.Updates)
}

// batchKeeper keeps every UpdateBatch it is shown, with a copy of it as it
// was then, as a middleware or an actor in between may.
type batchKeeper struct {
	mu     sync.Mutex
	kept   []*messages.UpdateBatch
	copies [][]messages.VChannelCheckpoint
}

func (k *batchKeeper) keep(msg any) {
	if b, ok := msg.(*messages.UpdateBatch); ok {
		k.mu.Lock()
		k.kept = append(k.kept, b)
		k.copies = append(k.copies, slices.Clone(b.Updates))
		k.mu.Unlock()
	}
}

// requireUnchanged checks that every batch kept is as it was delivered.
func (k *batchKeeper) requireUnchanged(t *testing.T) {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	require.GreaterOrEqual(t, len(k.kept), 5)
	for i := range k.kept {
		require.Equal(t, k.copies[i], k.kept[i].Updates, "batch %d changed after delivery", i)
	}
}

// sendRounds updates two vchannels and flushes, five times over; each
// flush returns once the batch went past whoever keeps it.
func sendRounds(t *testing.T, s *Sender) {
	t.Helper()
	for k := int64(1); k <= 5; k++ {
		require.NoError(t, s.Update("v0", wal.KafkaID(k)))
		require.NoError(t, s.Update("v1", wal.KafkaID(k)))
		require.NoError(t, s.Flush(ctx10s(t)))
	}
}

// A shipped batch is its receivers': a receiver middleware that keeps the
// batches it sees finds each as it was sent, rounds later.
func TestSenderNeverChangesADeliveredBatch(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	catalog := persistence.NewMemory()
	t.Cleanup(func() { _ = catalog.Close() })
	props, err := NewProps("p", wal.Kafka, catalog, WithVChannels(kafkaAt(2, 0)))
	require.NoError(t, err)
	var k batchKeeper
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			k.keep(env.Message)
			next(ctx, env)
		}
	}))
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	sendRounds(t, newTestSender(t, system, pid))
	k.requireUnchanged(t)
}

// An actor between a Sender and the pchannel may keep what it forwards: the
// Sender must not build a later batch in a buffer it shipped. A Sender
// straight to the same pchannel comes first, so that the pchannel has one
// it knows to be straight when the forwarded batches come.
func TestSenderNeverChangesABatchAnActorForwarded(t *testing.T) {
	r := newSenderRig(t, kafkaAt(3, 0))
	straight := newTestSender(t, r.system, r.pchannel)
	require.NoError(t, straight.Update("v2", wal.KafkaID(1)))
	require.NoError(t, straight.Flush(ctx10s(t)))
	var k batchKeeper
	proxy := r.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if b, ok := ctx.Message().(*messages.UpdateBatch); ok {
			k.keep(b)
			ctx.RequestWithCustomSender(r.pchannel, b, ctx.Sender())
		}
	}))
	t.Cleanup(func() { _ = r.system.Root.StopFuture(proxy).Wait() })
	sendRounds(t, newTestSender(t, r.system, proxy))
	k.requireUnchanged(t)
}

// Straight to the pchannel, with nothing in between, the Sender takes a
// consumed batch's buffer back: a busy Sender allocates nothing. And a
// request of an UpdateBatch from anyone else is still answered nil.
func TestSenderReusesAConsumedBatch(t *testing.T) {
	r := newSenderRig(t, kafkaAt(2, 0))
	s := newTestSender(t, r.system, r.pchannel)
	require.NoError(t, s.Update("v0", wal.KafkaID(1)))
	require.NoError(t, s.Flush(ctx10s(t)))
	s.mu.Lock()
	spare := cap(s.spare)
	s.mu.Unlock()
	require.Positive(t, spare, "the consumed batch's buffer was not taken back")

	require.NoError(t, Request(ctx10s(t), r.system.Root, r.pchannel,
		&messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{{VChannel: "v1", Checkpoint: wal.KafkaID(1)}}}))
}

func TestSenderFailsEveryCallAfterClose(t *testing.T) {
	r := newSenderRig(t, kafkaAt(1, 0))
	s, err := NewSender(r.system, r.pchannel)
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx10s(t)))
	require.ErrorIs(t, s.Update("v0", wal.KafkaID(1)), ErrSenderClosed)
	require.ErrorIs(t, s.Flush(ctx10s(t)), ErrSenderClosed)
	require.ErrorIs(t, s.Close(ctx10s(t)), ErrSenderClosed)
}

// Close wakes an Update blocked on a full buffer: it returns
// ErrSenderClosed at once, not ErrSenderFull once its wait is up.
func TestSenderCloseWakesABlockedUpdate(t *testing.T) {
	r := newSenderRig(t, kafkaAt(2, 0))
	g := &gate{target: r.pchannel}
	gpid := r.system.Root.Spawn(g.props())
	s, err := NewSender(r.system, gpid, WithMaxPending(1), WithFullWait(time.Minute))
	require.NoError(t, err)
	require.NoError(t, s.Update("v0", wal.KafkaID(1))) // in flight, held by the gate
	require.NoError(t, s.Update("v0", wal.KafkaID(2))) // waits: the buffer is full
	blocked := make(chan error, 1)
	go func() { blocked <- s.Update("v1", wal.KafkaID(1)) }()
	// Blocked once it waits for progress: then nothing but an answer or
	// Close makes it return.
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.progress != nil
	}, 10*time.Second, time.Millisecond)

	closed := make(chan error, 1)
	go func() { closed <- s.Close(ctx10s(t)) }()
	select {
	case err := <-blocked:
		require.ErrorIs(t, err, ErrSenderClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Update still blocked 10 s after Close")
	}
	r.system.Root.Send(gpid, gateRelease{})
	require.NoError(t, <-closed)
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(2), "v1": wal.KafkaID(0)}, r.checkpoints(t))
}

// A Flush still waiting when a Close gives up its own wait (its ctx ended)
// and closes returns ErrSenderClosed: the answer it waits for goes to the
// dead letters once Close has taken the reply process away. It used to
// wait for good.
func TestSenderCloseThatGivesUpEndsAWaitingFlush(t *testing.T) {
	_, _, s := heldSender(t)
	flushed := make(chan error, 1)
	go func() { flushed <- s.Flush(context.Background()) }()
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.progress != nil
	}, 10*time.Second, time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.Close(ctx), context.DeadlineExceeded)
	select {
	case err := <-flushed:
		require.ErrorIs(t, err, ErrSenderClosed)
		require.ErrorContains(t, err, "may or may not be applied")
	case <-time.After(10 * time.Second):
		t.Fatal("Flush still waiting 10 s after Close closed the Sender")
	}
	require.ErrorIs(t, s.Flush(ctx10s(t)), ErrSenderClosed)
}

// After a Close that gave up its wait, an answer that still reaches the
// Sender (a PID caches its process once a reply went through it) ships
// nothing: what was buffered stays unsent, as Close said by failing. And
// what the actor rejected before Close gave up is Close's to report.
func TestSenderClosedShipsNothingMore(t *testing.T) {
	r := newSenderRig(t, kafkaAt(2, 0))
	var hold atomic.Bool
	var held []func(actor.Context)
	gpid := r.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.UpdateBatch:
			sender := ctx.Sender()
			forward := func(ctx actor.Context) { ctx.RequestWithCustomSender(r.pchannel, m, sender) }
			if hold.Load() {
				held = append(held, forward)
				return
			}
			forward(ctx)
		case gateRelease:
			for _, f := range held {
				f(ctx)
			}
			held = nil
		}
	}))
	s, err := NewSender(r.system, gpid)
	require.NoError(t, err)
	require.NoError(t, s.Update("v0", wal.KafkaID(1)))
	require.NoError(t, s.Flush(ctx10s(t)))
	require.NoError(t, s.Update("ghost", wal.KafkaID(1))) // rejected: no such vchannel
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.answered == s.shipped
	}, 10*time.Second, time.Millisecond)
	hold.Store(true)
	require.NoError(t, s.Update("v0", wal.KafkaID(2))) // held by the gate
	require.NoError(t, s.Update("v0", wal.KafkaID(3))) // buffered behind it

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = s.Close(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, messages.ErrVChannelNotFound, "the rejection that came before Close gave up")
	// And it says what it leaves unconfirmed: kafka:3 never sent, kafka:2
	// sent and not answered.
	require.ErrorIs(t, err, ErrUpdatesAbandoned)
	require.ErrorContains(t, err, "1 buffered update(s) never sent")
	require.ErrorContains(t, err, "1 update(s) sent and not answered")

	hold.Store(false)
	r.system.Root.Send(gpid, gateRelease{}) // kafka:2 is applied and answered
	require.Eventually(t, func() bool { return r.checkpoints(t)["v0"] == wal.KafkaID(2) }, 10*time.Second, time.Millisecond)
	// Anything the answer shipped would be ahead of this batch at the
	// gate, and applied once it is answered.
	probe := r.system.Root.RequestFuture(gpid, &messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{
		{VChannel: "v1", Checkpoint: wal.KafkaID(1)}}}, 10*time.Second)
	_, err = probe.Result()
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(2), "v1": wal.KafkaID(1)}, r.checkpoints(t))
}

// A receiver middleware that panics after passing a batch on sends the
// Sender a second answer to it, the panic, once the pchannel has replied
// and the next batch is in flight. It was taken for that batch's answer:
// Flush returned before the pchannel answered the batch, naming as
// rejected an update the pchannel applied. The panic answers the batch
// that had its reply; the Sender leaves it be.
func TestSenderTakesNoSecondAnswerForTheNextBatch(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	catalog := persistence.NewMemory()
	t.Cleanup(func() { _ = catalog.Close() })
	props, err := NewProps("p", wal.Kafka, catalog, WithVChannels(map[string]wal.MessageID{"boom": wal.KafkaID(1), "a": wal.KafkaID(1)}))
	require.NoError(t, err)
	held, release := make(chan struct{}), make(chan struct{})
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			b, ok := env.Message.(*messages.UpdateBatch)
			if !ok || b.Updates[0].VChannel != "boom" {
				next(ctx, env)
				return
			}
			close(held)
			<-release // until the next batch waits in the Sender
			next(ctx, env)
			panic("a middleware's bug, after the reply")
		}
	}))
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	s := newTestSender(t, system, pid)
	require.NoError(t, s.Update("boom", wal.KafkaID(10))) // shipped, held
	<-held
	require.NoError(t, s.Update("a", wal.KafkaID(20))) // waits for its answer
	close(release)
	require.NoError(t, s.Flush(ctx10s(t)))
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"boom": wal.KafkaID(10), "a": wal.KafkaID(20)}, st.Checkpoints)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, s.shipped, s.answered)
}

// Two kept names whose addresses fall in one set of the Sender's index
// are both found there, with no hashing: a caller moving its vchannels in
// turn would otherwise hash each of them on every update, as each evicts
// the other.
func TestSenderFindsTwoKeptNamesOfOneSetWithoutHashing(t *testing.T) {
	r := newSenderRig(t, kafkaAt(16, 0))
	s := newTestSender(t, r.system, r.pchannel)
	// Fourteen names and the two below make 128 places, which the two do
	// not grow: the set each falls in is known before it is added.
	for i := range 14 {
		require.NoError(t, s.Update(fmt.Sprintf("v%d", i), wal.KafkaID(1)))
	}
	s.mu.Lock()
	require.Len(t, s.recent, 128)
	var names []string
	bySet := map[uint]string{}
	for i := 0; names == nil; i++ {
		require.Less(t, i, 1000, "no two names in one set")
		name := strings.Clone([]string{"v14", "v15"}[i%2])
		if other, ok := bySet[s.recentSet(name)]; ok && other != name {
			names = []string{other, name}
		}
		bySet[s.recentSet(name)] = name
	}
	s.mu.Unlock()
	for _, name := range names {
		require.NoError(t, s.Update(name, wal.KafkaID(2)))
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	require.Len(t, s.recent, 128)
	slots := s.slots
	s.slots = map[string]int{} // a look-up that reaches the map misses
	defer func() { s.slots = slots }()
	for _, name := range names {
		i, ok := s.slotOf(name)
		require.True(t, ok, "%s not found in its set", name)
		require.Equal(t, name, s.entries[i].name)
	}
}

// A batch in flight that a Close gave up on, counted in Close's error as
// sent and not answered, is still what the pchannel's end left: a Flush
// that was waiting, should that end reach it before Close's wake-up
// does, hears that an earlier error counted the update, not that the end
// left none.
func TestSenderCountsTheBatchACloseGaveUpOnAsLeft(t *testing.T) {
	r, gpid, s := heldSender(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := s.Close(ctx)
	require.ErrorIs(t, err, ErrUpdatesAbandoned)
	require.ErrorContains(t, err, "1 update(s) sent and not answered")

	require.NoError(t, r.system.Root.StopFuture(gpid).Wait())
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.gone != nil
	}, 10*time.Second, time.Millisecond, "the Sender never heard that its actor stopped")
	s.mu.Lock()
	err = s.goneLocked()
	s.mu.Unlock()
	require.ErrorIs(t, err, ErrPChannelGone)
	require.EqualError(t, err, "lowwater: pchannel actor stopped: 1 update(s) it left unapplied, or not known to be applied, counted in an earlier error")
}

// heldOnRise is a Sender on a pchannel of v0 and v1 at kafka:0, v1 at
// kafka:7 already, whose batch raising v0 to kafka:5 is in flight: a raw
// subscriber holds the pchannel on the rise it makes until release is
// called. What is updated meanwhile waits in the Sender.
func heldOnRise(t *testing.T) (r *senderRig, s *Sender, release func()) {
	t.Helper()
	r = newSenderRig(t, kafkaAt(2, 0))
	held, release := holdOnFirstRise(t, r.system)
	s = newTestSender(t, r.system, r.pchannel)
	require.NoError(t, s.Update("v1", wal.KafkaID(7)))
	require.NoError(t, s.Flush(ctx10s(t)))
	require.NoError(t, s.Update("v0", wal.KafkaID(5)))
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the rise to kafka:5 was not seen within 10 s")
	}
	return r, s, release
}

// An update a Sender still holds when a Drop of its vchannel is sent
// straight to the pchannel is not applied after the Drop: made before
// it, it was shipped after it, and after an Add of the vchannel again, it
// raised the new one to where the old one was (kafka:900 where it was
// added at kafka:10), a checkpoint above the data not yet consumed. An
// update made after the Drop, or of another vchannel, is applied as ever.
func TestAnUpdateMadeBeforeADropNeverReachesTheVChannelAddedAgain(t *testing.T) {
	r, s, release := heldOnRise(t)
	require.NoError(t, s.Update("v0", wal.KafkaID(900))) // waits: a batch is in flight
	require.NoError(t, s.Update("v1", wal.KafkaID(8)))
	r.system.Root.Send(r.pchannel, &messages.DropVChannel{VChannel: "v0"})
	r.system.Root.Send(r.pchannel, &messages.AddVChannel{VChannel: "v0", Checkpoint: wal.KafkaID(10)})
	release()
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(10), "v1": wal.KafkaID(8)}, r.checkpoints(t))
	// The marks are gone with their batch: a batch takes no lock for them.
	require.Eventually(t, func() bool { return !s.drops.any.Load() }, 10*time.Second, time.Millisecond)
	s.drops.mu.Lock()
	require.Empty(t, s.drops.stale)
	require.Empty(t, s.drops.posted)
	s.drops.mu.Unlock()

	// Made after the Drop and the Add: for the new vchannel.
	r2, s2, release2 := heldOnRise(t)
	r2.system.Root.Send(r2.pchannel, &messages.DropVChannel{VChannel: "v0"})
	r2.system.Root.Send(r2.pchannel, &messages.AddVChannel{VChannel: "v0", Checkpoint: wal.KafkaID(10)})
	require.NoError(t, s2.Update("v0", wal.KafkaID(50)))
	release2()
	require.NoError(t, s2.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(50), "v1": wal.KafkaID(7)}, r2.checkpoints(t))
}

// The update a Sender holds is the dropped vchannel's once the Drop is
// sent: one made after it replaces it whatever its value, where without
// the Drop an update below the one held is a rollback, refused at once.
func TestAnUpdateMadeAfterADropReplacesTheOneHeldWhateverItsValue(t *testing.T) {
	_, s, release := heldOnRise(t)
	require.NoError(t, s.Update("v0", wal.KafkaID(600))) // waits: a batch is in flight
	require.ErrorIs(t, s.Update("v0", wal.KafkaID(150)), messages.ErrCheckpointRollback)
	release()
	require.NoError(t, s.Flush(ctx10s(t)))

	r, s, release := heldOnRise(t)
	require.NoError(t, s.Update("v0", wal.KafkaID(600)))
	r.system.Root.Send(r.pchannel, &messages.DropVChannel{VChannel: "v0"})
	r.system.Root.Send(r.pchannel, &messages.AddVChannel{VChannel: "v0", Checkpoint: wal.KafkaID(100)})
	require.NoError(t, s.Update("v0", wal.KafkaID(150)))
	release()
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(150), "v1": wal.KafkaID(7)}, r.checkpoints(t))
}

// holdOnFirstRise holds the pchannel that publishes the system's first
// MinimumAdvanced, in a raw subscriber, until release is called; held is
// closed once it does.
func holdOnFirstRise(t *testing.T, system *actor.ActorSystem) (held <-chan struct{}, release func()) {
	t.Helper()
	h, free := make(chan struct{}), make(chan struct{})
	var once, freed sync.Once
	sub := system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.MinimumAdvanced); ok {
			once.Do(func() {
				close(h)
				<-free
			})
		}
	})
	release = func() { freed.Do(func() { close(free) }) }
	t.Cleanup(func() {
		release()
		system.EventStream.Unsubscribe(sub)
	})
	return h, release
}

// A Drop with no Add after it leaves nothing to reject: the update made
// before it counts as applied to the vchannel it drops, where the batch
// that carried it came back rejected (the vchannel not found).
func TestADropLeavesASenderNothingToReject(t *testing.T) {
	r, s, release := heldOnRise(t)
	require.NoError(t, s.Update("v0", wal.KafkaID(900)))
	r.system.Root.Send(r.pchannel, &messages.DropVChannel{VChannel: "v0"})
	release()
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v1": wal.KafkaID(7)}, r.checkpoints(t))
}

// A Flush or a Close waiting for the batch that holds an update made
// before a Drop gets its answer: the batch is shipped, its update skipped.
func TestAFlushOrCloseWaitingAcrossADropIsAnswered(t *testing.T) {
	for _, end := range []string{"Flush", "Close"} {
		t.Run(end, func(t *testing.T) {
			r, s, release := heldOnRise(t)
			require.NoError(t, s.Update("v0", wal.KafkaID(900))) // waits: kafka:5 is in flight
			done := make(chan error, 1)
			go func() {
				if end == "Flush" {
					done <- s.Flush(ctx10s(t))
				} else {
					done <- s.Close(ctx10s(t))
				}
			}()
			require.Eventually(t, func() bool { // it waits
				s.mu.Lock()
				defer s.mu.Unlock()
				return s.progress != nil
			}, 10*time.Second, time.Millisecond)
			r.system.Root.Send(r.pchannel, &messages.DropVChannel{VChannel: "v0"})
			release()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatalf("%s still waiting 10 s after the Drop", end)
			}
			require.Equal(t, map[string]wal.MessageID{"v1": wal.KafkaID(7)}, r.checkpoints(t))
		})
	}
}

// The update made before a Drop is kept from the vchannel added again
// whatever the batch holding it is doing as the Drop is posted: taken and
// not yet posted, here held by a sender middleware of the system's Root
// while the batch before it is answered and its post not yet returned.
func TestADropOvertakesABatchTakenAndNotYetPosted(t *testing.T) {
	r := newSenderRig(t, kafkaAt(2, 0))
	held, release := holdOnFirstRise(t, r.system)
	firstPosted, firstReturns := make(chan struct{}), make(chan struct{})
	secondTaken, secondPosts := make(chan struct{}), make(chan struct{})
	r.system.Root.WithSenderMiddleware(func(next actor.SenderFunc) actor.SenderFunc {
		return func(c actor.SenderContext, target *actor.PID, env *actor.MessageEnvelope) {
			b, ok := env.Message.(*messages.UpdateBatch)
			if !ok || len(b.Updates) != 1 || b.Updates[0].VChannel != "v0" {
				next(c, target, env)
				return
			}
			switch b.Updates[0].Checkpoint {
			case wal.KafkaID(5): // posted, its goroutine slow to return
				next(c, target, env)
				close(firstPosted)
				<-firstReturns
			case wal.KafkaID(900): // taken, slow to be posted
				close(secondTaken)
				<-secondPosts
				next(c, target, env)
			default:
				next(c, target, env)
			}
		}
	})
	s := newTestSender(t, r.system, r.pchannel)
	require.NoError(t, s.Update("v1", wal.KafkaID(7)))
	require.NoError(t, s.Flush(ctx10s(t)))
	updated := make(chan error, 1)
	go func() { updated <- s.Update("v0", wal.KafkaID(5)) }()
	<-firstPosted
	<-held
	require.NoError(t, s.Update("v0", wal.KafkaID(900))) // made before the Drop
	release()                                            // kafka:5 answered: kafka:900 taken
	<-secondTaken
	close(firstReturns)
	require.NoError(t, <-updated)

	r.system.Root.Send(r.pchannel, &messages.DropVChannel{VChannel: "v0"})
	r.system.Root.Send(r.pchannel, &messages.AddVChannel{VChannel: "v0", Checkpoint: wal.KafkaID(10)})
	close(secondPosts)
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(10), "v1": wal.KafkaID(7)}, r.checkpoints(t))
}

// A Drop that is refused leaves the vchannel, and the update made before
// it is applied, as it would have been: here a receiver middleware of the
// caller's refuses every Drop.
func TestARefusedDropLeavesTheUpdateMadeBeforeIt(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(kafkaAt(2, 0)))
	require.NoError(t, err)
	props = props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*messages.DropVChannel); !ok {
				next(c, env)
			}
		}
	}))
	pid := system.Root.Spawn(props)
	defer func() { _ = system.Root.PoisonFuture(pid).Wait() }()
	held, release := holdOnFirstRise(t, system)
	s, err := NewSender(system, pid)
	require.NoError(t, err)
	defer func() { _ = s.Close(ctx10s(t)) }()
	require.NoError(t, s.Update("v1", wal.KafkaID(7)))
	require.NoError(t, s.Flush(ctx10s(t)))
	require.NoError(t, s.Update("v0", wal.KafkaID(5)))
	<-held
	require.NoError(t, s.Update("v0", wal.KafkaID(6)))
	system.Root.Send(pid, &messages.DropVChannel{VChannel: "v0"})
	release()
	require.NoError(t, s.Flush(ctx10s(t)))
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(6), "v1": wal.KafkaID(7)}, st.Checkpoints)
}

// A Sender made as its pchannel stops reads what the Terminated that
// answers its watch reads, race-free (run under -race).
func TestANewSenderRacesTheStopOfItsPChannel(t *testing.T) {
	for range 100 {
		r := newSenderRig(t, kafkaAt(1, 0))
		r.stopped = true
		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			_ = r.system.Root.StopFuture(r.pchannel).Wait()
		}()
		_, err := NewSender(r.system, r.pchannel)
		require.NoError(t, err)
		<-stopped
	}
}

// A Sender on a PID made anew (actor.NewPID, as a caller who holds only
// the pchannel's name makes one) is the same pchannel's: an update made
// before a Drop sent to it is kept from the vchannel added again.
func TestADropCoversASenderOnAPIDMadeAnew(t *testing.T) {
	r := newSenderRig(t, kafkaAt(2, 0))
	held, release := holdOnFirstRise(t, r.system)
	anew := actor.NewPID(r.pchannel.Address, r.pchannel.Id)
	s := newTestSender(t, r.system, anew)
	require.Nil(t, s.listing)
	require.NoError(t, s.Update("v1", wal.KafkaID(7)))
	require.NoError(t, s.Flush(ctx10s(t)))
	require.NoError(t, s.Update("v0", wal.KafkaID(5)))
	<-held
	require.NoError(t, s.Update("v0", wal.KafkaID(900)))
	r.system.Root.Send(anew, &messages.DropVChannel{VChannel: "v0"})
	r.system.Root.Send(anew, &messages.AddVChannel{VChannel: "v0", Checkpoint: wal.KafkaID(10)})
	release()
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(10), "v1": wal.KafkaID(7)}, r.checkpoints(t))
}

// The same Drop value sent twice, refused once and applied once, gives
// each post its own outcome: the refusal of the first, which marked
// nothing, is not taken for the second's, which marked an update made
// before it.
func TestADropSentTwiceGivesEachPostItsOwnOutcome(t *testing.T) {
	r, s, release := heldOnRise(t) // kafka:5 of v0 in flight, the pchannel held
	d := &messages.DropVChannel{VChannel: "x"}
	r.system.Root.Send(r.pchannel, d) // x unknown: refused, marks nothing
	r.system.Root.Send(r.pchannel, &messages.AddVChannel{VChannel: "x", Checkpoint: wal.KafkaID(10)})
	require.NoError(t, s.Update("x", wal.KafkaID(900))) // made before the second post
	r.system.Root.Send(r.pchannel, d)                   // applied: marks x's kafka:900
	r.system.Root.Send(r.pchannel, &messages.AddVChannel{VChannel: "x", Checkpoint: wal.KafkaID(10)})
	release()
	require.NoError(t, s.Flush(ctx10s(t)))
	require.Equal(t, map[string]wal.MessageID{"v0": wal.KafkaID(5), "v1": wal.KafkaID(7), "x": wal.KafkaID(10)}, r.checkpoints(t))
}
