package actors

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A context that ended as the reply came completed a protoactor future a
// second time, beside the reply, and a future's completion writes its
// result unguarded: a data race (-race), on every request whose context
// could be cancelled. Each request gets its answer or its context's
// error, and leaves no address behind.
func TestRequestCancelledAsTheReplyComes(t *testing.T) {
	system := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(time.Millisecond))
	recovered := make(chan struct{}, 1)
	sub := system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Recovered); ok {
			recovered <- struct{}{}
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(1)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	defer func() { require.NoError(t, system.Root.PoisonFuture(pid).Wait()) }()
	// The persister is spawned as recovery ends, in the handler that
	// publishes Recovered: a request answered after it counts it.
	select {
	case <-recovered:
	case <-time.After(10 * time.Second):
		t.Fatal("no Recovered within 10 s")
	}
	_, err = GetState(ctx10s(t), system.Root, pid)
	require.NoError(t, err)
	processes := processCount(system)

	answered := 0
	for range 2000 {
		ctx, cancel := context.WithCancel(context.Background())
		go cancel()
		st, err := GetState(ctx, system.Root, pid)
		switch {
		case err == nil:
			require.Equal(t, wal.KafkaID(1), st.Minimum)
			answered++
		default:
			require.ErrorIs(t, err, context.Canceled)
		}
	}
	t.Logf("%d of 2000 answered before their context ended", answered)
	require.Equal(t, processes, processCount(system), "no reply address is left")
}

// A request to a stopped pchannel is a dead letter; one unanswered within
// its deadline is the context's.
func TestRequestDeadLetterAndDeadline(t *testing.T) {
	system := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(time.Millisecond))
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory())
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	require.NoError(t, system.Root.StopFuture(pid).Wait())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: wal.KafkaID(2)})
	require.ErrorIs(t, err, actor.ErrDeadLetter)
	require.Contains(t, err.Error(), `"`+pid.Id+`"`, "the error names the pchannel's actor")
	// A nil StateOption is refused with a typed error, not a panic in the
	// caller, and nothing is sent: no dead letter.
	_, err = GetState(ctx, system.Root, pid, IncludeCheckpoints(), nil)
	require.ErrorIs(t, err, ErrInvalidOption)
	require.NotErrorIs(t, err, actor.ErrDeadLetter)

	silent := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	defer func() { require.NoError(t, system.Root.StopFuture(silent).Wait()) }()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = GetState(ctx, system.Root, silent)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

// processCount counts the processes an actor system has registered.
func processCount(system *actor.ActorSystem) int {
	n := 0
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += bucket.Count()
	}
	return n
}

// BenchmarkRequestLoop is one caller requesting updates one after the
// other, as a consumer that wants each one's typed error does: each
// request's run gets a worker of its own (pool.GoNow). max-goroutines
// counts the workers it keeps (it started one per request, up to 1,024,
// before the workers waiting took them).
func BenchmarkRequestLoop(b *testing.B) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(0)}))
	require.NoError(b, err)
	pid := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = StartMessageID(ctx, system, pid)
	require.NoError(b, err)
	most := 0
	next := int64(1)
	for b.Loop() {
		if err := Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: wal.KafkaID(next)}); err != nil {
			b.Fatal(err)
		}
		if next++; next%1000 == 0 {
			most = max(most, runtime.NumGoroutine())
		}
	}
	b.ReportMetric(float64(most), "max-goroutines")
}

