package tests

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// The reference's scenarios, through the actor: Add of a vchannel that
// exists, Update and Drop of one that does not, an Update below the
// checkpoint (rollback) or equal to it (a no-op), and the minimum over none,
// and over ties.

func newRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0))
}

func TestMinimumOf1000VChannels(t *testing.T) {
	h := newHarness(t)
	rng := newRand(t)
	given := make(map[string]wal.MessageID, 500)
	want := make(map[string]wal.MessageID, 1000)
	var min wal.MessageID
	for i := range 1000 {
		name := fmt.Sprintf("v%04d", i)
		cp := k(rng.Int64N(1_000_000) + 1000)
		want[name] = cp
		min = wal.Min(min, cp)
		if i%2 == 0 {
			given[name] = cp
		}
	}
	pid := h.spawn(wal.Kafka, persistence.NewMemory(), actors.WithVChannels(given))
	for name, cp := range want {
		if _, ok := given[name]; !ok {
			h.mustRequest(pid, &messages.AddVChannel{VChannel: name, Checkpoint: cp})
		}
	}
	s := h.state(pid, true)
	require.Equal(t, min, s.Minimum)
	require.Equal(t, 1000, s.VChannels)
	require.Equal(t, want, s.Checkpoints)
	require.Equal(t, pch, s.PChannel)
	require.Equal(t, wal.Kafka, s.WALName)
	require.Len(t, collect[*messages.VChannelAdded](h.rec), 500)
	require.Empty(t, collect[*messages.CommandRejected](h.rec))
}

// Each rejection replies a typed error, publishes exactly one
// CommandRejected, and changes nothing.
func TestRejectedCommandsChangeNothing(t *testing.T) {
	h := newHarness(t)
	pid := h.spawn(wal.Kafka, persistence.NewMemory(), actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(20)}))
	before := trackerView(h.state(pid, true))
	require.Equal(t, k(10), before.Minimum)

	cases := []struct {
		name string
		cmd  messages.Command
		want error
	}{
		{"duplicate add", &messages.AddVChannel{VChannel: "a", Checkpoint: k(5)}, messages.ErrVChannelExists},
		{"duplicate add same value", &messages.AddVChannel{VChannel: "b", Checkpoint: k(20)}, messages.ErrVChannelExists},
		{"unknown update", &messages.UpdateCheckpoint{VChannel: "x", Checkpoint: k(50)}, messages.ErrVChannelNotFound},
		{"unknown drop", &messages.DropVChannel{VChannel: "x"}, messages.ErrVChannelNotFound},
		{"rollback", &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: k(9)}, messages.ErrCheckpointRollback},
		{"nil add", &messages.AddVChannel{VChannel: "c", Checkpoint: nil}, messages.ErrNilCheckpoint},
		{"nil update", &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: nil}, messages.ErrNilCheckpoint},
		{"pulsar add on kafka", &messages.AddVChannel{VChannel: "c", Checkpoint: wal.PulsarID{LedgerID: 1, EntryID: 1}}, messages.ErrWALMismatch},
		{"pulsar update on kafka", &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.PulsarID{LedgerID: 99}}, messages.ErrWALMismatch},
		{"rocksmq update on kafka", &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.RocksMQID(99)}, messages.ErrWALMismatch},
		{"empty add", &messages.AddVChannel{VChannel: "", Checkpoint: k(1)}, messages.ErrEmptyVChannel},
		{"empty drop", &messages.DropVChannel{VChannel: ""}, messages.ErrEmptyVChannel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := h.request(pid, c.cmd)
			require.ErrorIs(t, err, c.want)
			// The event is published before the reply is sent.
			var n int
			for _, ev := range collect[*messages.CommandRejected](h.rec) {
				if ev.Command == c.cmd {
					n++
					require.ErrorIs(t, ev.Err, c.want)
					require.Equal(t, pch, ev.PChannel)
					require.False(t, ev.At.IsZero())
				}
			}
			require.Equal(t, 1, n, "CommandRejected events for %T", c.cmd)
			require.Equal(t, before, trackerView(h.state(pid, true)))
		})
	}
	require.ErrorIs(t, messages.ErrWALMismatch, wal.ErrWALMismatch)
	require.Len(t, collect[*messages.CommandRejected](h.rec), len(cases))
	require.Empty(t, collect[*messages.VChannelAdded](h.rec))
	require.Empty(t, collect[*messages.VChannelDropped](h.rec))
	require.Empty(t, collect[*messages.MinimumAdvanced](h.rec))
}

