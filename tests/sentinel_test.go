package tests

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A negative Kafka offset is a sentinel that Kafka's clients read as the
// log's end or start: no way in takes it for a checkpoint. Given at spawn
// or preloaded, NewProps refuses it; in a command, the command is refused
// and changes nothing; stored by someone else, the record is not
// recovered from.
func TestKafkaSentinelIsNoCheckpoint(t *testing.T) {
	for _, opt := range []actors.Option{
		actors.WithVChannels(map[string]wal.MessageID{"a": k(-1)}),
		actors.WithPreloaded(k(-1)), // as LoadAll read it from the catalog
	} {
		_, err := actors.NewProps("p", wal.Kafka, persistence.NewMemory(), opt)
		require.ErrorIs(t, err, actors.ErrInvalidOption)
		require.ErrorIs(t, err, messages.ErrSentinel)
	}

	h := newHarness(t)
	cat := persistence.NewMemory()
	pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	for _, cmd := range []messages.Command{
		&messages.AddVChannel{VChannel: "b", Checkpoint: k(-5)},
		&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: k(-1)},
	} {
		require.ErrorIs(t, h.request(pid, cmd), messages.ErrSentinel)
	}
	state := h.state(pid, true)
	require.Equal(t, view{Minimum: k(10), VChannels: 1, Checkpoints: map[string]wal.MessageID{"a": k(10)}}, trackerView(state))
	h.poison(pid)

	// As an operator's forced repair (lowwater set --force) left it: Save
	// refuses a sentinel.
	stored, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "c.db"))
	require.NoError(t, err)
	defer stored.Close()
	require.ErrorIs(t, stored.Save(context.Background(), pch, k(-1)), wal.ErrSentinel)
	require.NoError(t, stored.Replace(context.Background(), pch, k(-1)))
	from := h.rec.Len()
	pid = h.spawn(wal.Kafka, stored)
	failed := waitFrom(t, h.rec, from, any1[*messages.RecoveryFailed])
	require.ErrorIs(t, failed.Err, persistence.ErrCorruptRecord)
	require.ErrorIs(t, failed.Err, messages.ErrSentinel)
	h.stop(pid)
}
