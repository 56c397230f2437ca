package persistence_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// sizedID is the ID of a registered WAL whose Marshal writes size bytes,
// its value in the first eight, and panics when size is negative.
type sizedID struct {
	v    int64
	size int
}

const sizedWAL wal.Name = "persistence-test-sized"

func (sizedID) WALName() wal.Name          { return sizedWAL }
func (a sizedID) LT(o wal.MessageID) bool  { return a.v < o.(sizedID).v }
func (a sizedID) LTE(o wal.MessageID) bool { return a.v <= o.(sizedID).v }
func (a sizedID) EQ(o wal.MessageID) bool  { return a.v == o.(sizedID).v }
func (a sizedID) String() string           { return fmt.Sprintf("%s:%d", sizedWAL, a.v) }
func (a sizedID) Marshal() []byte {
	if a.size < 0 {
		panic("sizedID.Marshal: bug")
	}
	return binary.BigEndian.AppendUint64(make([]byte, 0, max(a.size, 8)), uint64(a.v))[:max(a.size, 8)]
}

func init() {
	err := wal.Register(sizedWAL, wal.Codec[sizedID]{
		Unmarshal: func(b []byte) (sizedID, error) {
			if len(b) < 8 {
				return sizedID{}, fmt.Errorf("%d bytes, want 8 or more", len(b))
			}
			return sizedID{v: int64(binary.BigEndian.Uint64(b)), size: len(b)}, nil
		},
		Parse: func(s string) (sizedID, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			return sizedID{v: n, size: 8}, err
		},
	})
	if err != nil {
		panic(err)
	}
}

// A checkpoint whose Marshal panics, or whose bytes a record cannot hold,
// is an invalid argument: the store writes nothing and goes on serving.
// The panic used to escape Save; an ID of over 65,535 bytes was written
// with its length cut to 16 bits, a record no one could read back.
func TestSaveRefusesAnIDItCannotStore(t *testing.T) {
	for name, open := range localStores {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			ctx := context.Background()
			for _, bad := range []struct {
				id   sizedID
				want error
			}{
				{sizedID{v: 1, size: -1}, wal.ErrCorruptID},
				{sizedID{v: 1, size: 1 << 16}, persistence.ErrInvalidArgument},
			} {
				err := c.Save(ctx, "p", bad.id)
				if !errors.Is(err, persistence.ErrInvalidArgument) || !errors.Is(err, bad.want) {
					t.Errorf("Save(%+v) = %v, want ErrInvalidArgument wrapping %v", bad.id, err, bad.want)
				}
			}
			if got, err := c.Load(ctx, "p"); got != nil || err != nil {
				t.Errorf("Load = (%v, %v), want nothing stored", got, err)
			}
			big := sizedID{v: 2, size: 1<<16 - 1}
			if err := c.Save(ctx, "p", big); err != nil {
				t.Fatalf("Save of the largest ID a record holds = %v", err)
			}
			if got, err := c.Load(ctx, "p"); err != nil || got != big {
				t.Errorf("Load = (%v, %v), want %v back", got, err, big)
			}
		})
	}
}