// A command sent without a sender is applied the same way; its rejection
// is published all the same.
func TestRejectionWithoutSenderIsPublished(t *testing.T) {
	h := newHarness(t)
	pid := h.spawn(wal.Kafka, persistence.NewMemory(), actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	unknown := &messages.UpdateCheckpoint{VChannel: "x", Checkpoint: k(50)}
	dup := &messages.AddVChannel{VChannel: "a", Checkpoint: k(1)}
	rollback := &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: k(3)}
	h.sys.Root.Send(pid, unknown)
	h.sys.Root.Send(pid, dup)
	h.sys.Root.Send(pid, rollback)
	waitFor(t, h.rec, isRejection(unknown, messages.ErrVChannelNotFound))
	waitFor(t, h.rec, isRejection(dup, messages.ErrVChannelExists))
	waitFor(t, h.rec, isRejection(rollback, messages.ErrCheckpointRollback))
	s := h.state(pid, true)
	require.Equal(t, map[string]wal.MessageID{"a": k(10)}, s.Checkpoints)
	require.Len(t, collect[*messages.CommandRejected](h.rec), 3)

	// An accepted Send is applied too: the reply is only skipped.
	h.sys.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: k(12)})
	require.Equal(t, k(12), h.state(pid, false).Minimum)
}

// With ties at the minimum, it rises only when every vchannel at it moved;
// an update to an equal checkpoint is accepted and changes nothing.
func TestTiedMinimumMovesOnlyWhenAllMove(t *testing.T) {
	h := newHarness(t)
	given := map[string]wal.MessageID{"w": k(200)}
	for i := range 10 {
		given[fmt.Sprintf("v%d", i)] = k(100)
	}
	pid := h.spawn(wal.Kafka, persistence.NewMemory(), actors.WithVChannels(given))
	for i := range 9 {
		h.update(pid, fmt.Sprintf("v%d", i), 150)
		require.Equal(t, k(100), h.state(pid, false).Minimum, "after moving %d of 10 tied vchannels", i+1)
	}
	// Equal update: accepted, no-op.
	h.update(pid, "v9", 100)
	h.update(pid, "v0", 150)
	require.Equal(t, k(100), h.state(pid, false).Minimum)
	require.Empty(t, collect[*messages.MinimumAdvanced](h.rec))
	require.Empty(t, collect[*messages.CommandRejected](h.rec))

	h.update(pid, "v9", 160)
	require.Equal(t, k(150), h.state(pid, false).Minimum)
	adv := collect[*messages.MinimumAdvanced](h.rec)
	require.Len(t, adv, 1)
	require.Equal(t, k(100), adv[0].From)
	require.Equal(t, k(150), adv[0].To)
}

func TestRollbackRejected(t *testing.T) {
	h := newHarness(t)
	pid := h.spawn(wal.Kafka, persistence.NewMemory(), actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(100)}))
	h.update(pid, "a", 20)
	err := h.request(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: k(15)})
	require.ErrorIs(t, err, messages.ErrCheckpointRollback)
	require.NotErrorIs(t, err, messages.ErrVChannelNotFound)
	s := h.state(pid, true)
	require.Equal(t, k(20), s.Checkpoints["a"])
	require.Equal(t, k(20), s.Minimum)
}

