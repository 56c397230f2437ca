package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// behindWarning is the Warn line of an AddedBehind.
const behindWarning = "vchannels added below the persisted checkpoint: a restart before they pass it starts past their records"

// A vchannel added below the persisted checkpoint is behind where a
// restart starts: the reference said nothing of it; here an event says
// so, and a warning.
func TestAnAddBelowThePersistedCheckpointIsTold(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(150))
	core, logs := observer.New(zapcore.DebugLevel)
	// At the stored checkpoint: nothing to save, so it stays the persisted one.
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(150)}, actors.WithLogger(zap.New(core)))
	start, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(150), start)

	for _, cmd := range []*messages.AddVChannel{
		{VChannel: "shard-c", Checkpoint: wal.KafkaID(150)}, // at it: where a restart starts
		{VChannel: "shard-d", Checkpoint: wal.KafkaID(200)},
		{VChannel: "shard-b", Checkpoint: wal.KafkaID(80)},
	} {
		require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid, cmd))
	}
	behind := waitFor[*messages.AddedBehind](t, f.events)
	require.Equal(t, []string{"shard-b"}, behind.VChannels)
	require.Equal(t, wal.KafkaID(150), behind.Persisted)
	require.Equal(t, wal.KafkaID(80), behind.Minimum)
	warned := logs.FilterLevelExact(zapcore.WarnLevel).All()
	require.Len(t, warned, 1)
	require.Equal(t, behindWarning, warned[0].Message)
	require.Equal(t, map[string]any{"pchannel": "orders-dml-0", "vchannels": []any{"shard-b"}, "persisted": "kafka:150", "minimum": "kafka:80"},
		warned[0].ContextMap())
	require.Len(t, logs.FilterMessage("vchannel added").All(), 3)

	// Nothing below the persisted checkpoint is saved: it stays, and no
	// other AddedBehind came.
	require.NoError(t, f.system.Root.PoisonFuture(pid).Wait())
	stopped := waitFor[*messages.Stopped](t, f.events)
	require.Equal(t, wal.KafkaID(150), stopped.LastPersisted)
	require.Len(t, logs.FilterMessage(behindWarning).All(), 1)
}

// During recovery the stored checkpoint is not known yet: an Add below it
// is told once it is read, if its vchannel is still below.
func TestAnAddDuringRecoveryIsToldOnceRecovered(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(150))
	f.catalog.SetDown(true)
	core, logs := observer.New(zapcore.InfoLevel)
	// Given at spawn below the stored checkpoint: older news, which it covers.
	pid := f.spawn(t, map[string]wal.MessageID{"spawned": wal.KafkaID(90)}, actors.WithLogger(zap.New(core)))
	waitFor[*messages.RecoveryFailed](t, f.events)
	for _, cmd := range []messages.Command{
		&messages.AddVChannel{VChannel: "below", Checkpoint: wal.KafkaID(80)},
		&messages.AddVChannel{VChannel: "above", Checkpoint: wal.KafkaID(200)},
		&messages.AddVChannel{VChannel: "dropped", Checkpoint: wal.KafkaID(50)},
		&messages.DropVChannel{VChannel: "dropped"},
		&messages.AddVChannel{VChannel: "caught-up", Checkpoint: wal.KafkaID(10)},
		&messages.UpdateCheckpoint{VChannel: "caught-up", Checkpoint: wal.KafkaID(170)},
		&messages.AddVChannel{VChannel: "also-below", Checkpoint: wal.KafkaID(149)},
	} {
		require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid, cmd))
	}
	require.Empty(t, logs.FilterMessage(behindWarning).All(), "not known yet")
	f.catalog.SetDown(false)

	recovered := waitFor[*messages.Recovered](t, f.events)
	require.Equal(t, wal.KafkaID(150), recovered.StartMessageID)
	behind := waitFor[*messages.AddedBehind](t, f.events)
	require.Equal(t, []string{"also-below", "below"}, behind.VChannels)
	require.Equal(t, wal.KafkaID(150), behind.Persisted)
	require.Equal(t, wal.KafkaID(80), behind.Minimum)
	require.Len(t, logs.FilterMessage(behindWarning).All(), 1)
}

