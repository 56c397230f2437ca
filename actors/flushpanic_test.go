package actors

import (
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A panic inside the flush (here a logger hook on the loss's Warn line)
// restarts the actor while its phase is still running, and the
// incarnation that flushed sees no Stopped: its Restarting lets go of the
// flush's reply PID, which no later incarnation knows of.
func TestAFlushThatPanicsLeavesNoReplyPID(t *testing.T) {
	cat := newStubborn(false, true)
	defer cat.unblock()
	system := quietSystem(t)
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
	pid, _ := ownedUntilItStops(t, system, cat, WithStopFlushTimeout(5*time.Second), WithLogger(lg))
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	require.True(t, panicked.Load())
	require.False(t, registered(system, "flush"), "a flush's reply process is left in the registry")
}
