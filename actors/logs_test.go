package actors

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// An operator who read a warning for each failed save reads one line
// when saving is back, and none after a save that succeeded at once. No
// line carries the logger's own stack, even from a logger that adds one
// at Warn (zap.NewDevelopment's): it put 25 lines of the mailbox loop
// under every failed save.
func TestTheFirstSaveAfterFailuresIsLogged(t *testing.T) {
	cat := faultinject.Wrap(persistence.NewMemory())
	cat.Script(faultinject.OpSave, faultinject.Error())
	cat.Script(faultinject.OpSave, faultinject.Error())
	core, logs := observer.New(zap.DebugLevel)
	system := quietSystem(t)
	persisted := subscribed[*messages.CheckpointPersisted](t, system)
	props, err := NewProps("p", wal.Kafka, cat, WithLogger(zap.New(core, zap.AddStacktrace(zap.WarnLevel))),
		WithBackoff(Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond, Multiplier: 2}),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)

	first := nextOf(t, persisted)
	require.Equal(t, wal.KafkaID(7), first.Value)
	require.Equal(t, 3, first.Attempts)
	failed := logs.FilterMessage("save failed").All()
	require.Len(t, failed, 2)
	for _, l := range failed {
		require.Empty(t, l.Stack)
	}
	again := logs.FilterMessage("saved after failed attempts").All()
	require.Len(t, again, 1)
	fields := again[0].ContextMap()
	require.Equal(t, "kafka:7", fields["checkpoint"])
	require.Equal(t, int64(3), fields["attempts"])
	require.Positive(t, fields["failingFor"])
	require.Empty(t, again[0].Stack)

	system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(9)})
	require.Equal(t, wal.KafkaID(9), nextOf(t, persisted).Value)
	// An add is a Debug line: a service that adds vchannels on every
	// rebalance logged little else at Info.
	system.Root.Send(pid, &messages.AddVChannel{VChannel: "b", Checkpoint: wal.KafkaID(20)})
	_, err = Poison(context.Background(), system, pid)
	require.NoError(t, err)
	require.Len(t, logs.FilterMessage("saved after failed attempts").All(), 1)
	added := logs.FilterMessage("vchannel added").All()
	require.Len(t, added, 1)
	require.Equal(t, zap.DebugLevel, added[0].Level)
}

// protoactor logs a command sent to a stopped pchannel as a dead letter,
// through the system's logger: its checkpoint reads as the WAL writes it,
// where zap's JSON of the command wrote a Kafka offset as a bare number.
func TestADeadLetterCommandLogsItsCheckpoint(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	// No throttling within the test's three lines.
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.New(core))),
		actor.WithDeadLetterThrottleCount(10), actor.WithDeadLetterThrottleInterval(time.Millisecond))
	t.Cleanup(system.Shutdown)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	require.NoError(t, system.Root.StopFuture(pid).Wait())

	for _, tc := range []struct {
		cmd  messages.Command
		want map[string]any
	}{
		{&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(400)},
			map[string]any{"vchannel": "a", "checkpoint": "kafka:400"}},
		{&messages.AddVChannel{VChannel: "b", Checkpoint: wal.KafkaID(5)},
			map[string]any{"vchannel": "b", "checkpoint": "kafka:5"}},
		{&messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{{VChannel: "a", Checkpoint: wal.KafkaID(8)}, {VChannel: "b", Checkpoint: wal.KafkaID(9)}}},
			map[string]any{"updates": int64(2), "first": map[string]any{"vchannel": "a", "checkpoint": "kafka:8"}}},
	} {
		logs.TakeAll()
		system.Root.Send(pid, tc.cmd) // logged on this goroutine, as the dead letter is published
		lines := logs.FilterMessage("[DeadLetter]").All()
		require.Len(t, lines, 1, "%T", tc.cmd)
		require.Equal(t, tc.want, lines[0].ContextMap()["message"], "%T", tc.cmd)
	}
}
