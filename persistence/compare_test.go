package persistence_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// panickyID is the ID of a WAL registered outside package wal whose
// comparison panics on one value, as a third-party ID type with a bug may:
// LT and EQ panic when either side is poisonID.
type panickyID int64

const (
	panickyWAL wal.Name  = "persistence-test-panicky"
	poisonID   panickyID = 666
)

// poisonCalm, while set, keeps poisonID's comparisons from panicking: a
// test stores it with it, as an older build could have, since a catalog
// now refuses a value that cannot be ordered against itself.
var poisonCalm atomic.Bool

func (panickyID) WALName() wal.Name { return panickyWAL }
func (a panickyID) LT(o wal.MessageID) bool {
	b := o.(panickyID)
	if !poisonCalm.Load() && (a == poisonID || b == poisonID) {
		panic("panickyID.LT: poisoned value")
	}
	return a < b
}
func (a panickyID) LTE(o wal.MessageID) bool { return !o.LT(a) }
func (a panickyID) EQ(o wal.MessageID) bool {
	b := o.(panickyID)
	if !poisonCalm.Load() && (a == poisonID || b == poisonID) {
		panic("panickyID.EQ: poisoned value")
	}
	return a == b
}
func (a panickyID) Marshal() []byte { return binary.BigEndian.AppendUint64(nil, uint64(a)) }
func (a panickyID) String() string  { return "panicky:" + strconv.FormatInt(int64(a), 10) }

func init() {
	err := wal.Register(panickyWAL, wal.Codec[panickyID]{
		Unmarshal: func(b []byte) (panickyID, error) {
			if len(b) != 8 {
				return 0, fmt.Errorf("%d bytes, want 8", len(b))
			}
			return panickyID(binary.BigEndian.Uint64(b)), nil
		},
		Parse: func(s string) (panickyID, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			return panickyID(n), err
		},
	})
	if err != nil {
		panic(err)
	}
}

// localStores opens each store of this package, empty, for one subtest.
var localStores = map[string]func(t *testing.T) persistence.Catalog{
	"memory": func(*testing.T) persistence.Catalog { return persistence.NewMemory() },
	"bolt": func(t *testing.T) persistence.Catalog {
		return openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"))
	},
	"bolt single commit": func(t *testing.T) persistence.Catalog {
		return openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"), persistence.WithGroupCommit(false))
	},
	"bolt group commit delay": func(t *testing.T) persistence.Catalog {
		return openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"),
			persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(time.Millisecond))
	},
}

// TestSaveComparePanicIsRefused saves values whose comparison with the
// stored one panics, the new value's fault or the stored one's: that save
// alone fails, as an invalid argument wrapping wal.ErrCorruptID that names
// the pchannel and both values; nothing is written, and the catalog goes on
// serving every pchannel. Bolt once took the panic for damage to its file
// (ErrCorruptStore, for every later call), and Memory let it escape.
func TestSaveComparePanicIsRefused(t *testing.T) {
	for name, open := range localStores {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			defer c.Close()
			ctx := context.Background()
			mustSaveID(t, c, "other", wal.KafkaID(1))
			mustSaveID(t, c, "p", panickyID(10))
			// The new value's comparison panics: it cannot be ordered
			// even against itself, and is refused before the stored one
			// is read, and where nothing is stored too.
			for _, pc := range []string{"p", "q"} {
				err := noPanic(t, "Save(666)", func() error { return c.Save(ctx, pc, poisonID) })
				want := fmt.Sprintf("persistence: invalid argument: pchannel %q: wal: corrupt message ID:"+
					" comparing panicky:666 with panicky:666 panicked: panickyID.LT: poisoned value", pc)
				if !errors.Is(err, persistence.ErrInvalidArgument) || !errors.Is(err, wal.ErrCorruptID) || err.Error() != want {
					t.Fatalf("Save(%q, 666) = %v, want %q", pc, err, want)
				}
			}
			wantLoad(t, c, "p", panickyID(10))
			wantLoad(t, c, "q", nil)
			// A poisoned value stored (by an older build, say): the next
			// save meets it as the stored one.
			func() {
				poisonCalm.Store(true)
				defer poisonCalm.Store(false)
				mustSaveID(t, c, "q", poisonID)
			}()
			err := noPanic(t, "Save(q, 5)", func() error { return c.Save(ctx, "q", panickyID(5)) })
			wantUnordered(t, err, "q", panickyID(5), poisonID)
			wantLoad(t, c, "q", poisonID)
			// Nothing else is harmed: every pchannel saves and loads.
			mustSaveID(t, c, "other", wal.KafkaID(2))
			mustSaveID(t, c, "p", panickyID(11))
			all, err := c.LoadAll(ctx)
			if err != nil {
				t.Fatalf("LoadAll = %v", err)
			}
			want := map[string]wal.MessageID{"other": wal.KafkaID(2), "p": panickyID(11), "q": poisonID}
			if len(all) != len(want) || all["other"] != want["other"] || all["p"] != want["p"] || all["q"] != want["q"] {
				t.Fatalf("LoadAll = %v, want %v", all, want)
			}
			if m, ok := c.(*persistence.Memory); ok {
				if got := m.History("p"); !slices.Equal(got, []wal.MessageID{panickyID(10), panickyID(11)}) {
					t.Fatalf("History(p) = %v, want [panicky:10 panicky:11]", got)
				}
			}
		})
	}
}

