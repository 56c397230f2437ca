package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// loadsWhenReleased is a catalog whose Load waits until release is closed:
// the pchannel stays in recovery until then.
type loadsWhenReleased struct {
	*persistence.Memory
	release chan struct{}
}

func (c *loadsWhenReleased) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.Memory.Load(ctx, pchannel)
}

// forgeries are protoactor's lifecycle messages, which it hands an actor
// itself and never posts: sent by anyone else (a hostile neighbour, a
// parent actor forwarding what it gets to its children), each is refused.
var forgeries = []any{&actor.Started{}, &actor.Stopping{}, &actor.Stopped{}, &actor.Restarting{}}

// requireRefused asks pid to take msg, and wants ErrUnknownMessage back.
func requireRefused(t *testing.T, system *actor.ActorSystem, pid *actor.PID, msg any) {
	t.Helper()
	reply, err := system.Root.RequestFuture(pid, msg, 5*time.Second).Result()
	require.NoError(t, err, "%T", msg)
	replyErr, _ := reply.(error)
	require.ErrorIs(t, replyErr, messages.ErrUnknownMessage, "%T", msg)
}

// TestForgedLifecycleMessagesAreRefused: taken as real, a Started during
// recovery rebuilt the vchannels from those given at spawn, forgetting
// one added since, whose acknowledged checkpoint was then saved over; a
// Stopped left a pchannel that applied updates and saved none, its
// graceful stop flushing nothing; a Stopping left one that answered no
// request and never stopped.
func TestForgedLifecycleMessagesAreRefused(t *testing.T) {
	cat := &loadsWhenReleased{Memory: persistence.NewMemory(), release: make(chan struct{})}
	system := actor.NewActorSystem()
	defer system.Shutdown()
	sub, err := events.Subscribe(system.EventStream, events.Lossless(), events.ForPChannels("p"))
	require.NoError(t, err)
	defer sub.Close()
	props, err := actors.NewProps("p", wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// In recovery: c is added and acknowledged, then the forgeries come.
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.AddVChannel{VChannel: "c", Checkpoint: wal.KafkaID(5)}))
	for _, f := range forgeries {
		system.Root.Send(pid, f)
		requireRefused(t, system, pid, f)
	}
	close(cat.release)
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}))

	// Running: the forgeries again, then updates.
	for _, f := range forgeries {
		system.Root.Send(pid, f)
		requireRefused(t, system, pid, f)
	}
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "c", Checkpoint: wal.KafkaID(20)}))
	st, err := actors.GetState(ctx, system.Root, pid, actors.IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(30), "c": wal.KafkaID(20)}, st.Checkpoints)
	require.Equal(t, wal.KafkaID(20), st.Minimum)

	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	stored, err := cat.Memory.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(20), stored, "the graceful stop saved the minimum")
	var stopped []*messages.Stopped
	for ev := range eventsUntilStopped(t, sub) {
		if s, ok := ev.(*messages.Stopped); ok {
			stopped = append(stopped, s)
		}
	}
	require.Len(t, stopped, 1)
	require.True(t, stopped[0].Graceful)
	require.True(t, stopped[0].Flushed)
	require.Equal(t, wal.KafkaID(20), stopped[0].LastPersisted)
}

// eventsUntilStopped yields the subscription's events up to the first
// Stopped, and then what is already buffered behind it.
func eventsUntilStopped(t *testing.T, sub *events.Subscription) func(yield func(messages.Event) bool) {
	return func(yield func(messages.Event) bool) {
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev := <-sub.C():
				if !yield(ev) {
					return
				}
				if _, ok := ev.(*messages.Stopped); ok {
					for {
						select {
						case ev := <-sub.C():
							if !yield(ev) {
								return
							}
						default:
							return
						}
					}
				}
			case <-deadline:
				t.Fatal("no Stopped within 10 s")
			}
		}
	}
}

// TestForgedMinimumToThePersisterIsRefused: the persister's name is known
// (PID/persister) and MinimumAdvanced is a public type; taken from anyone,
// it saved a checkpoint far above the minimum, for good.
func TestForgedMinimumToThePersisterIsRefused(t *testing.T) {
	cat := persistence.NewMemory()
	system := actor.NewActorSystem()
	defer system.Shutdown()
	// Preloaded, it recovers in its Started handler: once GetState is
	// answered, the persister is there (a message to it before would be a
	// dead letter, whatever its type).
	props, err := actors.NewProps("p", wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}),
		actors.WithPreloaded(nil))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := actors.GetState(ctx, system.Root, pid)
	require.NoError(t, err)
	require.True(t, st.Recovered)

	persister := actor.NewPID(pid.Address, pid.Id+"/persister")
	forged := &messages.MinimumAdvanced{Header: messages.Header{PChannel: "p"}, To: wal.KafkaID(1 << 40)}
	system.Root.Send(persister, forged)
	requireRefused(t, system, persister, forged)
	for _, f := range forgeries {
		system.Root.Send(persister, f)
		requireRefused(t, system, persister, f)
	}
	// Any other request gets a typed error too, not a timeout.
	requireRefused(t, system, persister, &messages.GetState{})

	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(2)}))
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	stored, err := cat.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(2), stored)
}

