package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A command sent by value, which compiles since Send takes any, is
// rejected as a bad command is: a CommandRejected naming the pointer to
// send, and nothing changed. Sent with Send, it was dropped without a
// word, no event and no log line.
func TestACommandSentByValueIsRejected(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	sub, err := events.Subscribe(system.EventStream, events.Lossless(), events.ForPChannels("p"))
	require.NoError(t, err)
	defer sub.Close()
	props, err := actors.NewProps("p", wal.Kafka, persistence.NewMemory(),
		actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = actors.StartMessageID(ctx, system, pid)
	require.NoError(t, err)

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