// Nothing stored: nothing to be below, and the start is the added
// vchannel's. It was the spawn's minimum, above it: a consumer opened
// there skipped its records in between, untold, and the first save, of
// its checkpoint, started the next run below the start this one gave.
func TestAnAddDuringRecoveryWithNothingStoredIsNotTold(t *testing.T) {
	f := newPChannelFixture(t, nil)
	f.catalog.SetDown(true)
	core, logs := observer.New(zapcore.InfoLevel)
	pid := f.spawn(t, map[string]wal.MessageID{"spawned": wal.KafkaID(90)}, actors.WithLogger(zap.New(core)))
	waitFor[*messages.RecoveryFailed](t, f.events)
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.AddVChannel{VChannel: "below", Checkpoint: wal.KafkaID(10)}))
	f.catalog.SetDown(false)
	start, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), start)
	recovered := waitFor[*messages.Recovered](t, f.events)
	require.Equal(t, wal.KafkaID(10), recovered.StartMessageID)
	require.False(t, recovered.FromCatalog)
	stopped, err := actors.Poison(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), stopped.LastPersisted)
	require.Empty(t, logs.FilterMessage(behindWarning).All())
}

// gatedSaves holds each save until released, after telling it began.
type gatedSaves struct {
	persistence.Catalog
	began   chan wal.MessageID
	release chan struct{}
}

func (g *gatedSaves) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	g.began <- v
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Catalog.Save(ctx, pchannel, v)
}

// spawnGated spawns orders-dml-0 at shard-a@100, stored, on saves held
// until released; once kafka:150 is being saved, it returns.
func spawnGated(t *testing.T, f *pchannelFixture) (*gatedSaves, *observer.ObservedLogs, func(cmd messages.Command), *actor.PID) {
	t.Helper()
	mem := persistence.NewMemory()
	require.NoError(t, mem.Save(context.Background(), "orders-dml-0", wal.KafkaID(100)))
	cat := &gatedSaves{Catalog: mem, began: make(chan wal.MessageID, 1), release: make(chan struct{})}
	core, logs := observer.New(zapcore.InfoLevel)
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, cat, actors.WithLogger(zap.New(core)),
		actors.WithVChannels(map[string]wal.MessageID{"shard-a": wal.KafkaID(100)}))
	require.NoError(t, err)
	pid := f.system.Root.Spawn(props)
	t.Cleanup(func() { _ = f.system.Root.StopFuture(pid).Wait() })
	request := func(cmd messages.Command) {
		t.Helper()
		require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid, cmd))
	}
	request(&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(150)})
	select {
	case v := <-cat.began:
		require.Equal(t, wal.KafkaID(150), v)
	case <-time.After(10 * time.Second):
		t.Fatal("no save of kafka:150 began within 10 s")
	}
	return cat, logs, request, pid
}

// A save in flight, computed before an Add below its value, lands after
// it: told then.
func TestASaveThatLandsAboveAnAddedVChannelIsTold(t *testing.T) {
	f := newPChannelFixture(t, nil)
	cat, logs, request, _ := spawnGated(t, f)
	request(&messages.AddVChannel{VChannel: "late", Checkpoint: wal.KafkaID(120)}) // 100 is persisted, below 120
	require.Empty(t, logs.FilterMessage(behindWarning).All())
	close(cat.release)

	require.Equal(t, wal.KafkaID(150), waitFor[*messages.CheckpointPersisted](t, f.events).Value)
	behind := waitFor[*messages.AddedBehind](t, f.events)
	require.Equal(t, []string{"late"}, behind.VChannels)
	require.Equal(t, wal.KafkaID(150), behind.Persisted)
	require.Equal(t, wal.KafkaID(120), behind.Minimum)
	require.Len(t, logs.FilterMessage(behindWarning).All(), 1)

	// Saves with no Add below them: nothing more to tell.
	request(&messages.UpdateCheckpoint{VChannel: "late", Checkpoint: wal.KafkaID(200)})
	request(&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(190)})
	select {
	case <-cat.began:
	case <-time.After(10 * time.Second):
		t.Fatal("no save of kafka:190 began within 10 s")
	}
	require.Equal(t, wal.KafkaID(190), waitFor[*messages.CheckpointPersisted](t, f.events).Value)
	request(&messages.AddVChannel{VChannel: "above", Checkpoint: wal.KafkaID(300)})
	require.Len(t, logs.FilterMessage(behindWarning).All(), 1)
}

