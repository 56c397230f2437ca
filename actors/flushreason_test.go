package actors

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// A graceful stop that could not save the minimum says, in its Reason,
// what the catalog did meanwhile: how the last save failed, or that it
// had not answered the save in flight, overdue or not. A caller of
// Poison reads no PersistFailed, and the bare ErrFlushTimeout could not
// tell a catalog that was down from one that hung.
func TestAFlushTimeoutSaysWhatTheCatalogDid(t *testing.T) {
	const flush = 300 * time.Millisecond
	t.Run("failing", func(t *testing.T) {
		cat := faultinject.Wrap(persistence.NewMemory())
		for range 1000 {
			cat.Script(faultinject.OpSave, faultinject.Error())
		}
		system := quietSystem(t)
		failed := subscribed[*messages.PersistFailed](t, system)
		props, err := NewProps("p", wal.Kafka, cat, WithStopFlushTimeout(flush),
			WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
		require.NoError(t, err)
		pid := system.Root.Spawn(props)
		first := nextOf(t, failed)
		stopped, err := Poison(context.Background(), system, pid)
		require.NoError(t, err)
		require.False(t, stopped.Flushed)
		require.ErrorIs(t, stopped.Reason, messages.ErrFlushTimeout)
		require.ErrorIs(t, stopped.Reason, faultinject.ErrInjected)
		require.EqualError(t, stopped.Reason, messages.ErrFlushTimeout.Error()+": the last save failed: "+first.Err.Error())
	})
	t.Run("overdue", func(t *testing.T) {
		cat := newStubborn(false, true)
		defer cat.unblock()
		system := quietSystem(t)
		failed := subscribed[*messages.PersistFailed](t, system)
		pid := spawnStuck(t, system, cat, WithSaveTimeout(10*time.Millisecond), WithStopFlushTimeout(flush))
		require.ErrorIs(t, nextOf(t, failed).Err, ErrCatalogOverdue)
		stopped, err := Poison(context.Background(), system, pid)
		require.NoError(t, err)
		require.False(t, stopped.Flushed)
		require.ErrorIs(t, stopped.Reason, messages.ErrFlushTimeout)
		require.ErrorIs(t, stopped.Reason, ErrCatalogOverdue)
		require.EqualError(t, stopped.Reason, messages.ErrFlushTimeout.Error()+
			": the catalog had not answered the save in flight, which overran its deadline: "+ErrCatalogOverdue.Error())
	})
}
