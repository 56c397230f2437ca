package actors

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lowwater/lowwater/wal"
)

// A panic inside the flush (here a logger hook on the loss's Warn line)
// restarts the actor while its phase is still running, and the
// incarnation that flushed sees no Stopped: its Restarting lets go of the
// flush's reply PID, which no later incarnation knows of.
func TestAFlushThatPanicsLeavesNoReplyPID(t *testing.T) {
	cat := newStubborn(false, true)
	defer cat.unblock()
	system := quietSystem(t)
	owned, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var panicked atomic.Bool
	lg := zap.NewNop().WithOptions(zap.WrapCore(func(zapcore.Core) zapcore.Core {
		return zapcore.RegisterHooks(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.DebugLevel),
			func(e zapcore.Entry) error {
				if strings.HasPrefix(e.Message, "ownership lost") && panicked.CompareAndSwap(false, true) {
					panic("logger hook")
				}
				return nil
			})
	}))
	props, err := NewProps("p", wal.Kafka, cat, WithSaveTimeout(time.Hour), WithStopFlushTimeout(5*time.Second),
		WithOwnership(owned), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}), WithLogger(lg))
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Stopping); ok {
				cancel(errors.New("session ended"))
			}
			next(c, env)
		}
	}))
	pid := system.Root.Spawn(props)
	select {
	case <-cat.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the save never started")
	}
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	require.True(t, panicked.Load())
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			require.False(t, strings.HasPrefix(id, "flush"), "%s is left in the registry", id)
		}
	}
}