// The save lands after the Add read the persisted checkpoint, and before
// the persister learns of the Add: the persister tells it as it does.
func TestASaveThatLandedBeforeThePersisterLearnedOfTheAddIsTold(t *testing.T) {
	f := newPChannelFixture(t, nil)
	cat, logs, request, _ := spawnGated(t, f)
	persisted := make(chan struct{})
	watch := f.system.EventStream.Subscribe(func(ev any) {
		if p, ok := ev.(*messages.CheckpointPersisted); ok && p.Value.EQ(wal.KafkaID(150)) {
			close(persisted)
		}
	})
	defer f.system.EventStream.Unsubscribe(watch)
	// Runs on the pchannel's goroutine as it applies the Add, after it
	// read the persisted checkpoint (100) and before it hands the fall on.
	hold := f.system.EventStream.Subscribe(func(ev any) {
		if a, ok := ev.(*messages.VChannelAdded); ok && a.VChannel == "late" {
			close(cat.release)
			select {
			case <-persisted:
			case <-time.After(10 * time.Second): // the test fails below
			}
		}
	})
	defer f.system.EventStream.Unsubscribe(hold)

	request(&messages.AddVChannel{VChannel: "late", Checkpoint: wal.KafkaID(120)})
	behind := waitFor[*messages.AddedBehind](t, f.events)
	require.Equal(t, []string{"late"}, behind.VChannels)
	require.Equal(t, wal.KafkaID(150), behind.Persisted)
	require.Equal(t, wal.KafkaID(120), behind.Minimum)
	require.Len(t, logs.FilterMessage(behindWarning).All(), 1)
}

// Several Adds during one save: every vchannel below it when it lands is
// named, whether its Add pulled the minimum down or not, and one told at
// its Add is told again with the higher checkpoint.
func TestEveryVChannelBelowALandedSaveIsTold(t *testing.T) {
	for name, tc := range map[string]struct {
		adds  []*messages.AddVChannel
		first *messages.AddedBehind // told at an Add, if any
		last  messages.AddedBehind  // told as the save lands
	}{
		"two falls": {
			adds: []*messages.AddVChannel{{VChannel: "x", Checkpoint: wal.KafkaID(130)}, {VChannel: "y", Checkpoint: wal.KafkaID(110)}},
			last: messages.AddedBehind{VChannels: []string{"x", "y"}, Persisted: wal.KafkaID(150), Minimum: wal.KafkaID(110)},
		},
		"a fall, then an Add above the minimum": {
			adds: []*messages.AddVChannel{{VChannel: "x", Checkpoint: wal.KafkaID(120)}, {VChannel: "y", Checkpoint: wal.KafkaID(130)}},
			last: messages.AddedBehind{VChannels: []string{"x", "y"}, Persisted: wal.KafkaID(150), Minimum: wal.KafkaID(120)},
		},
		"a fall, then one below the persisted checkpoint": {
			adds:  []*messages.AddVChannel{{VChannel: "x", Checkpoint: wal.KafkaID(120)}, {VChannel: "y", Checkpoint: wal.KafkaID(50)}},
			first: &messages.AddedBehind{VChannels: []string{"y"}, Persisted: wal.KafkaID(100), Minimum: wal.KafkaID(50)},
			last:  messages.AddedBehind{VChannels: []string{"x", "y"}, Persisted: wal.KafkaID(150), Minimum: wal.KafkaID(50)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newPChannelFixture(t, nil)
			cat, logs, request, _ := spawnGated(t, f)
			for _, add := range tc.adds {
				request(add)
			}
			told := 0
			if tc.first != nil {
				b := waitFor[*messages.AddedBehind](t, f.events)
				require.Equal(t, []any{tc.first.VChannels, tc.first.Persisted, tc.first.Minimum}, []any{b.VChannels, b.Persisted, b.Minimum})
				told++
			}
			close(cat.release)
			b := waitFor[*messages.AddedBehind](t, f.events)
			require.Equal(t, []any{tc.last.VChannels, tc.last.Persisted, tc.last.Minimum}, []any{b.VChannels, b.Persisted, b.Minimum})
			require.Len(t, logs.FilterMessage(behindWarning).All(), told+1)
		})
	}
}

// behindUntilStopped collects the AddedBehind events until Stopped, which
// it returns too.
func behindUntilStopped(t *testing.T, events <-chan any) ([]*messages.AddedBehind, *messages.Stopped) {
	t.Helper()
	var told []*messages.AddedBehind
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			switch e := ev.(type) {
			case *messages.AddedBehind:
				told = append(told, e)
			case *messages.Stopped:
				return told, e
			}
		case <-deadline:
			t.Fatal("no Stopped within 10 s")
			return nil, nil
		}
	}
}

