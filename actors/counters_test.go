package actors

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// Counters count applied updates only, batch entries one by one, and show
// the one save in flight while the catalog holds it.
func TestCounters(t *testing.T) {
	_, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithCounters(nil))
	require.ErrorIs(t, err, ErrInvalidOption)

	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	catalog := faultinject.Wrap(persistence.NewMemory())
	catalog.Script(faultinject.OpSave, faultinject.Hang()) // the first save hangs until cancelled
	var c Counters
	props, err := NewProps("p", wal.Kafka, catalog, WithCounters(&c), WithSaveTimeout(time.Minute),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)

	require.NoError(t, Request(ctxtest.Within(time.Second), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(11)}))
	require.Error(t, Request(ctxtest.Within(time.Second), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(1)}))
	require.Error(t, Request(ctxtest.Within(

		time.Second), system.Root, pid, &messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{
		{VChannel: "a", Checkpoint: wal.KafkaID(12)}, {VChannel: "ghost", Checkpoint: wal.KafkaID(12)}, {VChannel: "b", Checkpoint: wal.KafkaID(21)},
	}}))
	assert.Equal(t, uint64(3), c.Updates(), "1 update and 2 of 3 batch entries")

	require.Eventually(t, func() bool { return c.SavesInFlight() == 1 }, 10*time.Second, time.Millisecond)
	require.NoError(t, system.Root.StopFuture(pid).Wait()) // cancels the hung save and joins it
	assert.Equal(t, int64(0), c.SavesInFlight())
}
