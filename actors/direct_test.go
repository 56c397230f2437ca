package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// plainActor answers a ping, and would take messages directly (it
// declines them all): it shows whether its mailbox offers it the direct
// path.
type plainActor struct{}

func (plainActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(string); ok {
		ctx.Respond("pong")
	}
}

func (plainActor) receiveDirect(any) bool { return false }

// spawnWithMailbox spawns a plainActor on a mailbox of ours and returns
// the mailbox once the actor has started and answered a ping.
func spawnWithMailbox(t *testing.T, system *actor.ActorSystem, opts ...actor.PropsOption) *mailbox {
	t.Helper()
	var mb *mailbox
	props := actor.PropsFromProducer(func() actor.Actor { return plainActor{} },
		append([]actor.PropsOption{actor.WithMailbox(func() actor.Mailbox { mb = newMailbox(); return mb })}, opts...)...)
	pid := system.Root.Spawn(props)
	_, err := system.Root.RequestFuture(pid, "ping", 10*time.Second).Result()
	require.NoError(t, err)
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	return mb
}

// The direct path for updates is on only where protoactor's dispatch does
// nothing for them. The first case fails should protoactor rename the
// fields plainDispatch reads: the direct path would then be off for good.
func TestMailboxDirectPathOnlyWherePlain(t *testing.T) {
	passThrough := func(next actor.ReceiverFunc) actor.ReceiverFunc { return next }
	decorate := func(next actor.ContextDecoratorFunc) actor.ContextDecoratorFunc { return next }
	for _, tc := range []struct {
		name   string
		system []actor.ConfigOption
		setup  func(*actor.ActorSystem)
		props  []actor.PropsOption
		want   bool
	}{
		{name: "plain", want: true},
		{name: "receiver middleware", props: []actor.PropsOption{actor.WithReceiverMiddleware(passThrough)}},
		{name: "context decorator", props: []actor.PropsOption{actor.WithContextDecorator(decorate)}},
		{name: "metrics provider", system: []actor.ConfigOption{actor.WithMetricProviders(noop.NewMeterProvider())}},
		{name: "metrics registered by hand", setup: func(sys *actor.ActorSystem) {
			sys.Extensions.Register(actor.NewMetrics(sys, noop.NewMeterProvider()))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			system := actor.NewActorSystem(append(tc.system, actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))...)
			t.Cleanup(system.Shutdown)
			if tc.setup != nil {
				tc.setup(system)
			}
			mb := spawnWithMailbox(t, system, tc.props...)
			require.Equal(t, tc.want, mb.direct)
			require.Equal(t, tc.want, mb.inc.direct != nil, "the incarnation as the mailbox knows it")
		})
	}
}

// A receiver middleware added to the Props of NewProps sees every update,
// sent bare or not, and the updates are applied.
func TestMiddlewareSeesEveryUpdate(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	catalog := persistence.NewMemory()
	t.Cleanup(func() { _ = catalog.Close() })
	props, err := NewProps("p", wal.Kafka, catalog, WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(0)}))
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []wal.MessageID
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
			if u, ok := env.Message.(*messages.UpdateCheckpoint); ok {
				mu.Lock()
				seen = append(seen, u.Checkpoint)
				mu.Unlock()
			}
			next(ctx, env)
		}
	}))
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	var want []wal.MessageID
	for k := int64(1); k <= 100; k++ {
		system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: wal.KafkaID(k)})
		want = append(want, wal.KafkaID(k))
	}
	st, err := GetState(ctxtest.Within(10*time.Second), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"v": wal.KafkaID(100)}, st.Checkpoints)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, want, seen)
}

// Once past its Stopping handler an actor declines its direct messages:
// the mailbox then refuses them (closing), as protoactor refuses a
// stopped actor's, rather than the update landing in a pchannel that will
// save nothing more, or a save starting in a persister that is going.
func TestDirectMessagesDeclinedOnceStopping(t *testing.T) {
	cfg, err := newConfig("p", wal.Kafka, persistence.NewMemory(), nil)
	require.NoError(t, err)
	from, err := newSpawn(wal.Kafka, map[string]wal.MessageID{"a": wal.KafkaID(10)})
	require.NoError(t, err)
	p := newPChannel(cfg, from)
	p.tracker = from.take(testPID("p")).tracker // as Started would
	for _, ph := range []phase{stopping, stopped} {
		p.phase = ph
		require.False(t, p.receiveDirect(&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}), "%v", ph)
		require.False(t, p.receiveDirect(mailboxDrained{}), "%v", ph)
		require.Equal(t, wal.KafkaID(10), p.tracker.Minimum(), "%v: an update was applied", ph)
	}

	s, _ := barePersister(t)
	s.over = true
	require.False(t, s.receiveDirect(offer{minimum: wal.KafkaID(5)}))
	require.False(t, s.receiveDirect(&messages.MinimumAdvanced{To: wal.KafkaID(6)}))
	require.Nil(t, s.save, "a save started in a persister that is going")
}
