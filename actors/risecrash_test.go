package actors

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// heldID is a test WAL's ID whose comparison with heldMark waits, once
// heldGate is set, until the gate closes: it holds the pchannel inside
// the update that compares it.
type heldID int64

const (
	heldWAL  wal.Name = "held-test"
	heldMark heldID   = 99
)

var heldGate atomic.Pointer[chan struct{}]

func (h heldID) WALName() wal.Name { return heldWAL }
func (h heldID) LT(o wal.MessageID) bool {
	if g := heldGate.Load(); g != nil && (h == heldMark || o.(heldID) == heldMark) && heldGate.CompareAndSwap(g, nil) {
		<-*g
	}
	return h < o.(heldID)
}
func (h heldID) LTE(o wal.MessageID) bool { return !o.LT(h) }
func (h heldID) EQ(o wal.MessageID) bool  { return h == o.(heldID) }
func (h heldID) Marshal() []byte          { return fmt.Appendf(nil, "%d", int64(h)) }
func (h heldID) String() string           { return fmt.Sprintf("%s:%d", heldWAL, int64(h)) }

var registerHeld = sync.OnceValue(func() error { return registerDecimal[heldID](heldWAL) })

// firstSaveHeld holds the first save until let.
type firstSaveHeld struct {
	*persistence.Memory
	once sync.Once
	let  chan struct{}
}

func (c *firstSaveHeld) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	c.once.Do(func() { <-c.let })
	return c.Memory.Save(ctx, pchannel, id)
}

// A crash of the persister that comes while a run of sent updates is
// applied is told after the rises applied before it: the supervisor's
// handler, which protoactor runs apart from Receive, publishes the rise
// due first, as every other handler does. Here the pchannel is held in
// the second update of a run of three, the first having raised the
// minimum, while the persister crashes (a subscriber ends its goroutine on
// its first CheckpointPersisted); the mailbox takes the failure before the
// third.
func TestAPersisterCrashIsToldAfterTheRisesBeforeIt(t *testing.T) {
	require.NoError(t, registerHeld())
	synctest.Test(t, func(t *testing.T) {
		system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())),
			actor.WithDeadLetterThrottleInterval(time.Millisecond))
		cat := &firstSaveHeld{Memory: persistence.NewMemory(), let: make(chan struct{})}
		atGate, gate := make(chan struct{}), make(chan struct{})
		var mu sync.Mutex
		var told []string
		var crashed atomic.Bool
		sub := system.EventStream.Subscribe(func(ev any) {
			switch e := ev.(type) {
			case *messages.VChannelAdded:
				if e.VChannel == "gate" {
					close(atGate)
					<-gate
				}
			case *messages.MinimumAdvanced:
				mu.Lock()
				told = append(told, fmt.Sprintf("advanced %s→%s", e.From, e.To))
				mu.Unlock()
			case *messages.PersisterRestarted:
				mu.Lock()
				told = append(told, "persister restarted")
				mu.Unlock()
			case *messages.CheckpointPersisted:
				if crashed.CompareAndSwap(false, true) {
					runtime.Goexit()
				}
			}
		})
		props, err := NewProps("p", heldWAL, cat, WithSaveTimeout(time.Hour),
			WithVChannels(map[string]wal.MessageID{"a": heldID(1), "b": heldID(2)}))
		require.NoError(t, err)
		pid := system.Root.Spawn(props)
		synctest.Wait() // recovered; the save of held-test:1 held in the catalog

		system.Root.Send(pid, &messages.AddVChannel{VChannel: "gate", Checkpoint: heldID(100)})
		<-atGate
		system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: heldID(3)}) // 1 → 2
		inUpdate := make(chan struct{})
		heldGate.Store(&inUpdate)
		system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "b", Checkpoint: heldMark})  // 2 → 3, held
		system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: heldID(4)}) // 3 → 4
		close(gate)
		synctest.Wait() // the pchannel waits inside the second update
		require.Nil(t, heldGate.Load(), "the second update compares its checkpoint")

		close(cat.let) // the save lands; the persister crashes on telling it
		synctest.Wait()
		close(inUpdate)
		synctest.Wait()

		require.NoError(t, system.Root.PoisonFuture(pid).Wait())
		system.EventStream.Unsubscribe(sub)
		system.Shutdown()
		time.Sleep(3 * poolIdleFor) // the pool's idle workers end, on the bubble's clock

		mu.Lock()
		defer mu.Unlock()
		require.GreaterOrEqual(t, len(told), 3, "%q", told)
		require.Equal(t, []string{"advanced held-test:1→held-test:3", "persister restarted", "advanced held-test:3→held-test:4"}, told[:3])
	})
}
