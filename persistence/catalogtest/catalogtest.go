// Package catalogtest is the contract test suite every persistence.Catalog
// must pass, so that memory, bbolt and etcd stores cannot drift apart. It
// knows nothing about any one store.
package catalogtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Run runs the contract against catalogs made by open. Each call of open
// must return a new, empty, open catalog; Run closes every one it gets.
func Run(t *testing.T, open func(t *testing.T) persistence.Catalog) {
	tests := []struct {
		name string
		run  func(t *testing.T, c persistence.Catalog)
	}{
		{"LoadAbsent", testLoadAbsent},
		{"SaveThenLoadEveryWAL", testSaveThenLoad},
		{"SaveEqualSucceeds", testSaveEqual},
		{"SaveLowerIsRefused", testSaveLower},
		{"SaveHigherIsStored", testSaveHigher},
		{"SaveOtherWALIsRefused", testSaveOtherWAL},
		{"InvalidArguments", testInvalidArguments},
		{"LoadAllManyPChannels", testLoadAll},
		{"ConcurrentSavesNeverGoBack", testConcurrentSaves},
		{"DoneContextWritesNothing", testDoneContext},
		{"CallsAfterClose", testClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := open(t)
			t.Cleanup(func() { _ = c.Close() })
			tt.run(t, c)
		})
	}
}

// pair is a low and a high checkpoint of one WAL.
type pair struct{ low, high wal.MessageID }

// pairs has one pair per WAL. The Pulsar pair puts the higher partition on
// the lower position: the partition is not part of the order.
func pairs() []pair {
	return []pair{
		{wal.KafkaID(10), wal.KafkaID(20)},
		{wal.RocksMQID(-5), wal.RocksMQID(3)},
		{wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 7}, wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 4, Partition: 0}},
		{wal.WoodpeckerID{SegmentID: 1, EntryID: 99}, wal.WoodpeckerID{SegmentID: 2, EntryID: 0}},
	}
}

func pchannelOf(id wal.MessageID) string { return "pch-" + id.WALName() }

func mustSave(t *testing.T, c persistence.Catalog, pchannel string, id wal.MessageID) {
	t.Helper()
	if err := c.Save(context.Background(), pchannel, id); err != nil {
		t.Fatalf("Save(%q, %s) = %v, want nil", pchannel, id, err)
	}
}

// wantStored checks the stored value exactly, every field included.
func wantStored(t *testing.T, c persistence.Catalog, pchannel string, want wal.MessageID) {
	t.Helper()
	got, err := c.Load(context.Background(), pchannel)
	if err != nil {
		t.Fatalf("Load(%q) = %v", pchannel, err)
	}
	if got != want {
		t.Fatalf("Load(%q) = %#v, want %#v", pchannel, got, want)
	}
}

func wantAll(t *testing.T, c persistence.Catalog, want map[string]wal.MessageID) {
	t.Helper()
	got, err := c.LoadAll(context.Background())
	if err != nil {
		t.Fatalf("LoadAll = %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("LoadAll has %d pchannels, want %d: %v", len(got), len(want), got)
	}
	for pchannel, id := range want {
		if got[pchannel] != id {
			t.Fatalf("LoadAll[%q] = %#v, want %#v", pchannel, got[pchannel], id)
		}
	}
}

func testLoadAbsent(t *testing.T, c persistence.Catalog) {
	wantStored(t, c, "absent", nil)
	wantAll(t, c, map[string]wal.MessageID{})
}

func testSaveThenLoad(t *testing.T, c persistence.Catalog) {
	want := map[string]wal.MessageID{}
	for _, p := range pairs() {
		mustSave(t, c, pchannelOf(p.low), p.low)
		wantStored(t, c, pchannelOf(p.low), p.low)
		want[pchannelOf(p.low)] = p.low
	}
	wantAll(t, c, want)
}

func testSaveEqual(t *testing.T, c persistence.Catalog) {
	for _, p := range pairs() {
		mustSave(t, c, pchannelOf(p.high), p.high)
		mustSave(t, c, pchannelOf(p.high), p.high)
		wantStored(t, c, pchannelOf(p.high), p.high)
	}
}

func testSaveLower(t *testing.T, c persistence.Catalog) {
	for _, p := range pairs() {
		pchannel := pchannelOf(p.high)
		mustSave(t, c, pchannel, p.high)
		err := c.Save(context.Background(), pchannel, p.low)
		if !errors.Is(err, persistence.ErrStoredAhead) {
			t.Fatalf("Save(%q, %s) over %s = %v, want ErrStoredAhead", pchannel, p.low, p.high, err)
		}
		var ahead *persistence.StoredAheadError
		if !errors.As(err, &ahead) {
			t.Fatalf("Save(%q, %s) = %v, want a *StoredAheadError", pchannel, p.low, err)
		}
		if ahead.PChannel != pchannel || ahead.Stored != p.high || ahead.Attempted != p.low {
			t.Fatalf("StoredAheadError = %+v, want {%q %s %s}", *ahead, pchannel, p.high, p.low)
		}
		wantStored(t, c, pchannel, p.high)
	}
}

func testSaveHigher(t *testing.T, c persistence.Catalog) {
	for _, p := range pairs() {
		mustSave(t, c, pchannelOf(p.low), p.low)
		mustSave(t, c, pchannelOf(p.low), p.high)
		wantStored(t, c, pchannelOf(p.low), p.high)
	}
}

func testSaveOtherWAL(t *testing.T, c persistence.Catalog) {
	mustSave(t, c, "p", wal.KafkaID(5))
	for _, other := range []wal.MessageID{wal.RocksMQID(6), wal.PulsarID{LedgerID: 9}, wal.WoodpeckerID{SegmentID: 9}} {
		if err := c.Save(context.Background(), "p", other); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("Save(%s) over a Kafka checkpoint = %v, want ErrInvalidArgument", other, err)
		}
	}
	wantStored(t, c, "p", wal.KafkaID(5))
}