// wantUnordered checks the refusal of a save of attempted over stored whose
// comparison panicked.
func wantUnordered(t *testing.T, err error, pchannel string, attempted, stored wal.MessageID) {
	t.Helper()
	if !errors.Is(err, persistence.ErrInvalidArgument) || !errors.Is(err, wal.ErrCorruptID) {
		t.Fatalf("Save(%q, %s) over %s = %v, want ErrInvalidArgument wrapping wal.ErrCorruptID", pchannel, attempted, stored, err)
	}
	if errors.Is(err, persistence.ErrCorruptStore) || errors.Is(err, persistence.ErrStoredAhead) {
		t.Fatalf("Save(%q, %s) over %s = %v, which blames the store or another writer", pchannel, attempted, stored, err)
	}
	prefix := fmt.Sprintf("persistence: invalid argument: pchannel %q: %s cannot be ordered against the stored checkpoint %s: wal: corrupt message ID: ",
		pchannel, attempted, stored)
	if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), "panicked: panickyID.LT: poisoned value") {
		t.Fatalf("Save error = %q, want %q followed by the panic", err, prefix)
	}
}

func mustSaveID(t *testing.T, c persistence.Catalog, pchannel string, id wal.MessageID) {
	t.Helper()
	if err := c.Save(context.Background(), pchannel, id); err != nil {
		t.Fatalf("Save(%q, %s) = %v, want nil", pchannel, id, err)
	}
}

func wantLoad(t *testing.T, c persistence.Catalog, pchannel string, want wal.MessageID) {
	t.Helper()
	if got, err := c.Load(context.Background(), pchannel); err != nil || got != want {
		t.Fatalf("Load(%q) = (%v, %v), want %s", pchannel, got, err, want)
	}
}

// oddID's WALName panics on one value: Register calls it on the zero ID
// only. The stores name an ID's WAL by its type, never by WALName.
type oddID int64

const oddWAL wal.Name = "persistence-test-odd"

func (a oddID) WALName() wal.Name {
	if a == 666 {
		panic("WALName on a damaged ID")
	}
	return oddWAL
}
func (a oddID) LT(o wal.MessageID) bool  { return a < o.(oddID) }
func (a oddID) LTE(o wal.MessageID) bool { return a <= o.(oddID) }
func (a oddID) EQ(o wal.MessageID) bool  { return a == o.(oddID) }
func (a oddID) Marshal() []byte          { return binary.BigEndian.AppendUint64(nil, uint64(a)) }
func (a oddID) String() string           { return "odd:" + strconv.FormatInt(int64(a), 10) }

func init() {
	err := wal.Register(oddWAL, wal.Codec[oddID]{
		Unmarshal: func(b []byte) (oddID, error) { return oddID(binary.BigEndian.Uint64(b)), nil },
		Parse: func(s string) (oddID, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			return oddID(n), err
		},
	})
	if err != nil {
		panic(err)
	}
}

// A Save over a stored record never calls WALName: a panic there, inside
// Bolt's guard, marked the whole file damaged, and Memory let it escape.
func TestSaveNeverCallsWALName(t *testing.T) {
	for name, open := range localStores {
		t.Run(name, func(t *testing.T) {
			c := open(t)
			ctx := context.Background()
			if err := c.Save(ctx, "p", oddID(1)); err != nil {
				t.Fatal(err)
			}
			if err := c.Save(ctx, "p", oddID(666)); err != nil {
				t.Fatalf("Save(odd:666) = %v", err)
			}
			if err := c.Save(ctx, "other", wal.KafkaID(1)); err != nil {
				t.Fatalf("an unrelated Save afterwards = %v", err)
			}
			if got, err := c.Load(ctx, "p"); err != nil || got != oddID(666) {
				t.Errorf("Load = (%v, %v), want odd:666", got, err)
			}
		})
	}
}
