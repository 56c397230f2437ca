package actors

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/internal/core/tracker"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// wideID is the ID of a registered WAL whose Marshal writes width bytes,
// its value in the first eight, and panics when width is negative. Its
// text is followed by noise bytes of ESC.
type wideID struct {
	v     int64
	width int
	noise int
}

const wideWAL wal.Name = "wide-test"

func (wideID) WALName() wal.Name          { return wideWAL }
func (a wideID) LT(o wal.MessageID) bool  { return a.v < o.(wideID).v }
func (a wideID) LTE(o wal.MessageID) bool { return a.v <= o.(wideID).v }
func (a wideID) EQ(o wal.MessageID) bool  { return a.v == o.(wideID).v }
func (a wideID) String() string {
	return fmt.Sprintf("%s:%d", wideWAL, a.v) + strings.Repeat("\x1b", a.noise)
}
func (a wideID) Marshal() []byte {
	if a.width < 0 {
		panic("wideID.Marshal: bug")
	}
	return binary.BigEndian.AppendUint64(make([]byte, 0, max(a.width, 8)), uint64(a.v))[:max(a.width, 8)]
}

var registerWide = sync.OnceValue(func() error {
	return wal.Register(wideWAL, wal.Codec[wideID]{
		Unmarshal: func(b []byte) (wideID, error) {
			if len(b) < 8 {
				return wideID{}, fmt.Errorf("%d bytes", len(b))
			}
			return wideID{v: int64(binary.BigEndian.Uint64(b)), width: len(b)}, nil
		},
		Parse: func(s string) (wideID, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			return wideID{v: n, width: 8}, err
		},
	})
})

// The vchannels given at spawn are kept for a restart with no tracker
// handed on, IDs of any length included: their lengths took one byte, and
// an ID over 255 bytes came back cut.
func TestSpawnSetKeepsLongIDs(t *testing.T) {
	require.NoError(t, registerWide())
	given := map[string]wal.MessageID{"a": wideID{v: 1, width: 300}, "b": wideID{v: 2, width: 8}, "c": wideID{v: 3, width: wal.MaxIDLen}}
	from, err := newSpawn(wideWAL, given)
	require.NoError(t, err)
	from.take(testPID("first")) // the first actor's
	require.Equal(t, given, from.take(testPID("second")).tracker.Checkpoints())
}

// An ID whose Marshal panics is refused at NewProps, never a panic in the
// caller's goroutine.
func TestNewPropsRefusesAnIDWhoseMarshalPanics(t *testing.T) {
	require.NoError(t, registerWide())
	_, err := NewProps("p", wideWAL, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wideID{v: 1, width: -1}}))
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorIs(t, err, wal.ErrCorruptID)
}

// An ID longer than a catalog's record holds is refused wherever it comes
// in, and changes nothing: taken, it became the minimum, and every save
// of it failed, its stop dropping the minimum unsaved.
func TestAnIDLongerThanARecordHoldsIsRefused(t *testing.T) {
	require.NoError(t, registerWide())
	long := wideID{v: 9, width: wal.MaxIDLen + 1}
	_, err := NewProps("p", wideWAL, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": long}))
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorIs(t, err, wal.ErrCorruptID)

	system := quietSystem(t)
	props, err := NewProps("p", wideWAL, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wideID{v: 1, width: 8}}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	for _, cmd := range []messages.Command{
		&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: long},
		&messages.AddVChannel{VChannel: "b", Checkpoint: long},
	} {
		require.ErrorIs(t, Request(ctx10s(t), system.Root, pid, cmd), wal.ErrCorruptID, "%T", cmd)
	}
	s := newTestSender(t, system, pid)
	require.ErrorIs(t, s.Update("a", long), wal.ErrCorruptID)
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wideID{v: 1, width: 8}}, st.Checkpoints)
}

