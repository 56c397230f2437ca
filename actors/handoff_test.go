package actors

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// hangingSaves is a catalog whose saves wait for release (or their
// context): a fault on purpose.
type hangingSaves struct {
	persistence.Catalog
	entered chan struct{}
	release chan struct{}
}

func (c *hangingSaves) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	c.entered <- struct{}{}
	select {
	case <-c.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return c.Catalog.Save(ctx, pchannel, v)
}

// TestNoMailboxWaitsForASave: a save runs on the goroutine that ran the
// persister's handler, and the rise reached the persister on the
// pchannel's goroutine; while the save hangs, both mailboxes go on (on
// other goroutines): commands, GetState and a stop are answered.
func TestNoMailboxWaitsForASave(t *testing.T) {
	cat := &hangingSaves{Catalog: persistence.NewMemory(), entered: make(chan struct{}, 16), release: make(chan struct{})}
	defer close(cat.release)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer sys.Shutdown()
	props, err := NewProps("p", wal.Kafka, cat, WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}),
		WithSaveTimeout(time.Minute), WithLogger(zap.NewNop()))
	require.NoError(t, err)
	pid := sys.Root.Spawn(props)

	select {
	case <-cat.entered: // the first save (the minimum at spawn) hangs
	case <-time.After(5 * time.Second):
		t.Fatal("no save started")
	}
	for k := 2; k <= 4; k++ {
		require.NoError(t, Request(ctxtest.Within(5*time.Second), sys.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(k)}))
	}
	res, err := sys.Root.RequestFuture(pid, &messages.GetState{}, 5*time.Second).Result()
	require.NoError(t, err)
	st := res.(*messages.State)
	require.Equal(t, wal.KafkaID(4), st.Minimum)
	require.True(t, st.SaveInFlight)
	require.Nil(t, st.Persisted)

	began := time.Now()
	require.NoError(t, sys.Root.StopFuture(pid).Wait())
	require.Less(t, time.Since(began), 5*time.Second)
}

// TestStoppedIsLoggedBeforeItIsPublished: a test that ends on seeing
// Stopped tears its logger down; the actor must be done logging by then.
// (tests/ raced on its zaptest logger when the log came second.)
func TestStoppedIsLoggedBeforeItIsPublished(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer sys.Shutdown()
	loggedFirst := make(chan bool, 1)
	sub := sys.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Stopped); ok {
			loggedFirst <- logs.FilterMessage("stopped").Len() == 1
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithLogger(zap.New(core)))
	require.NoError(t, err)
	pid := sys.Root.Spawn(props)
	require.NoError(t, sys.Root.PoisonFuture(pid).Wait())
	select {
	case first := <-loggedFirst:
		require.True(t, first, "Stopped was published before it was logged")
	case <-time.After(5 * time.Second):
		t.Fatal("no Stopped event")
	}
}

// TestAStopBeforeItsMinimumWasKnownSavedIsAWarning: the next owner replays
// from the checkpoint persisted, which an operator who keeps Warn and
// above must learn; a stop that saved everything stays at Info.
func TestAStopBeforeItsMinimumWasKnownSavedIsAWarning(t *testing.T) {
	cat := &hangingSaves{Catalog: persistence.NewMemory(), entered: make(chan struct{}, 16), release: make(chan struct{})}
	defer close(cat.release)
	core, logs := observer.New(zap.InfoLevel)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer sys.Shutdown()
	props, err := NewProps("p", wal.Kafka, cat, WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}),
		WithSaveTimeout(time.Minute), WithLogger(zap.New(core)))
	require.NoError(t, err)
	pid := sys.Root.Spawn(props)
	select {
	case <-cat.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no save started")
	}
	require.NoError(t, sys.Root.StopFuture(pid).Wait())

	require.Zero(t, logs.FilterMessage("stopped").Len())
	warned := logs.FilterMessage("stopped before its minimum was known saved").All()
	require.Len(t, warned, 1)
	require.Equal(t, zap.WarnLevel, warned[0].Level)
	fields := warned[0].ContextMap()
	require.Equal(t, false, fields["flushed"])
	require.Equal(t, "kafka:1", fields["dropped"])

	clean, err := NewProps("q", wal.Kafka, persistence.NewMemory(), WithLogger(zap.New(core)))
	require.NoError(t, err)
	require.NoError(t, sys.Root.PoisonFuture(sys.Root.Spawn(clean)).Wait())
	stopped := logs.FilterMessage("stopped").All()
	require.Len(t, stopped, 1)
	require.Equal(t, zap.InfoLevel, stopped[0].Level)
	require.Equal(t, true, stopped[0].ContextMap()["flushed"])
}
