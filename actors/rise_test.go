package actors_test

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// riseRig runs pchannel p (a at 1, b at 2) and can hold its mailbox
// goroutine inside a subscriber, so that what the test sends meanwhile
// queues and is applied as one run.
type riseRig struct {
	t       *testing.T
	system  *actor.ActorSystem
	pid     *actor.PID
	events  chan any
	held    chan struct{}
	release chan struct{}
}

func newRiseRig(t *testing.T) *riseRig {
	r := &riseRig{t: t, events: make(chan any, 256), held: make(chan struct{}), release: make(chan struct{})}
	// Dead letters (the stop of an actor stopped already) are logged by a
	// throttle on a goroutine of its own: 1 ms here, so goleak finds none.
	r.system = actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(time.Millisecond))
	t.Cleanup(r.system.Shutdown)
	r.system.EventStream.Subscribe(func(ev any) {
		if added, ok := ev.(*messages.VChannelAdded); ok && added.VChannel == "gate" {
			close(r.held)
			select {
			case <-r.release:
			case <-time.After(10 * time.Second):
			}
		}
		select {
		case r.events <- ev:
		default:
			t.Error("the test's event buffer is full")
		}
	})
	props, err := actors.NewProps("p", wal.Kafka, persistence.NewMemory(),
		actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1), "b": wal.KafkaID(2)}))
	require.NoError(t, err)
	r.pid = r.system.Root.Spawn(props)
	t.Cleanup(func() { _ = r.system.Root.PoisonFuture(r.pid).Wait() })
	r.next(func(ev any) bool { _, ok := ev.(*messages.Recovered); return ok })
	return r
}

// hold parks the actor's goroutine in the subscriber (an Add of "gate",
// which moves no minimum) until let.
func (r *riseRig) hold() {
	r.system.Root.Send(r.pid, &messages.AddVChannel{VChannel: "gate", Checkpoint: wal.KafkaID(100)})
	select {
	case <-r.held:
	case <-time.After(10 * time.Second):
		r.t.Fatal("the actor never reached the gate")
	}
}

func (r *riseRig) let() { close(r.release) }

func (r *riseRig) update(vchannel string, offset int64) {
	r.system.Root.Send(r.pid, &messages.UpdateCheckpoint{VChannel: vchannel, Checkpoint: wal.KafkaID(offset)})
}

// next returns the next event that match takes, failing after 10 s.
func (r *riseRig) next(match func(any) bool) any {
	r.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-r.events:
			if match(ev) {
				return ev
			}
		case <-deadline:
			r.t.Fatal("no such event within 10 s")
			return nil
		}
	}
}

// minimaUntil returns, in order, the MinimumAdvanced (as "from→to") and
// CommandRejected ("rejected") events, up to the MinimumAdvanced to last.
func (r *riseRig) minimaUntil(last int64) []string {
	r.t.Helper()
	var got []string
	for {
		switch ev := r.next(func(ev any) bool {
			switch ev.(type) {
			case *messages.MinimumAdvanced, *messages.CommandRejected:
				return true
			}
			return false
		}).(type) {
		case *messages.CommandRejected:
			got = append(got, "rejected")
		case *messages.MinimumAdvanced:
			got = append(got, wal.String(ev.From)+"→"+wal.String(ev.To))
			if ev.To.EQ(wal.KafkaID(last)) {
				return got
			}
		}
	}
}

// Updates sent with no reply asked that queue in the mailbox are applied as
// one run, which publishes one MinimumAdvanced, from the minimum before it
// to the minimum after it, and the persister saves that one.
func TestARunOfSentRisesPublishesOneEvent(t *testing.T) {
	r := newRiseRig(t)
	r.hold()
	before := time.Now()
	r.update("a", 3) // minimum 1 → 2
	r.update("b", 4) // → 3
	r.update("a", 5) // → 4
	r.let()
	require.Equal(t, []string{"kafka:1→kafka:4"}, r.minimaUntil(4))

	persisted := r.next(func(ev any) bool {
		p, ok := ev.(*messages.CheckpointPersisted)
		return ok && p.Value.EQ(wal.KafkaID(4))
	}).(*messages.CheckpointPersisted)
	require.NotNil(t, persisted)
	state, err := actors.GetState(t.Context(), r.system.Root, r.pid)
	require.NoError(t, err)
	require.True(t, state.HeldSince.After(before), "HeldSince is the run's first rise, after the gate: %v", state.HeldSince)
}

// Whatever else the actor handles ends the run first: a request is
// answered, and another event published, after the rises before it.
func TestARunOfSentRisesEndsBeforeAnythingElse(t *testing.T) {
	t.Run("a request", func(t *testing.T) {
		r := newRiseRig(t)
		r.hold()
		r.update("a", 3) // minimum 1 → 2
		state := r.system.Root.RequestFuture(r.pid, &messages.GetState{}, 10*time.Second)
		r.update("b", 4) // → 3
		r.update("a", 5) // → 4
		r.let()
		require.Equal(t, []string{"kafka:1→kafka:2", "kafka:2→kafka:4"}, r.minimaUntil(4))
		got, err := state.Result()
		require.NoError(t, err)
		require.True(t, got.(*messages.State).Minimum.EQ(wal.KafkaID(2)), "the state between the runs: %v", got)
	})
	t.Run("a rejection", func(t *testing.T) {
		r := newRiseRig(t)
		r.hold()
		r.update("a", 3) // minimum 1 → 2
		r.update("a", 1) // a rollback
		r.update("b", 4) // → 3
		r.let()
		require.Equal(t, []string{"kafka:1→kafka:2", "rejected", "kafka:2→kafka:3"}, r.minimaUntil(3))
	})
	t.Run("a stop", func(t *testing.T) {
		r := newRiseRig(t)
		r.hold()
		r.update("a", 3) // minimum 1 → 2
		r.update("b", 4) // → 3
		stopped := r.system.Root.PoisonFuture(r.pid)
		r.let()
		require.Equal(t, []string{"kafka:1→kafka:3"}, r.minimaUntil(3))
		require.NoError(t, stopped.Wait())
		ev := r.next(func(ev any) bool { _, ok := ev.(*messages.Stopped); return ok }).(*messages.Stopped)
		require.True(t, ev.Flushed)
		require.True(t, ev.LastPersisted.EQ(wal.KafkaID(3)), "the run's minimum is flushed: %v", ev.LastPersisted)
	})
}