// A request that comes back a dead letter names the pchannel while it is
// stopping, and once it is gone, when only its actor's id is known, says
// how to give the actor an id of one's own. Both said only the actor's
// id, "$1" for a pchannel spawned unnamed.
func TestADeadLetterNamesThePChannelWhileItStops(t *testing.T) {
	cat := &firstSaveHeld{Memory: persistence.NewMemory(), let: make(chan struct{})}
	system := quietSystem(t)
	props, err := NewProps("orders-7", wal.Kafka, cat, WithStopFlushTimeout(time.Minute),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	// The save of kafka:7 is held: the flush waits for it.
	// Asked once the flush waits, which refuses requests at once.
	poisoned := system.Root.PoisonFuture(pid)
	l := directoryOf(system).lookup(system, pid)
	require.NotNil(t, l)
	require.Eventually(t, func() bool { return l.mailbox.cut.Load() != nil }, 10*time.Second, time.Millisecond,
		"the flush never began")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = GetState(ctx, system.Root, pid)
	require.ErrorIs(t, err, actor.ErrDeadLetter)
	require.ErrorContains(t, err, fmt.Sprintf(`pchannel "orders-7" (actor %q) is stopping`, pid.Id))

	close(cat.let)
	require.NoError(t, poisoned.Wait())
	_, err = GetState(ctx, system.Root, pid)
	require.ErrorIs(t, err, actor.ErrDeadLetter)
	require.ErrorContains(t, err, fmt.Sprintf(`pchannel actor %q is stopping or gone (its pchannel is not known once it stopped; SpawnNamed`, pid.Id))
}

// An actor of the user's that asks with ctx.Request is answered in its
// mailbox: *messages.Applied for a command applied in full, naming it,
// where a future is answered nil, and the error for a rejection. A nil
// reply sent there never reached it: protoactor's default mailbox counted
// the nil, found nothing to hand on, and spun a core on it for good.
func TestAnActorThatRequestsIsAnsweredApplied(t *testing.T) {
	system := quietSystem(t)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	_, err = StartMessageID(ctx10s(t), system, pid)
	require.NoError(t, err)

	replies := make(chan any, 8)
	requester := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case messages.Command:
			c.Request(pid, m)
		case *messages.Applied, error:
			replies <- m
		}
	}))
	t.Cleanup(func() { _ = system.Root.StopFuture(requester).Wait() })
	reply := func(cmd messages.Command) any {
		t.Helper()
		system.Root.Send(requester, cmd)
		select {
		case r := <-replies:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no reply to %T within 10 s", cmd)
			return nil
		}
	}

	update := &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}
	// Below the minimum: answered once the persister holds the fall.
	add := &messages.AddVChannel{VChannel: "b", Checkpoint: wal.KafkaID(20)}
	batch := &messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{{VChannel: "a", Checkpoint: wal.KafkaID(40)}, {VChannel: "b", Checkpoint: wal.KafkaID(25)}}}
	drop := &messages.DropVChannel{VChannel: "b"}
	for _, cmd := range []messages.Command{update, add, batch, drop} {
		r := reply(cmd)
		applied, ok := r.(*messages.Applied)
		require.Truef(t, ok, "%T answered %T %[2]v", cmd, r)
		require.Same(t, cmd, applied.Command)
	}
	rollback := reply(&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(1)})
	require.ErrorIs(t, rollback.(error), messages.ErrCheckpointRollback)
	// A future is still answered nil.
	res, err := system.Root.RequestFuture(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(50)}, 10*time.Second).Result()
	require.NoError(t, err)
	require.Nil(t, res)
}

// An actor in between that asks with ctx.Request, and hands the answer
// on to whoever asked it, hands on *messages.Applied: Request and a
// Sender take it as they take nil.
func TestARelayedAppliedIsASuccess(t *testing.T) {
	system := quietSystem(t)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	var asking []*actor.PID // the relay's own: one request at a time
	relay := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case messages.Command:
			asking = append(asking, c.Sender())
			c.Request(pid, m)
		case *messages.Applied, error:
			c.Send(asking[0], m)
			asking = asking[1:]
		}
	}))
	t.Cleanup(func() { _ = system.Root.StopFuture(relay).Wait() })

	require.NoError(t, Request(ctx10s(t), system.Root, relay, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}))
	s, err := NewSender(system, relay)
	require.NoError(t, err)
	require.NoError(t, s.Update("a", wal.KafkaID(30)))
	require.NoError(t, s.Flush(ctx10s(t)))
	require.NoError(t, s.Close(ctx10s(t)))
	st, err := GetState(ctx10s(t), system.Root, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(30), st.Minimum)
}
