package actors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A producer gone wrong that sends bad commands in a loop logs one Warn a
// rejection, and a sampling logger, as the docs advise, caps them: every
// rejection logs the same message, whatever the command and its error,
// so that a sampler counts them as one kind of line. Each is still
// published.
func TestRejectionsLoggedInALoopAreSampled(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	// zap.NewProduction's sampling, over an hour rather than a second, so
	// that a slow machine does not spread the loop over two ticks.
	sampled := zapcore.NewSamplerWithOptions(core, time.Hour, 100, 100)
	system := quietSystem(t)
	rejected := make(chan struct{}, 1000)
	sub := system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.CommandRejected); ok {
			rejected <- struct{}{}
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}), WithLogger(zap.New(sampled)))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })

	for i := range 1000 {
		var cmd any
		switch i % 3 {
		case 0: // a rollback
			cmd = &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(int64(i % 10))}
		case 1: // an unknown vchannel
			cmd = &messages.DropVChannel{VChannel: "ghost"}
		default: // one there already
			cmd = &messages.AddVChannel{VChannel: "a", Checkpoint: wal.KafkaID(10)}
		}
		system.Root.Send(pid, cmd)
	}
	// Answered after the 1,000 were handled, their events published and
	// their lines logged.
	_, err = system.Root.RequestFuture(pid, &messages.GetState{}, 30*time.Second).Result()
	require.NoError(t, err)
	require.Len(t, rejected, 1000)
	// The 100 first, then one in 100 of the 900 after.
	require.Equal(t, 109, logs.FilterMessage("command rejected").Len())
	require.Equal(t, 109, logs.Len())
}
