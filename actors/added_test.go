package actors_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// A vchannel added below the persisted checkpoint is behind where a
// restart starts: the reference said nothing of it; here the event says
// so, and a warning.
func TestAnAddBelowThePersistedCheckpointIsTold(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(150))
	core, logs := observer.New(zapcore.InfoLevel)
	// At the stored checkpoint: nothing to save, so it stays the persisted one.
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(150)}, actors.WithLogger(zap.New(core)))
	start, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(150), start)

	for _, tc := range []struct {
		vchannel string
		at       wal.MessageID
		below    wal.MessageID
	}{
		{"shard-b", wal.KafkaID(80), wal.KafkaID(150)},
		{"shard-c", wal.KafkaID(150), nil}, // at it: where a restart starts
		{"shard-d", wal.KafkaID(200), nil},
	} {
		require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
			&messages.AddVChannel{VChannel: tc.vchannel, Checkpoint: tc.at}))
		added := waitFor[*messages.VChannelAdded](t, f.events)
		require.Equal(t, tc.vchannel, added.VChannel)
		require.Equal(t, tc.below, added.BelowPersisted, tc.vchannel)
	}
	warned := logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warned, 1)
	require.Equal(t, "vchannel added below the persisted checkpoint: a restart before its checkpoint passes that one starts past its records", warned[0].Message)
	require.Equal(t, map[string]any{"pchannel": "orders-dml-0", "vchannel": "shard-b", "checkpoint": "kafka:80", "persisted": "kafka:150"}, warned[0].ContextMap())
	require.Len(t, logs.FilterMessage("vchannel added").All(), 2)

	// Nothing below the persisted checkpoint is saved: it stays.
	require.NoError(t, f.system.Root.PoisonFuture(pid).Wait())
	stopped := waitFor[*messages.Stopped](t, f.events)
	require.Equal(t, wal.KafkaID(150), stopped.LastPersisted)
}

// During recovery the stored checkpoint is not known yet: nothing is told.
func TestAnAddDuringRecoveryIsNotComparedWithTheStoredCheckpoint(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(150))
	f.catalog.SetDown(true)
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(160)})
	waitFor[*messages.RecoveryFailed](t, f.events)
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.AddVChannel{VChannel: "shard-b", Checkpoint: wal.KafkaID(80)}))
	added := waitFor[*messages.VChannelAdded](t, f.events)
	require.Nil(t, added.BelowPersisted)
}