// An ID's text reaches errors and log lines cut and quoted: a rollback to
// an ID whose text was a megabyte of escape sequences gave an error of
// that megabyte, and so did the log line of its vchannel's add.
func TestAnIDsTextIsCutInErrorsAndLogs(t *testing.T) {
	require.NoError(t, registerWide())
	core, logs := observer.New(zap.DebugLevel)
	system := quietSystem(t)
	props, err := NewProps("p", wideWAL, persistence.NewMemory(), WithLogger(zap.New(core)))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	loud := func(v int64) wideID { return wideID{v: v, width: 8, noise: 1 << 20} }
	shown := func(v int64) string { // what shows in 128 bytes, each ESC quoted as four
		return strconv.Quote(fmt.Sprintf("wide-test:%d", v)+strings.Repeat("\x1b", 28)) + "… (1048587 bytes)"
	}

	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.AddVChannel{VChannel: "a", Checkpoint: loud(9)}))
	err = Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: loud(5)})
	require.ErrorIs(t, err, messages.ErrCheckpointRollback)
	require.Equal(t, `lowwater: checkpoint rollback: vchannel "a" from `+shown(9)+" to "+shown(5), err.Error())

	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.AddVChannel{VChannel: "b", Checkpoint: loud(1)}))
	g := &gate{target: pid}
	gpid := system.Root.Spawn(g.props())
	s := newTestSender(t, system, gpid)
	require.NoError(t, s.Update("b", loud(2))) // shipped, held by the gate
	require.NoError(t, s.Update("b", loud(9))) // waits
	err = s.Update("b", loud(5))
	require.ErrorIs(t, err, messages.ErrCheckpointRollback)
	require.Equal(t, `lowwater: checkpoint rollback: vchannel "b": `+shown(5)+" is below "+shown(9), err.Error())
	system.Root.Send(gpid, gateRelease{})
	require.NoError(t, s.Flush(ctx10s(t)))

	// b's add is a warning if a's save of 9 was durable by then (below
	// the persisted checkpoint), and its persisted field is cut too.
	added := logs.FilterMessageSnippet("vchannel added").All()
	require.Len(t, added, 2)
	require.Equal(t, shown(9), added[0].ContextMap()["checkpoint"])
	require.Equal(t, shown(1), added[1].ContextMap()["checkpoint"])
	if persisted, ok := added[1].ContextMap()["persisted"]; ok {
		require.Equal(t, shown(9), persisted)
	}
}

// A vchannel name no Add took reaches errors cut and quoted: an update or
// a drop of a megabyte of escapes gave an error of four megabytes, and a
// batch's of eight.
func TestAnUnknownVChannelNameIsCutInErrors(t *testing.T) {
	system := quietSystem(t)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(kafkaAt(1, 0)))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	name := strings.Repeat("\x1b", 1<<20)
	shown := strconv.Quote(strings.Repeat("\x1b", 31)) + "… (1048576 bytes)"
	for _, c := range []struct {
		cmd  messages.Command
		want string
	}{
		{&messages.UpdateCheckpoint{VChannel: name, Checkpoint: wal.KafkaID(1)}, "lowwater: vchannel not found: " + shown},
		{&messages.DropVChannel{VChannel: name}, "lowwater: vchannel not found: " + shown},
		{&messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{{VChannel: name, Checkpoint: wal.KafkaID(1)}}},
			"lowwater: 1 update(s) rejected: [0] " + shown + ": lowwater: vchannel not found: " + shown},
	} {
		err := Request(ctx10s(t), system.Root, pid, c.cmd)
		require.ErrorIs(t, err, messages.ErrVChannelNotFound, "%T", c.cmd)
		require.Equal(t, c.want, err.Error(), "%T", c.cmd)
	}
}

// loudSaves is a catalog whose saves fail with a megabyte of escapes.
type loudSaves struct{ persistence.Catalog }

var errLoud = errors.New("disk on fire" + strings.Repeat("\x1b", 1<<20))

func (loudSaves) Save(context.Context, string, wal.MessageID) error { return errLoud }