// 1000 random updates (some of them rollbacks) never lower the minimum:
// MinimumAdvanced events form a strictly rising chain ending at the
// model's minimum.
func TestRandomUpdatesNeverLowerMinimum(t *testing.T) {
	h := newHarness(t)
	rng := newRand(t)
	model := make(map[string]int64, 50)
	given := make(map[string]wal.MessageID, 50)
	for i := range 50 {
		n := rng.Int64N(1000)
		model[fmt.Sprintf("v%02d", i)] = n
		given[fmt.Sprintf("v%02d", i)] = k(n)
	}
	modelMin := func() int64 {
		m := int64(-1)
		for _, n := range model {
			if m < 0 || n < m {
				m = n
			}
		}
		return m
	}
	initial := modelMin()
	pid := h.spawn(wal.Kafka, persistence.NewMemory(), actors.WithVChannels(given))
	rollbacks := 0
	for i := range 1000 {
		name := fmt.Sprintf("v%02d", rng.IntN(50))
		// About one in six is a rollback; an offset, never negative.
		n := max(model[name]+rng.Int64N(60)-10, 0)
		if n < model[name] {
			rollbacks++
		} else {
			model[name] = n
		}
		cmd := &messages.UpdateCheckpoint{VChannel: name, Checkpoint: k(n)}
		if i%2 == 0 {
			h.sys.Root.Send(pid, cmd)
			continue
		}
		err := h.request(pid, cmd)
		if n < model[name] {
			require.ErrorIs(t, err, messages.ErrCheckpointRollback)
		} else {
			require.NoError(t, err)
		}
	}
	s := h.state(pid, true) // after every Send, by mailbox order
	require.Equal(t, k(modelMin()), s.Minimum)
	want := make(map[string]wal.MessageID, len(model))
	for name, n := range model {
		want[name] = k(n)
	}
	require.Equal(t, want, s.Checkpoints)
	require.Len(t, collect[*messages.CommandRejected](h.rec), rollbacks)

	prev := k(initial)
	adv := collect[*messages.MinimumAdvanced](h.rec)
	for i, e := range adv {
		require.True(t, e.From.LT(e.To), "event %d: %s → %s", i, e.From, e.To)
		require.Equal(t, prev, e.From, "event %d does not start where the previous ended", i)
		prev = e.To
	}
	require.Equal(t, k(modelMin()), prev, "last MinimumAdvanced is not the minimum")
	t.Logf("%d updates, %d rollbacks, %d MinimumAdvanced, minimum %d → %d", 1000, rollbacks, len(adv), initial, modelMin())
}

func TestDropAllLeavesNoMinimum(t *testing.T) {
	h := newHarness(t)
	rng := newRand(t)
	given := make(map[string]wal.MessageID)
	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("v%02d", i)
		given[names[i]] = k(int64(i * 10))
	}
	pid := h.spawn(wal.Kafka, persistence.NewMemory(), actors.WithVChannels(given))
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, name := range names {
		h.mustRequest(pid, &messages.DropVChannel{VChannel: name})
	}
	s := h.state(pid, true)
	require.Nil(t, s.Minimum)
	require.Zero(t, s.VChannels)
	require.Empty(t, s.Checkpoints)
	require.Len(t, collect[*messages.VChannelDropped](h.rec), 20)
	// Drops raise the minimum; dropping the last one is no rise.
	var tos []wal.MessageID
	for _, e := range collect[*messages.MinimumAdvanced](h.rec) {
		require.NotNil(t, e.To)
		tos = append(tos, e.To)
	}
	requireStrictlyIncreasing(t, tos, "MinimumAdvanced.To")
	err := h.request(pid, &messages.DropVChannel{VChannel: names[0]})
	require.ErrorIs(t, err, messages.ErrVChannelNotFound)
}