// unknownID is a message ID of a WAL no catalog knows.
type unknownID struct{}

func (unknownID) WALName() string        { return "nats" }
func (unknownID) LT(wal.MessageID) bool  { return false }
func (unknownID) LTE(wal.MessageID) bool { return false }
func (unknownID) EQ(wal.MessageID) bool  { return false }
func (unknownID) Marshal() []byte        { return []byte{1} }
func (unknownID) String() string         { return "nats:1" }

func testInvalidArguments(t *testing.T, c persistence.Catalog) {
	ctx := context.Background()
	saves := []struct {
		pchannel string
		id       wal.MessageID
	}{
		{"", wal.KafkaID(1)},
		{"p", nil},
		{"p", unknownID{}},
		{"p", (*wal.KafkaID)(nil)}, // methods of a typed nil panic
		{"p", new(wal.KafkaID)},
	}
	for _, s := range saves {
		if err := c.Save(ctx, s.pchannel, s.id); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Errorf("Save(%q, %T) = %v, want ErrInvalidArgument", s.pchannel, s.id, err)
		}
	}
	if id, err := c.Load(ctx, ""); !errors.Is(err, persistence.ErrInvalidArgument) || id != nil {
		t.Errorf("Load(\"\") = (%v, %v), want ErrInvalidArgument", id, err)
	}
	wantAll(t, c, map[string]wal.MessageID{})
}

func testLoadAll(t *testing.T, c persistence.Catalog) {
	want := make(map[string]wal.MessageID, 50)
	for i := range 50 {
		var id wal.MessageID
		switch n := int64(i); i % 4 {
		case 0:
			id = wal.KafkaID(n)
		case 1:
			id = wal.RocksMQID(n * 1000)
		case 2:
			id = wal.PulsarID{LedgerID: n, EntryID: n + 1, BatchIndex: int32(i), Partition: int32(i % 3)}
		default:
			id = wal.WoodpeckerID{SegmentID: n, EntryID: -n}
		}
		pchannel := fmt.Sprintf("by-dev-rootcoord-dml_%02d", i)
		mustSave(t, c, pchannel, id)
		want[pchannel] = id
	}
	wantAll(t, c, want)
}

// testConcurrentSaves races several writers of interleaved increasing values
// against a reader, as two persisters that both believe they own a pchannel
// would. Every refusal must name a value above the refused one, the reader
// must never see the value go down, and the highest value must win.
func testConcurrentSaves(t *testing.T, c persistence.Catalog) {
	const writers, perWriter = 4, 100
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				id := wal.KafkaID(i*writers + w + 1)
				err := c.Save(ctx, "p", id)
				var ahead *persistence.StoredAheadError
				switch {
				case err == nil:
				case errors.As(err, &ahead):
					if !id.LT(ahead.Stored) {
						t.Errorf("Save(%s) refused with stored %s, which is not above it", id, ahead.Stored)
					}
				default:
					t.Errorf("Save(%s) = %v", id, err)
				}
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var last wal.MessageID
		for {
			select {
			case <-writersDone:
				return
			default:
			}
			got, err := c.Load(ctx, "p")
			if err != nil {
				t.Errorf("Load = %v", err)
				return
			}
			if wal.Less(got, last) {
				t.Errorf("stored checkpoint went back from %s to %s", wal.String(last), wal.String(got))
				return
			}
			last = got
		}
	}()
	waitFor(t, readerDone, "the writers and the reader")
	wantStored(t, c, "p", wal.KafkaID(writers*perWriter))
}

// waitFor bounds a wait so that a deadlock fails the test instead of hanging
// it.
func waitFor(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not finish within a minute", what)
	}
}

func testDoneContext(t *testing.T, c persistence.Catalog) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, tc := range []struct {
		ctx  context.Context
		want error
	}{
		{cancelled, context.Canceled},
		{expired, context.DeadlineExceeded},
	} {
		if err := c.Save(tc.ctx, "p", wal.KafkaID(1)); !errors.Is(err, tc.want) {
			t.Errorf("Save = %v, want %v", err, tc.want)
		}
		if id, err := c.Load(tc.ctx, "p"); !errors.Is(err, tc.want) || id != nil {
			t.Errorf("Load = (%v, %v), want %v", id, err, tc.want)
		}
		if all, err := c.LoadAll(tc.ctx); !errors.Is(err, tc.want) || all != nil {
			t.Errorf("LoadAll = (%v, %v), want %v", all, err, tc.want)
		}
	}
	wantAll(t, c, map[string]wal.MessageID{})
}

func testClosed(t *testing.T, c persistence.Catalog) {
	mustSave(t, c, "p", wal.KafkaID(1))
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	ctx := context.Background()
	if err := c.Save(ctx, "p", wal.KafkaID(2)); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("Save after Close = %v, want ErrClosed", err)
	}
	if id, err := c.Load(ctx, "p"); !errors.Is(err, persistence.ErrClosed) || id != nil {
		t.Errorf("Load after Close = (%v, %v), want ErrClosed", id, err)
	}
	if all, err := c.LoadAll(ctx); !errors.Is(err, persistence.ErrClosed) || all != nil {
		t.Errorf("LoadAll after Close = (%v, %v), want ErrClosed", all, err)
	}
	if err := c.Close(); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}