// A catalog's error reaches the log cut and quoted, and events whole: a
// failing save logged its megabyte on every retry, and a subscriber
// needs the error itself, for errors.Is.
func TestACatalogsErrorIsLoggedCut(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	system := quietSystem(t)
	failed := make(chan *messages.PersistFailed, 16)
	sub := system.EventStream.Subscribe(func(ev any) {
		if f, ok := ev.(*messages.PersistFailed); ok {
			select {
			case failed <- f:
			default:
			}
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	props, err := NewProps("p", wal.Kafka, loudSaves{persistence.NewMemory()}, WithVChannels(kafkaAt(1, 5)), WithLogger(zap.New(core)))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	for range 2 { // the first failure's log line is written before the retry fails
		select {
		case f := <-failed:
			require.ErrorIs(t, f.Err, errLoud)
		case <-time.After(10 * time.Second):
			t.Fatal("no PersistFailed within 10 s")
		}
	}
	logged := logs.FilterMessage("save failed").All()
	require.NotEmpty(t, logged)
	// What shows in 1 KiB, past lowwater's own longest message.
	require.Equal(t, strconv.Quote("disk on fire"+strings.Repeat("\x1b", 252))+"… (1048588 bytes)", logged[0].ContextMap()["error"])
}

// The vchannels given at spawn come back as given after the first
// tracker, which shares their names, added or dropped vchannels: a drop
// moves names around the tracker's table, an add writes into it, and
// neither may reach the names the spawn set keeps. Each goes first once,
// the first change being the one that must copy them.
func TestSpawnSetOutlivesChangesToTheTracker(t *testing.T) {
	given := make(map[string]wal.MessageID, 50)
	for i := range 50 {
		given[fmt.Sprintf("v%02d", i)] = wal.KafkaID(int64(i))
	}
	drop := func(t *testing.T, tr *tracker.Tracker) {
		for i := range 40 {
			_, err := tr.Drop(fmt.Sprintf("v%02d", i))
			require.NoError(t, err)
		}
	}
	add := func(t *testing.T, tr *tracker.Tracker) {
		for i := range 5 { // within the table's room: no resize, which would copy
			_, err := tr.Add(fmt.Sprintf("w%02d", i), wal.KafkaID(100))
			require.NoError(t, err)
		}
	}
	for name, changes := range map[string][]func(*testing.T, *tracker.Tracker){"drop first": {drop, add}, "add first": {add, drop}} {
		t.Run(name, func(t *testing.T) {
			from, err := newSpawn(wal.Kafka, given)
			require.NoError(t, err)
			tr := from.take(testPID("first")).tracker
			for _, change := range changes {
				change(t, tr)
			}
			require.Equal(t, 15, tr.Len())
			require.Equal(t, given, from.take(testPID("second")).tracker.Checkpoints(), "an actor with no tracker handed on starts from the vchannels given at spawn")
		})
	}
}

func testPID(id string) *actor.PID { return actor.NewPID("nonhost", id) }

// What a restarting actor hands on is its next incarnation's alone: an
// actor made from the same Props meanwhile (a SpawnNamed that fails on
// the taken name runs the producer all the same, and so does a second
// spawn) starts from the vchannels given at spawn, and the restarted one
// still finds its own. It used to take the first tracker handed on,
// whoever it was: the restarted actor then forgot the vchannels added
// since, and could save a minimum above one of them.
func TestHandedOnIsTheRestartedActorsAlone(t *testing.T) {
	given := map[string]wal.MessageID{"a": wal.KafkaID(100)}
	from, err := newSpawn(wal.Kafka, given)
	require.NoError(t, err)
	pc := testPID("pc")
	tr := from.take(pc).tracker
	_, err = tr.Add("low", wal.KafkaID(50))
	require.NoError(t, err)
	from.handOn(pc, handedOn{tracker: tr})

	other := from.take(testPID("pc-again")) // a failed SpawnNamed's actor, never started, or another
	require.False(t, other.restarted)
	require.Equal(t, given, other.tracker.Checkpoints())

	next := from.take(pc)
	require.True(t, next.restarted)
	require.Same(t, tr, next.tracker)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(100), "low": wal.KafkaID(50)}, next.tracker.Checkpoints())

	// A hand-on its actor stopped before taking is forgotten: the PID
	// spawned again later starts from the vchannels given at spawn.
	h := from.handOn(pc, handedOn{tracker: tr})
	from.forget(pc, h)
	require.Equal(t, given, from.take(pc).tracker.Checkpoints())
}

// A restart while someone keeps calling SpawnNamed with the pchannel's
// Props and name (a "make sure it runs" loop, each call failing on the
// taken name) keeps the vchannels added since the spawn: protoactor runs
// the producer of every such call, and it used to take the tracker the
// restarting actor handed on. The restarted actor then started from the
// vchannels given at spawn, without "low", and could save a minimum above
// it. It did in two runs of three.
func TestRestartKeepsItsVChannelsWhileSpawnNamedFails(t *testing.T) {
	system := quietSystem(t)
	recovered := make(chan struct{}, 4)
	sub := system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Recovered); ok {
			recovered <- struct{}{}
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(100)}))
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if m, ok := env.Message.(*messages.UpdateCheckpoint); ok && m != nil && m.VChannel == boomVChannel {
				panic("middleware bug")
			}
			next(c, env)
		}
	}))
	pid, err := system.Root.SpawnNamed(props, "pc")
	require.NoError(t, err)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	waitRecovered := func() {
		t.Helper()
		select {
		case <-recovered:
		case <-time.After(10 * time.Second):
			t.Fatal("no Recovered within 10 s")
		}
	}
	waitRecovered()
	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.AddVChannel{VChannel: "low", Checkpoint: wal.KafkaID(50)}))
	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.AddVChannel{VChannel: boomVChannel, Checkpoint: wal.KafkaID(60)}))

	stop := make(chan struct{})
	spawning := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				spawning <- nil
				return
			default:
			}
			if _, err := system.Root.SpawnNamed(props, "pc"); !errors.Is(err, actor.ErrNameExists) {
				spawning <- err
				return
			}
		}
	}()
	err = Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: boomVChannel, Checkpoint: wal.KafkaID(70)})
	require.ErrorIs(t, err, ErrPChannelPanicked)
	waitRecovered() // the restarted incarnation's
	close(stop)
	require.NoError(t, <-spawning)

	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(100), "low": wal.KafkaID(50), boomVChannel: wal.KafkaID(60)}, st.Checkpoints)
	require.Equal(t, wal.KafkaID(50), st.Minimum)
}

