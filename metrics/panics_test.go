package metrics_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A subscriber that panics on an event hides it from every subscriber
// after it, this collector among them if it subscribed later: the saves
// it missed were not counted, and nothing said why unless the actor had
// a logger. The panics are counted by the actor itself, and reach the
// metrics all the same, and the total stays once the pchannel is
// forgotten.
func TestSubscriberPanicsAreCounted(t *testing.T) {
	collector, err := metrics.New()
	require.NoError(t, err)
	reg := registry(t, collector)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	hostile := system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.CheckpointPersisted); ok {
			panic("a subscriber's bug")
		}
	})
	defer system.EventStream.Unsubscribe(hostile)
	sub, err := collector.Subscribe(system.EventStream)
	require.NoError(t, err)
	defer sub.Close()

	mem := persistence.NewMemory()
	props, err := actors.NewProps("p1", wal.Kafka, mem, actors.WithCounters(collector.Counters("p1")),
		actors.WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(7)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), testBound)
	defer cancel()
	stopped, err := actors.Poison(ctx, system, pid)
	require.NoError(t, err)
	require.True(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(7), stopped.LastPersisted) // one save, of 7

	require.Equal(t, 1.0, sample(t, reg, "lowwater_subscriber_panics_total", false, ""))
	require.Equal(t, 0.0, sample(t, reg, "lowwater_saves_total", false, ""), "the collector missed the save")
	collector.Forget("p1")
	require.Equal(t, 1.0, sample(t, reg, "lowwater_subscriber_panics_total", false, ""))
}
