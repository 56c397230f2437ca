package tests

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// The README's Quick start, as a new user runs it: spawn with two
// vchannels, one acknowledged update, then a graceful stop at once. The
// stop came before recovery had finished and skipped the flush: in most
// runs the catalog held nothing. Every run must persist the minimum, on a
// real bbolt file, and say so (CheckpointPersisted, Stopped.Flushed).
func TestQuickStartPersistsEveryRun(t *testing.T) {
	const runs = 100
	for run := range runs {
		path := filepath.Join(t.TempDir(), "checkpoints.db")
		catalog, err := persistence.OpenBolt(path)
		require.NoError(t, err)
		system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
		props, err := actors.NewProps("orders-dml-0", wal.Kafka, catalog,
			actors.WithVChannels(map[string]wal.MessageID{"shard-a": wal.KafkaID(100), "shard-b": wal.KafkaID(120)}))
		require.NoError(t, err)
		durable := make(chan wal.MessageID, 4)
		stopped := make(chan *messages.Stopped, 1)
		sub := system.EventStream.Subscribe(func(ev any) {
			switch e := ev.(type) {
			case *messages.CheckpointPersisted:
				durable <- e.Value
			case *messages.Stopped:
				stopped <- e
			}
		})
		pchannel := system.Root.Spawn(props)
		require.NoError(t, actors.Request(ctxtest.Within(
			time.Second), system.Root, pchannel,
			&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(130)}))
		require.NoError(t, system.Root.PoisonFuture(pchannel).Wait())
		system.EventStream.Unsubscribe(sub)
		system.Shutdown()

		s := <-stopped
		require.True(t, s.Flushed, "run %d: %+v", run, s)
		require.NoError(t, s.Reason, "run %d", run)
		require.Equal(t, wal.KafkaID(120), s.LastPersisted, "run %d", run)
		// The spawn minimum 100 may be saved first, when recovery wins the
		// race with the update; the last durable line is the minimum.
		var last wal.MessageID
		for len(durable) > 0 {
			last = <-durable
		}
		require.Equal(t, wal.KafkaID(120), last, "run %d: the last durable: line", run)
		stored, err := catalog.Load(context.Background(), "orders-dml-0")
		require.NoError(t, err)
		require.Equal(t, wal.KafkaID(120), stored, "run %d: the catalog holds the minimum", run)
		require.NoError(t, catalog.Close())
	}
}