// lossyID is the ID of a registered WAL whose codec does not read back
// what it wrote: Marshal keeps the low byte only, and nothing for 0.
type lossyID int64

const lossyWAL wal.Name = "lossy-test"

func (lossyID) WALName() wal.Name          { return lossyWAL }
func (a lossyID) LT(o wal.MessageID) bool  { return a < o.(lossyID) }
func (a lossyID) LTE(o wal.MessageID) bool { return a <= o.(lossyID) }
func (a lossyID) EQ(o wal.MessageID) bool  { return a == o.(lossyID) }
func (a lossyID) String() string           { return fmt.Sprintf("%s:%d", lossyWAL, int64(a)) }
func (a lossyID) Marshal() []byte {
	if a == 0 {
		return nil
	}
	return []byte{byte(a)}
}

var registerLossy = sync.OnceValue(func() error {
	return wal.Register(lossyWAL, wal.Codec[lossyID]{
		Unmarshal: func(b []byte) (lossyID, error) {
			if len(b) != 1 {
				return 0, fmt.Errorf("want 1 byte, got %d", len(b))
			}
			return lossyID(b[0]), nil
		},
		Parse: func(s string) (lossyID, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			return lossyID(n), err
		},
	})
})

// An ID that does not read back as marshalled is refused where it comes
// in, with wal.ErrCorruptID, and changes nothing. Held, it became the
// minimum: bbolt stored lossy-test:300 as its low byte, and the next
// recovery read back 44, lower than the checkpoint acknowledged.
func TestIDsThatDoNotReadBackAreRefused(t *testing.T) {
	require.NoError(t, registerLossy())
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	bolt, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	system := quietSystem(t)
	props, err := NewProps("p", lossyWAL, bolt, WithVChannels(map[string]wal.MessageID{"a": lossyID(7)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	for _, cmd := range []messages.Command{
		&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: lossyID(300)},
		&messages.AddVChannel{VChannel: "b", Checkpoint: lossyID(0)},
	} {
		require.ErrorIs(t, Request(ctx10s(t), system.Root, pid, cmd), wal.ErrCorruptID, "%T", cmd)
	}
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": lossyID(7)}, st.Checkpoints)

	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: lossyID(9)}))
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	require.NoError(t, bolt.Close())
	bolt, err = persistence.OpenBolt(path)
	require.NoError(t, err)
	defer bolt.Close()
	got, err := bolt.Load(ctx10s(t), "p")
	require.NoError(t, err)
	require.Equal(t, lossyID(9), got)

	err = bolt.Save(ctx10s(t), "p", lossyID(300))
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	require.ErrorIs(t, err, wal.ErrCorruptID)
	got, err = bolt.Load(ctx10s(t), "p")
	require.NoError(t, err)
	require.Equal(t, lossyID(9), got, "a refused save changes nothing")
}

// notedID is a registered WAL's ID whose codec decodes a value it cannot
// encode: Marshal needs the note, which Unmarshal does not keep.
type notedID struct {
	pos  int64
	note string
}

const notedWAL wal.Name = "noted-test"

func (notedID) WALName() wal.Name          { return notedWAL }
func (a notedID) LT(o wal.MessageID) bool  { b, ok := o.(notedID); return ok && a.pos < b.pos }
func (a notedID) LTE(o wal.MessageID) bool { b, ok := o.(notedID); return ok && a.pos <= b.pos }
func (a notedID) EQ(o wal.MessageID) bool  { b, ok := o.(notedID); return ok && a.pos == b.pos }
func (a notedID) String() string           { return fmt.Sprintf("%s:%d", notedWAL, a.pos) }
func (a notedID) Marshal() []byte {
	if a.note == "" {
		panic("no note")
	}
	return []byte{byte(a.pos)}
}

