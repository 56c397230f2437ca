package actors_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

var errFirstSave = errors.New("the wrapper fails the first save")

// changesSave embeds a Bolt and changes its Save alone, as a wrapper for
// faults or audit does: the first save fails.
type changesSave struct {
	*persistence.Bolt
	saves atomic.Int32
}

func (c *changesSave) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if c.saves.Add(1) == 1 {
		return errFirstSave
	}
	return c.Bolt.Save(ctx, pchannel, checkpoint)
}

// changesBoth changes StartSave too, and counts the saves it starts.
type changesBoth struct {
	changesSave
	started atomic.Int32
}

func (c *changesBoth) StartSave(ctx context.Context, pchannel string, checkpoint wal.MessageID, done func(error)) error {
	c.started.Add(1)
	return c.Bolt.StartSave(ctx, pchannel, checkpoint, done)
}

// spawnOnWrapper spawns "orders-dml-0" with vchannel v at kafka:7 on
// catalog, and returns the events it publishes and what it logs at Warn.
func spawnOnWrapper(t *testing.T, catalog persistence.Catalog) (<-chan any, *observer.ObservedLogs) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	events := make(chan any, 1024)
	sub := system.EventStream.Subscribe(func(ev any) {
		select {
		case events <- ev:
		default:
		}
	})
	core, logs := observer.New(zapcore.WarnLevel)
	b := actors.DefaultBackoff()
	b.Initial, b.Max = time.Millisecond, 10*time.Millisecond
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, catalog, actors.WithBackoff(b),
		actors.WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(7)}), actors.WithLogger(zap.New(core)))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() {
		require.NoError(t, system.Root.PoisonFuture(pid).Wait())
		system.EventStream.Unsubscribe(sub)
		system.Shutdown()
	})
	return events, logs
}

func openBolt(t *testing.T) *persistence.Bolt {
	t.Helper()
	bolt, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "checkpoints.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bolt.Close()) })
	return bolt
}

// A catalog that embeds a Bolt and changes its Save alone has its Save
// called: its saves used to be started with the Bolt's StartSave, which
// it kept, and never reached its Save. The actor says so at Warn.
func TestAWrapperThatChangesSaveAloneHasItsSaveCalled(t *testing.T) {
	catalog := &changesSave{Bolt: openBolt(t)}
	events, logs := spawnOnWrapper(t, catalog)

	failed := waitFor[*messages.PersistFailed](t, events)
	require.ErrorIs(t, failed.Err, errFirstSave)
	require.Equal(t, 1, failed.Attempt)
	saved := waitFor[*messages.CheckpointPersisted](t, events)
	require.Equal(t, wal.KafkaID(7), saved.Value)
	require.Equal(t, int32(2), catalog.saves.Load())

	warned := logs.FilterMessageSnippet("keeps the StartSave of a catalog it embeds").AllUntimed()
	require.Len(t, warned, 1)
	require.Equal(t, "*actors_test.changesSave", warned[0].ContextMap()["catalog"])
}

// The Warn comes once for each type of such catalog and logger: a
// thousand pchannels on one catalog gave a thousand lines. The later
// spawns say it at Debug; another logger is told again.
func TestASplitCatalogIsWarnedOfOncePerLogger(t *testing.T) {
	catalog := &changesSave{Bolt: openBolt(t)}
	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)
	for _, p := range []string{"p0", "p1", "p2"} {
		_, err := actors.NewProps(p, wal.Kafka, catalog, actors.WithLogger(logger))
		require.NoError(t, err)
	}
	said := logs.FilterMessageSnippet("keeps the StartSave of a catalog it embeds").AllUntimed()
	require.Len(t, said, 3)
	require.Equal(t, []zapcore.Level{zapcore.WarnLevel, zapcore.DebugLevel, zapcore.DebugLevel},
		[]zapcore.Level{said[0].Level, said[1].Level, said[2].Level})
	require.Equal(t, "p0", said[0].ContextMap()["pchannel"])

	other, otherLogs := observer.New(zapcore.WarnLevel)
	_, err := actors.NewProps("p3", wal.Kafka, catalog, actors.WithLogger(zap.New(other)))
	require.NoError(t, err)
	require.Equal(t, 1, otherLogs.FilterMessageSnippet("keeps the StartSave of a catalog it embeds").Len())
}

// One that changes StartSave too has its saves started, and no Warn.
func TestAWrapperThatChangesStartSaveHasItsSavesStarted(t *testing.T) {
	catalog := &changesBoth{changesSave: changesSave{Bolt: openBolt(t)}}
	events, logs := spawnOnWrapper(t, catalog)

	saved := waitFor[*messages.CheckpointPersisted](t, events)
	require.Equal(t, wal.KafkaID(7), saved.Value)
	require.Equal(t, int32(1), catalog.started.Load())
	require.Zero(t, catalog.saves.Load())
	require.Zero(t, logs.Len())
}