// A command sent by value, which compiles since Send takes any, is
// rejected as a bad command is: a CommandRejected naming the pointer to
// send, and nothing changed. Sent with Send, it was dropped without a
// word, no event and no log line.
func TestACommandSentByValueIsRejected(t *testing.T) {
	system, pid, sub, ctx := spawnWatched(t)

	sent := []struct {
		msg  any
		want messages.Command
		hint string
	}{
		{messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)},
			&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}, "&messages.UpdateCheckpoint{…}"},
		{messages.AddVChannel{VChannel: "b", Checkpoint: wal.KafkaID(5)},
			&messages.AddVChannel{VChannel: "b", Checkpoint: wal.KafkaID(5)}, "&messages.AddVChannel{…}"},
		{messages.DropVChannel{VChannel: "a"}, &messages.DropVChannel{VChannel: "a"}, "&messages.DropVChannel{…}"},
		{messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{{VChannel: "a", Checkpoint: wal.KafkaID(40)}}},
			&messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{{VChannel: "a", Checkpoint: wal.KafkaID(40)}}}, "&messages.UpdateBatch{…}"},
	}
	for _, s := range sent {
		system.Root.Send(pid, s.msg)
	}
	// A request by value gets the same error; GetState changes nothing and
	// is not told.
	reply, err := system.Root.RequestFuture(pid, messages.GetState{}, 5*time.Second).Result()
	require.NoError(t, err)
	replyErr, _ := reply.(error)
	require.ErrorIs(t, replyErr, messages.ErrUnknownMessage)
	require.ErrorContains(t, replyErr, "messages.GetState sent by value: send a pointer, &messages.GetState{…}")
	reply, err = system.Root.RequestFuture(pid, messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(50)}, 5*time.Second).Result()
	require.NoError(t, err)
	replyErr, _ = reply.(error)
	require.ErrorIs(t, replyErr, messages.ErrUnknownMessage)

	var rejected []*messages.CommandRejected
	for len(rejected) < len(sent)+1 {
		select {
		case ev := <-sub.C():
			switch ev := ev.(type) {
			case *messages.CommandRejected:
				rejected = append(rejected, ev)
			case *messages.MinimumAdvanced:
				t.Fatalf("the minimum rose to %v", ev.To)
			}
		case <-ctx.Done():
			t.Fatalf("%d CommandRejected within 10 s, want %d", len(rejected), len(sent)+1)
		}
	}
	for i, s := range sent {
		require.Equal(t, s.want, rejected[i].Command, "event %d", i)
		require.ErrorIs(t, rejected[i].Err, messages.ErrUnknownMessage)
		require.ErrorContains(t, rejected[i].Err, "sent by value: send a pointer, "+s.hint)
	}
	state, err := actors.GetState(ctx, system.Root, pid)
	require.NoError(t, err)
	require.Equal(t, 1, state.VChannels)
	require.Equal(t, wal.KafkaID(10), state.Minimum)
}

// A value of another type sent with Send, a mistake nobody is answered
// for, is dropped with a Warn line that names its type; protoactor's own
// messages pass without one.
func TestAForeignMessageIsDroppedWithAWarning(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	system, pid, sub, ctx := spawnWatched(t, actors.WithLogger(zap.New(core)))

	type order struct{ id int }
	system.Root.Send(pid, "advance a to 30")
	system.Root.Send(pid, &order{id: 7})
	system.Root.Send(pid, &messages.CheckpointPersisted{Value: wal.KafkaID(99)})
	system.Root.Send(pid, &actor.ReceiveTimeout{})
	// Answered after the four were handled.
	state, err := actors.GetState(ctx, system.Root, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), state.Minimum)
	require.Equal(t, 1, state.VChannels)

	dropped := logs.FilterMessage("message dropped: a pchannel takes the commands of package messages, each by pointer").All()
	var types []string
	for _, e := range dropped {
		types = append(types, e.ContextMap()["type"].(string))
	}
	require.Equal(t, []string{"string", "*actors_test.order", "*messages.CheckpointPersisted"}, types)
	require.Equal(t, len(dropped), logs.Len(), "no other Warn line")
	// Every event is queued by the time GetState is answered: none tells
	// of the dropped messages.
	for len(sub.C()) > 0 {
		if ev, ok := (<-sub.C()).(*messages.CommandRejected); ok {
			t.Fatalf("a dropped message told as a rejected command: %T", ev.Command)
		}
	}
}

// spawnWatched spawns pchannel "p" with vchannel "a" at 10 on a memory
// catalog, watched from before its spawn, and waits for its recovery;
// ctx bounds what the test waits for after.
func spawnWatched(t *testing.T, opts ...actors.Option) (*actor.ActorSystem, *actor.PID, *events.Subscription, context.Context) {
	t.Helper()
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	sub, err := events.Subscribe(system.EventStream, events.Lossless(), events.ForPChannels("p"))
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	opts = append([]actors.Option{actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)})}, opts...)
	props, err := actors.NewProps("p", wal.Kafka, persistence.NewMemory(), opts...)
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	_, err = actors.StartMessageID(ctx, system, pid)
	require.NoError(t, err)
	return system, pid, sub, ctx
}