var registerNoted = sync.OnceValue(func() error {
	return wal.Register(notedWAL, wal.Codec[notedID]{
		Unmarshal: func(b []byte) (notedID, error) {
			if len(b) != 1 {
				return notedID{}, fmt.Errorf("want 1 byte, got %d", len(b))
			}
			return notedID{pos: int64(b[0])}, nil
		},
		Parse: func(string) (notedID, error) { return notedID{}, nil },
	})
})

// A vchannel given at spawn whose ID reads back at its position, but as a
// value that cannot be marshalled again, is refused at NewProps: a restart
// with nothing handed on rebuilds the tracker from what it reads back, and
// would panic there, in the actor's producer.
func TestNewPropsRefusesIDsThatDoNotRebuild(t *testing.T) {
	require.NoError(t, registerNoted())
	_, err := NewProps("p", notedWAL, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": notedID{pos: 5, note: "x"}}))
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorIs(t, err, wal.ErrCorruptID)
	require.ErrorContains(t, err, "no note")
}

// vchannels given at spawn whose IDs do not read back are refused at
// NewProps: an actor made from the Props later (a second spawn, a restart
// with nothing handed on) decodes them, and its producer panicked in the
// caller's Spawn.
func TestNewPropsRefusesIDsThatDoNotReadBack(t *testing.T) {
	require.NoError(t, registerLossy())
	for _, c := range []struct {
		id   lossyID
		want string
	}{
		{0, `vchannel "a": lossy-test:0 does not read back as marshalled`},
		{300, `vchannel "a": wal: corrupt message ID: lossy-test:300 reads back as lossy-test:44`},
	} {
		_, err := NewProps("p", lossyWAL, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": c.id}))
		require.ErrorIs(t, err, ErrInvalidOption)
		require.ErrorContains(t, err, c.want)
	}
	_, err := NewProps("p", lossyWAL, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": lossyID(7)}))
	require.NoError(t, err, "one that reads back")
}

// fickleID is a registered WAL's ID whose codec stops reading what it
// wrote once fickleBroken is set: a third party's codec that is not the
// same from one call to the next.
type fickleID int64

const fickleWAL wal.Name = "fickle-test"

var fickleBroken atomic.Bool

func (fickleID) WALName() wal.Name          { return fickleWAL }
func (a fickleID) LT(o wal.MessageID) bool  { return a < o.(fickleID) }
func (a fickleID) LTE(o wal.MessageID) bool { return a <= o.(fickleID) }
func (a fickleID) EQ(o wal.MessageID) bool  { return a == o.(fickleID) }
func (a fickleID) String() string           { return fmt.Sprintf("%s:%d", fickleWAL, int64(a)) }
func (a fickleID) Marshal() []byte          { return []byte(strconv.FormatInt(int64(a), 10)) }

var registerFickle = sync.OnceValue(func() error {
	decode := func(s string) (fickleID, error) {
		if fickleBroken.Load() {
			return 0, errors.New("fickle codec: not today")
		}
		n, err := strconv.ParseInt(s, 10, 64)
		return fickleID(n), err
	}
	return wal.Register(fickleWAL, wal.Codec[fickleID]{
		Unmarshal: func(b []byte) (fickleID, error) { return decode(string(b)) },
		Parse:     decode,
	})
})

// A second actor spawned from the same Props rebuilds its vchannels from
// those given at spawn; should that fail (a codec that no longer reads
// what it wrote), the actor fails on its Started and its supervisor stops
// it, and Stopped says so. The Stopped handler, which took the actor for
// started, panicked on the tracker it never got, and no Stopped came.
func TestRebuildFailingAtStartIsTheActorsFailure(t *testing.T) {
	require.NoError(t, registerFickle())
	t.Cleanup(func() { fickleBroken.Store(false) })
	system := quietSystem(t)
	stopped := stoppedOf(t, system)
	props, err := NewProps("p", fickleWAL, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": fickleID(5)}))
	require.NoError(t, err)
	first := system.Root.Spawn(props) // takes the tracker built at NewProps
	st, err := GetState(ctx10s(t), system.Root, first)
	require.NoError(t, err)
	require.Equal(t, fickleID(5), st.Minimum)

	fickleBroken.Store(true)
	second := system.Root.Spawn(props)
	s := stopped() // the actor that could not start: none came before
	require.Equal(t, "p", s.PChannel)
	var failure *PChannelPanicError
	require.ErrorAs(t, s.Failure, &failure)
	require.Equal(t, "*actor.Started", failure.Command)
	require.Nil(t, s.LastPersisted)
	require.Nil(t, s.Dropped)
	require.NoError(t, system.Root.StopFuture(second).Wait())
	fickleBroken.Store(false)
	require.NoError(t, system.Root.PoisonFuture(first).Wait())
}
