package tests

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// Semantics 7: with a stored checkpoint, it is the start message ID, and it
// is the floor: nothing at or below it is saved.
func TestRecoveryStoredCheckpointWins(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	require.NoError(t, mem.Save(context.Background(), pch, k(500)))
	fi := faultinject.Wrap(mem)
	pid, rec := spawnRecovered(t, h, wal.Kafka, fi, actors.WithVChannels(map[string]wal.MessageID{"a": k(100), "b": k(700)}))
	require.True(t, rec.FromCatalog)
	require.Equal(t, k(500), rec.StartMessageID)
	require.Equal(t, 1, rec.Attempts)
	s := h.state(pid, false)
	require.True(t, s.Recovered)
	require.Equal(t, k(500), s.StartMessageID)
	require.Equal(t, k(500), s.Persisted)
	require.Equal(t, k(100), s.Minimum)

	h.update(pid, "a", 400) // minimum 400, still below the stored value
	h.update(pid, "a", 600) // minimum 600
	waitFor(t, h.rec, persistedIs(k(600)))
	h.poison(pid)
	require.Equal(t, []wal.MessageID{k(500), k(600)}, mem.History(pch))
	require.Equal(t, 1, fi.Calls(faultinject.OpSave))
}

func TestRecoveryNothingStoredStartsAtGivenMinimum(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	pid, rec := spawnRecovered(t, h, wal.Kafka, mem, actors.WithVChannels(map[string]wal.MessageID{"a": k(100), "b": k(70), "c": k(90)}))
	require.False(t, rec.FromCatalog)
	require.Equal(t, k(70), rec.StartMessageID)
	s := h.state(pid, false)
	require.True(t, s.Recovered)
	require.Equal(t, k(70), s.StartMessageID)
	waitFor(t, h.rec, persistedIs(k(70)))
	require.Equal(t, k(70), loadNow(t, mem))
}

func TestRecoveryNothingStoredNothingGiven(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	pid, rec := spawnRecovered(t, h, wal.Kafka, fi)
	require.False(t, rec.FromCatalog)
	require.Nil(t, rec.StartMessageID)
	s := h.state(pid, false)
	require.True(t, s.Recovered)
	require.Nil(t, s.StartMessageID)
	require.Nil(t, s.Minimum)
	require.Nil(t, s.Persisted)
	require.Zero(t, fi.Calls(faultinject.OpSave))

	// The first vchannel gives the first minimum, which is saved; the start
	// message ID stays what it was at recovery.
	h.mustRequest(pid, &messages.AddVChannel{VChannel: "a", Checkpoint: k(5)})
	adv := waitFor(t, h.rec, any1[*messages.MinimumAdvanced])
	require.Nil(t, adv.From)
	require.Equal(t, k(5), adv.To)
	waitFor(t, h.rec, persistedIs(k(5)))
	require.Nil(t, h.state(pid, false).StartMessageID)
	h.poison(pid)
	require.Equal(t, []wal.MessageID{k(5)}, mem.History(pch))
}

// A catalog failing Load K times: K RecoveryFailed at the backoff's pace,
// then Recovered. Meanwhile commands are applied and answered, GetState
// says Recovered=false, and nothing is saved.
func TestRecoveryRetriesAndAppliesCommandsMeanwhile(t *testing.T) {
	const K = 3
	h := newHarness(t)
	mem := persistence.NewMemory()
	g := newGated(mem)
	// fi in front of g: the K scripted failures never reach g, so the hold
	// catches the attempt K+1.
	fi := faultinject.Wrap(g)
	fi.Script(faultinject.OpLoad, repeat(faultinject.Error(), K)...)
	held := g.holdNext(t, faultinject.OpLoad)
	pid := h.spawn(wal.Kafka, fi, actors.WithBackoff(fastBackoff),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(100), "b": k(200)}))

	fails := waitCount(t, h.rec, K, any1[*messages.RecoveryFailed])
	held.waitEntered(t)
	for i, f := range fails {
		require.Equal(t, i+1, f.Attempt)
		require.ErrorIs(t, f.Err, faultinject.ErrInjected)
		require.GreaterOrEqual(t, f.NextRetry, fastBackoff.Initial)
		require.LessOrEqual(t, f.NextRetry, fastBackoff.Max)
		if i > 0 {
			require.GreaterOrEqual(t, f.At.Sub(fails[i-1].At), fails[i-1].NextRetry, "attempt %d came early", i+1)
		}
	}

	s := h.state(pid, false)
	require.False(t, s.Recovered)
	require.Nil(t, s.StartMessageID)
	require.Nil(t, s.Persisted)
	h.update(pid, "a", 150)
	h.mustRequest(pid, &messages.AddVChannel{VChannel: "c", Checkpoint: k(300)})
	h.mustRequest(pid, &messages.DropVChannel{VChannel: "b"})
	require.ErrorIs(t, h.request(pid, &messages.AddVChannel{VChannel: "c", Checkpoint: k(1)}), messages.ErrVChannelExists)
	s = h.state(pid, true)
	require.False(t, s.Recovered)
	require.Equal(t, k(150), s.Minimum)
	require.Equal(t, map[string]wal.MessageID{"a": k(150), "c": k(300)}, s.Checkpoints)
	adv := waitFor(t, h.rec, any1[*messages.MinimumAdvanced])
	require.Equal(t, k(150), adv.To)
	require.Empty(t, collect[*messages.Recovered](h.rec))
	require.Zero(t, fi.Calls(faultinject.OpSave), "saved before recovery")

	held.Release()
	rec := waitFor(t, h.rec, any1[*messages.Recovered])
	require.Equal(t, K+1, rec.Attempts)
	require.False(t, rec.FromCatalog)
	require.Equal(t, k(100), rec.StartMessageID, "start = minimum of the vchannels given at spawn")
	waitFor(t, h.rec, persistedIs(k(150)))
	s = h.state(pid, false)
	require.True(t, s.Recovered)
	require.Equal(t, k(100), s.StartMessageID)
	h.poison(pid)
	require.Equal(t, []wal.MessageID{k(150)}, mem.History(pch))
}

