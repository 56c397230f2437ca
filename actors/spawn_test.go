package actors

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/core/tracker"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// wideID is the ID of a registered WAL whose Marshal writes width bytes,
// its value in the first eight, and panics when width is negative.
type wideID struct {
	v     int64
	width int
}

const wideWAL wal.Name = "wide-test"

func (wideID) WALName() wal.Name          { return wideWAL }
func (a wideID) LT(o wal.MessageID) bool  { return a.v < o.(wideID).v }
func (a wideID) LTE(o wal.MessageID) bool { return a.v <= o.(wideID).v }
func (a wideID) EQ(o wal.MessageID) bool  { return a.v == o.(wideID).v }
func (a wideID) String() string           { return fmt.Sprintf("%s:%d", wideWAL, a.v) }
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
	given := map[string]wal.MessageID{"a": wideID{v: 1, width: 300}, "b": wideID{v: 2, width: 8}, "c": wideID{v: 3, width: 70000}}
	from, err := newSpawn(wideWAL, given)
	require.NoError(t, err)
	from.next.Store(nil) // as if no incarnation had handed one on
	require.Equal(t, given, from.take().tracker.Checkpoints())
}

// An ID whose Marshal panics is refused at NewProps, never a panic in the
// caller's goroutine.
func TestNewPropsRefusesAnIDWhoseMarshalPanics(t *testing.T) {
	require.NoError(t, registerWide())
	_, err := NewProps("p", wideWAL, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wideID{v: 1, width: -1}}))
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorIs(t, err, wal.ErrCorruptID)
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
			tr := from.take().tracker
			for _, change := range changes {
				change(t, tr)
			}
			require.Equal(t, 15, tr.Len())
			require.Equal(t, given, from.take().tracker.Checkpoints(), "a restart with no tracker handed on starts from the vchannels given at spawn")
		})
	}
}
