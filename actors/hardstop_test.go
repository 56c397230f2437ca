package actors_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// commitsWhenCancelled is a catalog whose Save commits only once its
// context is cancelled, and then reports success, as a store whose commit
// was already on its way does.
type commitsWhenCancelled struct {
	*persistence.Memory
	entered chan struct{}
}

func (c *commitsWhenCancelled) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	close(c.entered)
	<-ctx.Done()
	return c.Memory.Save(context.Background(), pchannel, id)
}

// A hard stop joins the save in flight: when the catalog acknowledged it,
// Stopped reports it persisted, not dropped, and CheckpointPersisted says so.
func TestHardStopCountsAJoinedSave(t *testing.T) {
	cat := &commitsWhenCancelled{Memory: persistence.NewMemory(), entered: make(chan struct{})}
	system := actor.NewActorSystem()
	defer system.Shutdown()
	sub, err := events.Subscribe(system.EventStream, events.Lossless())
	require.NoError(t, err)
	props, err := actors.NewProps("p", wal.Kafka, cat,
		actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	select {
	case <-cat.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no save started")
	}
	require.NoError(t, system.Root.StopFuture(pid).Wait())
	sub.Close()

	var stopped *messages.Stopped
	var persisted []wal.MessageID
	for ev := range sub.C() {
		switch ev := ev.(type) {
		case *messages.Stopped:
			stopped = ev
		case *messages.CheckpointPersisted:
			persisted = append(persisted, ev.Value)
		}
	}
	stored, err := cat.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), stored)
	require.NotNil(t, stopped)
	require.Equal(t, wal.KafkaID(10), stopped.LastPersisted, "the catalog holds it: %+v", stopped)
	require.True(t, stopped.Flushed)
	require.Nil(t, stopped.Dropped)
	require.Equal(t, []wal.MessageID{wal.KafkaID(10)}, persisted)
}

// Request and GetState refuse what cannot be asked, at once and typed.
func TestRequestRefusesNothingToAsk(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	ctx := context.Background()
	pid := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	defer func() { _ = system.Root.StopFuture(pid).Wait() }()
	require.ErrorIs(t, actors.Request(ctx, system.Root, pid, nil), messages.ErrNilCommand)
	require.ErrorIs(t, actors.Request(ctx, system.Root, nil, &messages.DropVChannel{VChannel: "a"}), actors.ErrNoPChannel)
	_, err := actors.GetState(ctx, nil, pid)
	require.ErrorIs(t, err, actors.ErrNoPChannel)
}

// A catalog that panics with an error keeps that error reachable.
func TestCatalogPanicUnwraps(t *testing.T) {
	cause := errors.New("disk on fire")
	var err error = &actors.CatalogPanicError{Op: "Save", Value: cause}
	require.ErrorIs(t, err, actors.ErrCatalogPanicked)
	require.ErrorIs(t, err, cause)
	require.EqualError(t, err, "lowwater: catalog panicked in Save: disk on fire")
	require.ErrorIs(t, &actors.CatalogPanicError{Op: "Load", Value: "boom"}, actors.ErrCatalogPanicked)
}