// UpdateBatch: entries applied in order, rejected ones listed by index in a
// *BatchError that errors.Is sees through.
func TestUpdateBatch(t *testing.T) {
	h := newHarness(t)
	pid := h.spawn(wal.Kafka, persistence.NewMemory(), actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(10), "c": k(10)}))
	batch := &messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{
		{VChannel: "a", Checkpoint: k(20)},                    // 0 ok
		{VChannel: "x", Checkpoint: k(5)},                     // 1 unknown
		{VChannel: "b", Checkpoint: k(5)},                     // 2 rollback
		{VChannel: "b", Checkpoint: k(30)},                    // 3 ok
		{VChannel: "a", Checkpoint: nil},                      // 4 nil
		{VChannel: "c", Checkpoint: k(25)},                    // 5 ok
		{VChannel: "a", Checkpoint: k(15)},                    // 6 rollback, only because 0 came first
		{VChannel: "c", Checkpoint: wal.PulsarID{EntryID: 9}}, // 7 foreign
		{VChannel: "a", Checkpoint: k(20)},                    // 8 equal: ok
	}}
	err := h.request(pid, batch)
	require.Error(t, err)
	var be *messages.BatchError
	require.True(t, errors.As(err, &be), "reply %T %v", err, err)
	var idx []int
	var names []string
	for _, r := range be.Rejected {
		idx = append(idx, r.Index)
		names = append(names, r.VChannel)
	}
	require.Equal(t, []int{1, 2, 4, 6, 7}, idx)
	require.Equal(t, []string{"x", "b", "a", "a", "c"}, names)
	require.ErrorIs(t, be.Rejected[0].Err, messages.ErrVChannelNotFound)
	require.ErrorIs(t, be.Rejected[1].Err, messages.ErrCheckpointRollback)
	require.ErrorIs(t, be.Rejected[2].Err, messages.ErrNilCheckpoint)
	require.ErrorIs(t, be.Rejected[3].Err, messages.ErrCheckpointRollback)
	require.ErrorIs(t, be.Rejected[4].Err, messages.ErrWALMismatch)
	for _, target := range []error{messages.ErrVChannelNotFound, messages.ErrCheckpointRollback, messages.ErrNilCheckpoint, messages.ErrWALMismatch} {
		require.ErrorIs(t, err, target)
	}
	require.NotErrorIs(t, err, messages.ErrVChannelExists)

	s := h.state(pid, true)
	require.Equal(t, map[string]wal.MessageID{"a": k(20), "b": k(30), "c": k(25)}, s.Checkpoints)
	require.Equal(t, k(20), s.Minimum)
	adv := collect[*messages.MinimumAdvanced](h.rec)
	require.Len(t, adv, 1, "one batch, one MinimumAdvanced")
	require.Equal(t, k(10), adv[0].From)
	require.Equal(t, k(20), adv[0].To)
	rej := collect[*messages.CommandRejected](h.rec)
	require.Len(t, rej, 5)
	for _, e := range rej {
		require.Equal(t, messages.Command(batch), e.Command)
	}

	// A batch with nothing wrong replies nil.
	require.NoError(t, h.request(pid, &messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{{VChannel: "a", Checkpoint: k(40)}, {VChannel: "c", Checkpoint: k(40)}}}))
	require.Equal(t, k(30), h.state(pid, false).Minimum)
	// An empty batch too.
	require.NoError(t, h.request(pid, &messages.UpdateBatch{}))
}

// spawnRecovered spawns and waits for Recovered.
func spawnRecovered(t *testing.T, h *harness, walName wal.Name, cat persistence.Catalog, opts ...actors.Option) (*actor.PID, *messages.Recovered) {
	t.Helper()
	from := h.rec.Len()
	pid := h.spawn(walName, cat, opts...)
	return pid, waitFrom(t, h.rec, from, any1[*messages.Recovered])
}

// view is the part of a State that commands change.
type view struct {
	Minimum     wal.MessageID
	VChannels   int
	Checkpoints map[string]wal.MessageID
}

func trackerView(s *messages.State) view {
	return view{Minimum: s.Minimum, VChannels: s.VChannels, Checkpoints: s.Checkpoints}
}