// A Load that panics counts as a failed read (I7), not a crash.
func TestRecoveryLoadPanic(t *testing.T) {
	h := newHarness(t)
	fi := faultinject.Wrap(persistence.NewMemory())
	fi.Script(faultinject.OpLoad, faultinject.Panic())
	h.spawn(wal.Kafka, fi, actors.WithBackoff(fastBackoff), actors.WithVChannels(map[string]wal.MessageID{"a": k(3)}))
	f := waitFor(t, h.rec, any1[*messages.RecoveryFailed])
	require.Equal(t, 1, f.Attempt)
	rec := waitFor(t, h.rec, any1[*messages.Recovered])
	require.Equal(t, 2, rec.Attempts)
	waitFor(t, h.rec, persistedIs(k(3)))
}

// A stored record that cannot be read (garbage, or a record of another
// WAL): RecoveryFailed with ErrCorruptRecord again and again, never
// Recovered, never a save; commands are still answered. This is the
// behaviour documented in actors/pchannel.go (loadDone, loaded): never start from
// nothing over a record we cannot read. Once an operator repairs the
// record, recovery goes through.
func TestRecoveryUnreadableRecord(t *testing.T) {
	foreign, err := persistence.EncodeRecord(pch, persistence.Record{Checkpoint: wal.PulsarID{LedgerID: 7, EntryID: 1}})
	require.NoError(t, err)
	// Another pchannel's record, copied or found under this name (a key
	// damaged by one byte): whole, but not this pchannel's checkpoint.
	others, err := persistence.EncodeRecord(pch+"-other", persistence.Record{Checkpoint: k(90)})
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		raw    []byte
		target error
	}{
		{"garbage", []byte("garbage, not a record"), persistence.ErrCorruptRecord},
		{"empty", []byte{}, persistence.ErrCorruptRecord},
		{"another WAL", foreign, wal.ErrWALMismatch},
		{"another pchannel's", others, persistence.ErrCorruptRecord},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			mem := persistence.NewMemory()
			mem.Put(pch, c.raw)
			fi := faultinject.Wrap(mem)
			pid := h.spawn(wal.Kafka, fi, actors.WithBackoff(fastBackoff), actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
			fails := waitCount(t, h.rec, 4, any1[*messages.RecoveryFailed])
			for i, f := range fails {
				require.Equal(t, i+1, f.Attempt)
				require.ErrorIs(t, f.Err, persistence.ErrCorruptRecord)
				require.ErrorIs(t, f.Err, c.target)
				var cre *persistence.CorruptRecordError
				require.True(t, errors.As(f.Err, &cre))
				require.Equal(t, pch, cre.PChannel)
				require.Positive(t, f.NextRetry)
			}
			h.update(pid, "a", 20)
			s := h.state(pid, false)
			require.False(t, s.Recovered)
			require.Nil(t, s.StartMessageID)
			require.Nil(t, s.Persisted)
			require.Equal(t, k(20), s.Minimum)
			stopped, _ := h.poison(pid)
			require.True(t, stopped.Graceful)
			require.False(t, stopped.Flushed)
			require.Equal(t, k(20), stopped.Dropped)

			require.Empty(t, collect[*messages.Recovered](h.rec))
			require.Empty(t, collect[*messages.CheckpointPersisted](h.rec))
			require.Zero(t, fi.Calls(faultinject.OpSave), "a save over an unreadable record")
			// The record is left as it was.
			id, err := mem.Load(context.Background(), pch)
			if c.target == wal.ErrWALMismatch {
				require.NoError(t, err)
				require.Equal(t, wal.MessageID(wal.PulsarID{LedgerID: 7, EntryID: 1}), id)
			} else {
				require.ErrorIs(t, err, persistence.ErrCorruptRecord, "the record was overwritten")
			}
		})
	}
}

func TestRecoveryAfterRecordRepaired(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	mem.Put(pch, []byte("garbage"))
	g := newGated(mem)
	fi := faultinject.Wrap(g)
	pid := h.spawn(wal.Kafka, fi, actors.WithBackoff(fastBackoff), actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	waitCount(t, h.rec, 2, any1[*messages.RecoveryFailed])
	// Hold the next read, repair the record under it, let it through.
	held := g.holdNext(t, faultinject.OpLoad)
	held.waitEntered(t)
	good, err := persistence.EncodeRecord(pch, persistence.Record{Checkpoint: k(40)})
	require.NoError(t, err)
	mem.Put(pch, good)
	held.Release()
	rec := waitFor(t, h.rec, any1[*messages.Recovered])
	require.True(t, rec.FromCatalog)
	require.Equal(t, k(40), rec.StartMessageID)
	h.update(pid, "a", 50)
	waitFor(t, h.rec, persistedIs(k(50)))
	require.Equal(t, k(50), loadNow(t, mem))
}
