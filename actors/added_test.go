package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
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

// During recovery the stored checkpoint is not known yet: an Add below it
// is told once it is read, by Recovered, if its vchannel is still below.
func TestAnAddDuringRecoveryIsToldOnceRecovered(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(150))
	f.catalog.SetDown(true)
	core, logs := observer.New(zapcore.InfoLevel)
	// Given at spawn below the stored checkpoint: older news, which it covers.
	pid := f.spawn(t, map[string]wal.MessageID{"spawned": wal.KafkaID(90)}, actors.WithLogger(zap.New(core)))
	waitFor[*messages.RecoveryFailed](t, f.events)
	for _, cmd := range []messages.Command{
		&messages.AddVChannel{VChannel: "below", Checkpoint: wal.KafkaID(80)},
		&messages.AddVChannel{VChannel: "above", Checkpoint: wal.KafkaID(200)},
		&messages.AddVChannel{VChannel: "dropped", Checkpoint: wal.KafkaID(50)},
		&messages.DropVChannel{VChannel: "dropped"},
		&messages.AddVChannel{VChannel: "caught-up", Checkpoint: wal.KafkaID(10)},
		&messages.UpdateCheckpoint{VChannel: "caught-up", Checkpoint: wal.KafkaID(170)},
		&messages.AddVChannel{VChannel: "also-below", Checkpoint: wal.KafkaID(149)},
	} {
		require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid, cmd))
	}
	added := waitFor[*messages.VChannelAdded](t, f.events)
	require.Equal(t, "below", added.VChannel)
	require.Nil(t, added.BelowPersisted, "not known yet")
	f.catalog.SetDown(false)

	recovered := waitFor[*messages.Recovered](t, f.events)
	require.Equal(t, wal.KafkaID(150), recovered.StartMessageID)
	require.Equal(t, []string{"also-below", "below"}, recovered.AddedBelow)
	warned := logs.FilterMessageSnippet("added during recovery").All()
	require.Len(t, warned, 1)
	require.Equal(t, zapcore.WarnLevel, warned[0].Level)
	require.Equal(t, []any{"also-below", "below"}, warned[0].ContextMap()["vchannels"])
}

// Nothing stored: nothing to be below.
func TestAnAddDuringRecoveryWithNothingStoredIsNotTold(t *testing.T) {
	f := newPChannelFixture(t, nil)
	f.catalog.SetDown(true)
	pid := f.spawn(t, map[string]wal.MessageID{"spawned": wal.KafkaID(90)})
	waitFor[*messages.RecoveryFailed](t, f.events)
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.AddVChannel{VChannel: "below", Checkpoint: wal.KafkaID(10)}))
	f.catalog.SetDown(false)
	recovered := waitFor[*messages.Recovered](t, f.events)
	require.Equal(t, wal.KafkaID(90), recovered.StartMessageID)
	require.Nil(t, recovered.AddedBelow)
}

// gatedSaves holds each save until released, after telling it began.
type gatedSaves struct {
	persistence.Catalog
	began   chan wal.MessageID
	release chan struct{}
}

func (g *gatedSaves) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	g.began <- v
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Catalog.Save(ctx, pchannel, v)
}

// A save in flight, computed before an Add below its value, may land: its
// CheckpointPersisted says so, and a warning.
func TestASaveThatLandsAboveAnAddedVChannelIsTold(t *testing.T) {
	mem := persistence.NewMemory()
	require.NoError(t, mem.Save(context.Background(), "orders-dml-0", wal.KafkaID(100)))
	cat := &gatedSaves{Catalog: mem, began: make(chan wal.MessageID, 1), release: make(chan struct{})}
	f := newPChannelFixture(t, nil)
	core, logs := observer.New(zapcore.InfoLevel)
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, cat, actors.WithLogger(zap.New(core)),
		actors.WithVChannels(map[string]wal.MessageID{"shard-a": wal.KafkaID(100)}))
	require.NoError(t, err)
	pid := f.system.Root.Spawn(props)
	t.Cleanup(func() { _ = f.system.Root.StopFuture(pid).Wait() })

	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(150)}))
	select {
	case v := <-cat.began:
		require.Equal(t, wal.KafkaID(150), v)
	case <-time.After(10 * time.Second):
		t.Fatal("no save of kafka:150 began within 10 s")
	}
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.AddVChannel{VChannel: "late", Checkpoint: wal.KafkaID(120)}))
	require.Nil(t, waitFor[*messages.VChannelAdded](t, f.events).BelowPersisted, "100 is persisted, below 120")
	close(cat.release)

	persisted := waitFor[*messages.CheckpointPersisted](t, f.events)
	require.Equal(t, wal.KafkaID(150), persisted.Value)
	require.Equal(t, wal.KafkaID(120), persisted.AboveMinimum)
	warned := logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warned, 1)
	require.Equal(t, map[string]any{"pchannel": "orders-dml-0", "checkpoint": "kafka:150", "minimum": "kafka:120"}, warned[0].ContextMap())

	// Saved without any other vchannel added: nothing to tell.
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.UpdateCheckpoint{VChannel: "late", Checkpoint: wal.KafkaID(200)}))
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(190)}))
	select {
	case <-cat.began:
	case <-time.After(10 * time.Second):
		t.Fatal("no save of kafka:190 began within 10 s")
	}
	persisted = waitFor[*messages.CheckpointPersisted](t, f.events)
	require.Equal(t, wal.KafkaID(190), persisted.Value)
	require.Nil(t, persisted.AboveMinimum)
}
