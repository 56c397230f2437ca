package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/lowwater/lowwater/messages"
)

// Request sends cmd to a pchannel and waits up to timeout for its reply:
// nil when applied, the command's typed error when rejected, or the
// future's error (actor.ErrTimeout, actor.ErrDeadLetter) when no reply came.
// It uses RequestFuture because Root.Request sets no sender at the pinned
// protoactor version, and must not be called from inside an actor's Receive
// (wait with ReenterAfter there instead).
func Request(sender actor.SenderContext, pchannel *actor.PID, cmd messages.Command, timeout time.Duration) error {
	res, err := sender.RequestFuture(pchannel, cmd, timeout).Result()
	if err != nil {
		return err
	}
	switch r := res.(type) {
	case nil:
		return nil
	case error:
		return r
	default:
		return fmt.Errorf("lowwater: unexpected reply %T to %T", res, cmd)
	}
}

// GetState asks a pchannel for its state and waits up to timeout.
func GetState(sender actor.SenderContext, pchannel *actor.PID, withVChannels bool, timeout time.Duration) (*messages.State, error) {
	res, err := sender.RequestFuture(pchannel, &messages.GetState{WithVChannels: withVChannels}, timeout).Result()
	if err != nil {
		return nil, err
	}
	s, ok := res.(*messages.State)
	if !ok {
		return nil, fmt.Errorf("lowwater: unexpected reply %T to GetState", res)
	}
	return s, nil
}

// LoggerFactory bridges protoactor's slog logging to l, so that one zap
// logger carries both lowwater's and the actor system's lines:
//
//	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(logger)))
func LoggerFactory(l *zap.Logger) func(*actor.ActorSystem) *slog.Logger {
	return func(system *actor.ActorSystem) *slog.Logger {
		return slog.New(zapslog.NewHandler(l.Core(), zapslog.WithName("protoactor"))).With("system", system.ID)
	}
}
