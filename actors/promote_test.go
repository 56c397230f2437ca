package actors

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A request or a stop for a pchannel whose run waits in the pool's queue,
// behind the runs of thousands of busy pchannels, does not wait for them:
// it promotes the run to a worker of its own, and the graceful stop's
// flush promotes the persister's the same way. Here the queue never moves
// (a worker seems on its way, and none comes), so that only a promotion
// runs anything.
func TestUrgentMessagePromotesAQueuedRun(t *testing.T) {
	system := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(time.Millisecond))
	t.Cleanup(system.Shutdown)
	stopped := make(chan *messages.Stopped, 1)
	sub := system.EventStream.Subscribe(func(ev any) {
		if s, ok := ev.(*messages.Stopped); ok {
			stopped <- s
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	cat := persistence.NewMemory()
	props, err := NewProps("p", wal.Kafka, cat, WithStopFlushTimeout(time.Minute),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	require.Eventually(t, func() bool {
		got, err := cat.Load(context.Background(), "p")
		return err == nil && got != nil && got.EQ(wal.KafkaID(10))
	}, 10*time.Second, time.Millisecond, "the first minimum saved")
	// Idle again: a request answered after the save was told.
	_, err = system.Root.RequestFuture(pid, &messages.GetState{}, 10*time.Second).Result()
	require.NoError(t, err)

	p := poolOf(system)
	p.coming.Add(1)
	t.Cleanup(func() {
		// Let the queue move again: what waited there was promoted, and
		// does nothing now.
		p.coming.Add(-1)
		p.mu.Lock()
		p.sendNextLocked()
		requireSettled(t, p)
	})
	system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)})

	got, err := system.Root.RequestFuture(pid, &messages.GetState{}, 5*time.Second).Result()
	require.NoError(t, err, "a request for a queued run waited for the queue")
	require.Equal(t, wal.KafkaID(20), got.(*messages.State).Minimum, "the request comes after the update it was sent after")

	require.NoError(t, system.Root.PoisonFuture(pid).Wait(), "a graceful stop waited for the queue")
	select {
	case s := <-stopped:
		require.True(t, s.Flushed, "the stop flushed the minimum")
		require.NoError(t, s.Reason)
	case <-time.After(10 * time.Second):
		t.Fatal("no Stopped within 10 s")
	}
	saved, err := cat.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(20), saved)
}
