package actors

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// brittleID is the ID of a WAL whose comparison panics on brittleMark: a
// third-party ID type with a bug.
type brittleID int64

const (
	brittleWAL  wal.Name  = "brittle-test"
	brittleMark brittleID = 13
)

func (brittleID) WALName() wal.Name { return brittleWAL }
func (b brittleID) LT(o wal.MessageID) bool {
	if b == brittleMark || o.(brittleID) == brittleMark {
		panic("brittle comparison")
	}
	return b < o.(brittleID)
}
func (b brittleID) LTE(o wal.MessageID) bool { return !o.LT(b) }
func (b brittleID) EQ(o wal.MessageID) bool  { return b == o.(brittleID) }
func (b brittleID) Marshal() []byte          { return strconv.AppendInt(nil, int64(b), 10) }
func (b brittleID) String() string           { return fmt.Sprintf("%s:%d", brittleWAL, int64(b)) }

var registerBrittle = sync.OnceValue(func() error {
	parse := func(s string) (brittleID, error) { n, err := strconv.ParseInt(s, 10, 64); return brittleID(n), err }
	return wal.Register(brittleWAL, wal.Codec[brittleID]{
		Unmarshal: func(b []byte) (brittleID, error) { return parse(string(b)) },
		Parse:     parse,
	})
})

// spawnBrittle spawns a pchannel of the brittle WAL, tracking v at 1.
func spawnBrittle(t *testing.T) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	require.NoError(t, registerBrittle())
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	catalog := persistence.NewMemory()
	t.Cleanup(func() { _ = catalog.Close() })
	props, err := NewProps("p", brittleWAL, catalog, WithVChannels(map[string]wal.MessageID{"v": brittleID(1)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	return system, pid
}

// A request whose handling panics the pchannel is answered at once with a
// PChannelPanicError, and a Sender whose batch did so carries on once the
// pchannel has restarted.
func TestRequestThatPanicsThePChannelIsAnswered(t *testing.T) {
	system, pid := spawnBrittle(t)

	start := time.Now()
	err := Request(ctxtest.Within(time.Minute), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: brittleMark})
	require.ErrorIs(t, err, ErrPChannelPanicked)
	var pe *PChannelPanicError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, "*messages.UpdateCheckpoint", pe.Command)
	require.Less(t, time.Since(start), 30*time.Second, "answered at once, not at the deadline")

	s := newTestSender(t, system, pid)
	require.NoError(t, s.Update("v", brittleMark))
	require.ErrorIs(t, s.Flush(ctxtest.Within(time.Minute)), ErrPChannelPanicked)
	require.NoError(t, s.Update("v", brittleID(20)))
	require.NoError(t, s.Flush(ctx10s(t)))
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"v": brittleID(20)}, st.Checkpoints)
}

// An ID whose comparison panics in the producer's own Update is rejected
// as corrupt there; the Sender, and the pchannel it answers to, carry on.
func TestSenderRejectsAnIDWhoseComparisonPanics(t *testing.T) {
	system, pid := spawnBrittle(t)

	// A gate holds the first batch, so that later updates of v find one
	// waiting and are compared with it in Update.
	g := &gate{target: pid}
	gpid := system.Root.Spawn(g.props())
	t.Cleanup(func() { _ = system.Root.StopFuture(gpid).Wait() })
	s := newTestSender(t, system, gpid)
	require.NoError(t, s.Update("w", brittleID(2))) // shipped, held by the gate
	require.NoError(t, s.Update("v", brittleID(5))) // waits
	require.ErrorIs(t, s.Update("v", brittleMark), wal.ErrCorruptID)
	require.NoError(t, s.Update("v", brittleID(6)))
	system.Root.Send(gpid, gateRelease{})
	err := s.Flush(ctx10s(t)) // w is unknown to the pchannel
	require.ErrorIs(t, err, messages.ErrVChannelNotFound)
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"v": brittleID(6)}, st.Checkpoints)
}