// A save that lands while a graceful stop waits for it is told before the
// stop ends.
func TestASaveThatLandsDuringAStopIsTold(t *testing.T) {
	f := newPChannelFixture(t, nil)
	cat, _, request, pid := spawnGated(t, f)
	request(&messages.AddVChannel{VChannel: "late", Checkpoint: wal.KafkaID(120)})
	poisoned := make(chan *messages.Stopped, 1)
	go func() {
		st, _ := actors.Poison(within(t, 10*time.Second), f.system, pid)
		poisoned <- st
	}()
	// The stop waits for the save held: the pchannel answers nothing now.
	require.Eventually(t, func() bool {
		_, err := actors.GetState(within(t, time.Second), f.system.Root, pid)
		return err != nil
	}, 10*time.Second, time.Millisecond)
	close(cat.release)
	told, stopped := behindUntilStopped(t, f.events)
	require.Len(t, told, 1)
	require.Equal(t, []string{"late"}, told[0].VChannels)
	require.Equal(t, wal.KafkaID(150), told[0].Persisted)
	require.Equal(t, wal.KafkaID(150), stopped.LastPersisted)
	require.Equal(t, stopped, <-poisoned)
}

// Adds sent raw, a fall and a rise that may reach the persister as one
// move: the vchannel below the save that lands is told all the same.
func TestAFallAndARiseSentRawAreTold(t *testing.T) {
	f := newPChannelFixture(t, nil)
	cat, _, _, pid := spawnGated(t, f)
	f.system.Root.Send(pid, &messages.AddVChannel{VChannel: "x", Checkpoint: wal.KafkaID(120)})
	f.system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "x", Checkpoint: wal.KafkaID(130)})
	close(cat.release)
	b := waitFor[*messages.AddedBehind](t, f.events)
	require.Equal(t, []string{"x"}, b.VChannels)
	require.Equal(t, wal.KafkaID(150), b.Persisted)
	// 120 if the save landed before the Add was applied, 130 if after.
	require.Contains(t, []wal.MessageID{wal.KafkaID(120), wal.KafkaID(130)}, b.Minimum)
}

// However the persister's word and the Adds interleave, each vchannel is
// told once against the checkpoint that landed.
func TestEachVChannelIsToldOnceAgainstACheckpoint(t *testing.T) {
	f := newPChannelFixture(t, nil)
	cat, _, request, pid := spawnGated(t, f)
	request(&messages.AddVChannel{VChannel: "x", Checkpoint: wal.KafkaID(130)})
	close(cat.release)
	require.Equal(t, wal.KafkaID(150), waitFor[*messages.CheckpointPersisted](t, f.events).Value)
	request(&messages.AddVChannel{VChannel: "y", Checkpoint: wal.KafkaID(110)})
	require.NoError(t, f.system.Root.PoisonFuture(pid).Wait())
	told, _ := behindUntilStopped(t, f.events)
	count := map[string]int{}
	for _, b := range told {
		require.Equal(t, wal.KafkaID(150), b.Persisted)
		for _, v := range b.VChannels {
			count[v]++
		}
	}
	require.Equal(t, map[string]int{"x": 1, "y": 1}, count)
}

// Vchannels given at spawn below the stored checkpoint are never told:
// not at recovery, nor on the persister's word, nor at the stop.
func TestVChannelsGivenAtSpawnBelowTheStoredCheckpointAreNotTold(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(100))
	core, logs := observer.New(zapcore.InfoLevel)
	pid := f.spawn(t, map[string]wal.MessageID{"spawned": wal.KafkaID(5), "other": wal.KafkaID(200)}, actors.WithLogger(zap.New(core)))
	_, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	for _, cmd := range []messages.Command{
		&messages.UpdateCheckpoint{VChannel: "spawned", Checkpoint: wal.KafkaID(6)}, // a rise, still below
		&messages.AddVChannel{VChannel: "x", Checkpoint: wal.KafkaID(100)},          // at it: not below
	} {
		require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid, cmd))
	}
	stopped, err := actors.Poison(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(100), stopped.LastPersisted)
	told, _ := behindUntilStopped(t, f.events)
	require.Empty(t, told)
	require.Empty(t, logs.FilterMessage(behindWarning).All())
}
