package tracker

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"testing"
	"testing/quick"

	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// walCase describes how a test builds IDs of one WAL.
type walCase struct {
	name wal.Name
	// id maps v to an ID; it is strictly increasing in v. salt may change the
	// ID's bytes but never its order (Pulsar's partition is not ordered).
	id func(v, salt int64) wal.MessageID
	// foreign is an ID of another WAL.
	foreign wal.MessageID
}

var walCases = []walCase{
	{
		name:    wal.Kafka,
		id:      func(v, _ int64) wal.MessageID { return wal.KafkaID(v) },
		foreign: wal.PulsarID{LedgerID: 1},
	},
	{
		name: wal.Pulsar,
		id: func(v, salt int64) wal.MessageID {
			return wal.PulsarID{LedgerID: v / 8, EntryID: (v % 8) / 2, BatchIndex: int32(v % 2), Partition: int32(salt)}
		},
		foreign: wal.KafkaID(1),
	},
	{
		// Same underlying type as Kafka's ID, another WAL.
		name:    wal.RocksMQ,
		id:      func(v, _ int64) wal.MessageID { return wal.RocksMQID(v) },
		foreign: wal.KafkaID(1),
	},
	{
		name:    wal.Woodpecker,
		id:      func(v, _ int64) wal.MessageID { return wal.WoodpeckerID{SegmentID: v / 4, EntryID: v % 4} },
		foreign: wal.RocksMQID(1),
	},
}

func caseFor(tb testing.TB, walName wal.Name) walCase {
	tb.Helper()
	for _, wc := range walCases {
		if wc.name == walName {
			return wc
		}
	}
	tb.Fatalf("no test case for WAL %q", walName)
	return walCase{}
}

// fakeID is a MessageID type the wal package does not know.
type fakeID struct{}

func (fakeID) WALName() wal.Name      { return wal.Kafka }
func (fakeID) LT(wal.MessageID) bool  { return false }
func (fakeID) LTE(wal.MessageID) bool { return true }
func (fakeID) EQ(wal.MessageID) bool  { return true }
func (fakeID) Marshal() []byte        { return nil }
func (fakeID) String() string         { return "fake" }

// fataler is the part of testing.TB and *rapid.T the helpers need.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

func newTracker(tb fataler, walName wal.Name) *Tracker {
	tb.Helper()
	tr, err := New(walName)
	if err != nil {
		tb.Fatalf("New(%q): %v", walName, err)
	}
	return tr
}

func mustAdd(tb fataler, tr *Tracker, vchannel string, cp wal.MessageID) bool {
	tb.Helper()
	advanced, err := tr.Add(vchannel, cp)
	if err != nil {
		tb.Fatalf("Add(%q, %s): %v", vchannel, wal.String(cp), err)
	}
	return advanced
}

func mustUpdate(tb fataler, tr *Tracker, vchannel string, cp wal.MessageID) bool {
	tb.Helper()
	advanced, err := tr.Update(vchannel, cp)
	if err != nil {
		tb.Fatalf("Update(%q, %s): %v", vchannel, wal.String(cp), err)
	}
	return advanced
}

func mustDrop(tb fataler, tr *Tracker, vchannel string) bool {
	tb.Helper()
	advanced, err := tr.Drop(vchannel)
	if err != nil {
		tb.Fatalf("Drop(%q): %v", vchannel, err)
	}
	return advanced
}

// wantMin fails unless the tracker's minimum is exactly want (nil included).
func wantMin(tb fataler, tr *Tracker, want wal.MessageID) {
	tb.Helper()
	if got := tr.Minimum(); got != want {
		tb.Fatalf("Minimum() = %s, want %s", wal.String(got), wal.String(want))
	}
}

// wantRejected fails unless err matches target and advanced is false.
func wantRejected(tb fataler, op string, advanced bool, err, target error) {
	tb.Helper()
	if !errors.Is(err, target) {
		tb.Fatalf("%s: err = %v, want %v", op, err, target)
	}
	if advanced {
		tb.Fatalf("%s: rejected but reported advanced", op)
	}
}

// state is everything observable about a tracker.
type state struct {
	min wal.MessageID
	len int
	cps map[string]wal.MessageID
}

func snapshot(tr *Tracker) state {
	return state{min: tr.Minimum(), len: tr.Len(), cps: tr.Checkpoints()}
}

// wantUnchanged fails unless the tracker still shows the snapshot exactly.
func wantUnchanged(tb fataler, op string, tr *Tracker, before state) {
	tb.Helper()
	after := snapshot(tr)
	if after.min != before.min {
		tb.Fatalf("%s: Minimum changed from %s to %s", op, wal.String(before.min), wal.String(after.min))
	}
	if after.len != before.len {
		tb.Fatalf("%s: Len changed from %d to %d", op, before.len, after.len)
	}
	if !sameCheckpoints(after.cps, before.cps) {
		tb.Fatalf("%s: Checkpoints changed from %v to %v", op, before.cps, after.cps)
	}
	if err := checkHeap(tr); err != nil {
		tb.Fatalf("%s: %v", op, err)
	}
}

func sameCheckpoints(a, b map[string]wal.MessageID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v != w {
			return false
		}
	}
	return true
}

// checkHeap returns an error unless the tracker's internal invariants hold:
// heap and heapSlot are as long, pos[heapSlot[i]] == i, no child is below
// its parent, and the slots are a hash table of a power-of-two size with
// room to spare, holding every vchannel of the heap once, each reachable
// from its name.
func checkHeap(tr *Tracker) error {
	n, size := len(tr.heap), len(tr.names)
	if len(tr.heapSlot) != n {
		return fmt.Errorf("heap: lengths heap %d, heapSlot %d", n, len(tr.heapSlot))
	}
	if size == 0 || size&(size-1) != 0 || size*7 < (n+1)*8 || len(tr.pos) != size {
		return fmt.Errorf("slots: %d names and %d pos for %d vchannels", size, len(tr.pos), n)
	}
	for i, cp := range tr.heap {
		if cp == nil {
			return fmt.Errorf("heap: nil checkpoint at %d", i)
		}
		s := tr.heapSlot[i]
		if s < 0 || int(s) >= size || tr.names[s] == "" {
			return fmt.Errorf("heap: item at %d names slot %d of %d, a free one or none", i, s, size)
		}
		if int(tr.pos[s]) != i {
			return fmt.Errorf("heap: item %q at %d has pos %d", tr.names[s], i, tr.pos[s])
		}
		if i > 0 {
			parent := (i - 1) / 2
			if cp.LT(tr.heap[parent]) {
				return fmt.Errorf("heap: child %q %s at %d below parent %q %s at %d",
					tr.names[s], cp, i, tr.names[tr.heapSlot[parent]], tr.heap[parent], parent)
			}
		}
	}
	used := 0
	for s, name := range tr.names {
		if name == "" {
			if tr.pos[s] != 0 {
				return fmt.Errorf("slots: free slot %d has pos %d", s, tr.pos[s])
			}
			continue
		}
		used++
		if got, ok := tr.lookup(name); !ok || int(got) != s {
			return fmt.Errorf("slots: %q found at slot %d (%v), want %d", name, got, ok, s)
		}
	}
	if used != n {
		return fmt.Errorf("slots: %d used for %d vchannels", used, n)
	}
	return nil
}

// linearMin is the dumb minimum: a scan of every checkpoint.
func linearMin(cps map[string]wal.MessageID) wal.MessageID {
	var m wal.MessageID
	for _, cp := range cps {
		if m == nil || cp.LT(m) {
			m = cp
		}
	}
	return m
}

// rose is the documented meaning of advanced: the minimum strictly rose,
// with no minimum (nil) below every checkpoint.
func rose(before, after wal.MessageID) bool {
	switch {
	case after == nil:
		return false
	case before == nil:
		return true
	default:
		return before.LT(after)
	}
}

// --- Reference scenarios -----------------------------------------------------

func TestNewUnknownWAL(t *testing.T) {
	for _, name := range []wal.Name{"nope", "", "Kafka"} {
		tr, err := New(name)
		if !errors.Is(err, wal.ErrUnknownWAL) {
			t.Fatalf("New(%q): err = %v, want %v", name, err, wal.ErrUnknownWAL)
		}
		if tr != nil {
			t.Fatalf("New(%q) returned a tracker with an error", name)
		}
	}
	for _, name := range wal.Names() {
		tr := newTracker(t, name)
		if tr.Len() != 0 || tr.Minimum() != nil || len(tr.Checkpoints()) != 0 {
			t.Fatalf("New(%q) is not empty", name)
		}
	}
}

func TestMinimumOfManyVChannels(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(wc.name))))
			tr := newTracker(t, wc.name)
			var want wal.MessageID
			wantCps := make(map[string]wal.MessageID, 1000)
			for i := range 1000 {
				name := fmt.Sprintf("vchannel-%d", i)
				cp := wc.id(rng.Int64N(1_000_000)+10, rng.Int64N(4))
				mustAdd(t, tr, name, cp)
				wantCps[name] = cp
				if want == nil || cp.LT(want) {
					want = cp
				}
			}
			wantMin(t, tr, want)
			if tr.Len() != 1000 {
				t.Fatalf("Len() = %d, want 1000", tr.Len())
			}
			if !sameCheckpoints(tr.Checkpoints(), wantCps) {
				t.Fatal("Checkpoints() differ from what was added")
			}
			for name, cp := range wantCps {
				if got, ok := tr.Get(name); !ok || got != cp {
					t.Fatalf("Get(%q) = %s, %v, want %s, true", name, wal.String(got), ok, cp)
				}
			}
			if err := checkHeap(tr); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAddExistingRejected(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			mustAdd(t, tr, "a", wc.id(20, 0))
			mustAdd(t, tr, "b", wc.id(30, 0))
			before := snapshot(tr)
			// Equal, higher and lower (which would lower the minimum) are all
			// rejected alike.
			for _, v := range []int64{20, 40, 5} {
				advanced, err := tr.Add("a", wc.id(v, 1))
				wantRejected(t, "duplicate Add", advanced, err, messages.ErrVChannelExists)
				wantUnchanged(t, "duplicate Add", tr, before)
			}
		})
	}
}

func TestUpdateUnknownRejected(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			advanced, err := tr.Update("ghost", wc.id(1, 0))
			wantRejected(t, "Update on empty", advanced, err, messages.ErrVChannelNotFound)
			wantUnchanged(t, "Update on empty", tr, state{})

			mustAdd(t, tr, "a", wc.id(10, 0))
			before := snapshot(tr)
			advanced, err = tr.Update("ghost", wc.id(100, 0))
			wantRejected(t, "Update unknown", advanced, err, messages.ErrVChannelNotFound)
			wantUnchanged(t, "Update unknown", tr, before)
			if _, ok := tr.Get("ghost"); ok {
				t.Fatal("a rejected Update created the vchannel")
			}
		})
	}
}

func TestDropUnknownRejected(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			advanced, err := tr.Drop("ghost")
			wantRejected(t, "Drop on empty", advanced, err, messages.ErrVChannelNotFound)
			wantUnchanged(t, "Drop on empty", tr, state{})

			mustAdd(t, tr, "a", wc.id(10, 0))
			mustAdd(t, tr, "b", wc.id(20, 0))
			before := snapshot(tr)
			advanced, err = tr.Drop("ghost")
			wantRejected(t, "Drop unknown", advanced, err, messages.ErrVChannelNotFound)
			wantUnchanged(t, "Drop unknown", tr, before)

			// A dropped vchannel is unknown afterwards.
			mustDrop(t, tr, "b")
			before = snapshot(tr)
			advanced, err = tr.Drop("b")
			wantRejected(t, "second Drop", advanced, err, messages.ErrVChannelNotFound)
			wantUnchanged(t, "second Drop", tr, before)
			advanced, err = tr.Update("b", wc.id(30, 0))
			wantRejected(t, "Update after Drop", advanced, err, messages.ErrVChannelNotFound)
			wantUnchanged(t, "Update after Drop", tr, before)
		})
	}
}

func TestTiedMinimumRisesOnlyWhenAllAdvance(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			tied := []string{"t0", "t1", "t2", "t3", "t4"}
			for i, name := range tied {
				mustAdd(t, tr, name, wc.id(10, int64(i%3)))
			}
			for i := range 5 {
				mustAdd(t, tr, fmt.Sprintf("high%d", i), wc.id(50+int64(i), 0))
			}
			low := wc.id(10, 0)

			// One alone moving, even far, leaves the minimum where it is.
			if mustUpdate(t, tr, "t2", wc.id(100, 0)) {
				t.Fatal("updating one of five tied vchannels reported advanced")
			}
			if !tr.Minimum().EQ(low) {
				t.Fatalf("Minimum() = %s, want %s", tr.Minimum(), low)
			}

			// Every other tied one moves: advanced only on the last.
			rest := []string{"t0", "t4", "t1", "t3"}
			for i, name := range rest {
				advanced := mustUpdate(t, tr, name, wc.id(20+int64(i), 0))
				last := i == len(rest)-1
				if advanced != last {
					t.Fatalf("update %d of %d tied vchannels: advanced = %v, want %v", i+1, len(rest), advanced, last)
				}
				if !last && !tr.Minimum().EQ(low) {
					t.Fatalf("minimum moved before every tied vchannel advanced: %s", tr.Minimum())
				}
			}
			wantMin(t, tr, wc.id(20, 0)) // t0 is now alone at the minimum
			if err := checkHeap(tr); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRollbackRejected(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			mustAdd(t, tr, "slow", wc.id(10, 0))
			mustAdd(t, tr, "fast", wc.id(40, 0))
			before := snapshot(tr)
			for _, c := range []struct {
				vchannel string
				v        int64
			}{{"slow", 9}, {"slow", 0}, {"fast", 39}, {"fast", 11}, {"fast", 5}} {
				op := fmt.Sprintf("Update(%s, %d)", c.vchannel, c.v)
				advanced, err := tr.Update(c.vchannel, wc.id(c.v, 0))
				wantRejected(t, op, advanced, err, messages.ErrCheckpointRollback)
				wantUnchanged(t, op, tr, before)
			}
		})
	}
}

func TestEqualUpdateAccepted(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			mustAdd(t, tr, "a", wc.id(10, 0))
			mustAdd(t, tr, "b", wc.id(20, 0))
			before := snapshot(tr)
			for _, name := range []string{"a", "b"} {
				cp, _ := tr.Get(name)
				advanced, err := tr.Update(name, cp)
				if err != nil || advanced {
					t.Fatalf("equal Update(%q): advanced = %v, err = %v; want false, nil", name, advanced, err)
				}
				wantUnchanged(t, "equal Update", tr, before)
			}
			// An ID equal in order but with other bytes (Pulsar's partition)
			// is an equal update too: the stored ID stays as it was.
			advanced, err := tr.Update("a", wc.id(10, 3))
			if err != nil || advanced {
				t.Fatalf("order-equal Update: advanced = %v, err = %v; want false, nil", advanced, err)
			}
			wantUnchanged(t, "order-equal Update", tr, before)
		})
	}
}

func TestRandomUpdatesNeverLowerMinimum(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, uint64(len(wc.name))))
			tr := newTracker(t, wc.name)
			const n = 100
			vals := make([]int64, n)
			for i := range n {
				vals[i] = rng.Int64N(50)
				mustAdd(t, tr, fmt.Sprintf("v%d", i), wc.id(vals[i], 0))
			}
			prev := tr.Minimum()
			rises := 0
			for range 1000 {
				i := rng.IntN(n)
				vals[i] += rng.Int64N(5) // zero included: equal updates
				advanced := mustUpdate(t, tr, fmt.Sprintf("v%d", i), wc.id(vals[i], rng.Int64N(3)))
				cur := tr.Minimum()
				if cur.LT(prev) {
					t.Fatalf("minimum went down from %s to %s", prev, cur)
				}
				if want := prev.LT(cur); advanced != want {
					t.Fatalf("advanced = %v, but the minimum went from %s to %s", advanced, prev, cur)
				}
				if advanced {
					rises++
				}
				want := wc.id(slices.Min(vals), 0)
				if !cur.EQ(want) {
					t.Fatalf("Minimum() = %s, want %s", cur, want)
				}
				prev = cur
			}
			if rises == 0 {
				t.Fatal("the minimum never rose in 1000 updates: the test proves nothing")
			}
			if err := checkHeap(tr); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDropAll(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(len(wc.name))))
			tr := newTracker(t, wc.name)
			const n = 200
			names := make([]string, n)
			for i := range n {
				names[i] = fmt.Sprintf("v%d", i)
				mustAdd(t, tr, names[i], wc.id(rng.Int64N(100), 0))
			}
			rng.Shuffle(n, func(i, j int) { names[i], names[j] = names[j], names[i] })
			for i, name := range names {
				before := tr.Minimum()
				advanced := mustDrop(t, tr, name)
				after := tr.Minimum()
				if want := rose(before, after); advanced != want {
					t.Fatalf("Drop(%q): advanced = %v, minimum went from %s to %s", name, advanced, before, wal.String(after))
				}
				if tr.Len() != n-i-1 {
					t.Fatalf("Len() = %d after %d drops, want %d", tr.Len(), i+1, n-i-1)
				}
				if _, ok := tr.Get(name); ok {
					t.Fatalf("Get(%q) found a dropped vchannel", name)
				}
				if err := checkHeap(tr); err != nil {
					t.Fatal(err)
				}
			}
			wantMin(t, tr, nil)
			if tr.Len() != 0 || len(tr.Checkpoints()) != 0 {
				t.Fatalf("after dropping all: Len() = %d, Checkpoints() = %v", tr.Len(), tr.Checkpoints())
			}
			// The tracker is usable again, and the first Add advances.
			if !mustAdd(t, tr, names[0], wc.id(7, 0)) {
				t.Fatal("the first Add after dropping all did not report advanced")
			}
			wantMin(t, tr, wc.id(7, 0))
		})
	}
}

func TestDropLastIsNotAdvance(t *testing.T) {
	tr := newTracker(t, wal.Kafka)
	mustAdd(t, tr, "only", wal.KafkaID(5))
	if mustDrop(t, tr, "only") {
		t.Fatal("dropping the last vchannel reported advanced: no minimum is not a rise")
	}
	wantMin(t, tr, nil)
}

func TestAddAdvancesOnlyWhenFirst(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			if !mustAdd(t, tr, "first", wc.id(50, 0)) {
				t.Fatal("the first Add did not report advanced")
			}
			wantMin(t, tr, wc.id(50, 0))
			for i, v := range []int64{60, 50, 100, 40, 45, 10, 1000} {
				if mustAdd(t, tr, fmt.Sprintf("v%d", i), wc.id(v, 0)) {
					t.Fatalf("Add #%d (%d) reported advanced", i+2, v)
				}
			}
			// The Adds of 40 and 10 lowered the minimum.
			wantMin(t, tr, wc.id(10, 0))
		})
	}
}

func TestAddLowersMinimum(t *testing.T) {
	tr := newTracker(t, wal.Pulsar)
	mustAdd(t, tr, "a", wal.PulsarID{LedgerID: 5, EntryID: 3})
	mustAdd(t, tr, "b", wal.PulsarID{LedgerID: 6})
	low := wal.PulsarID{LedgerID: 5, EntryID: 2, BatchIndex: 9}
	if mustAdd(t, tr, "late", low) {
		t.Fatal("an Add that lowers the minimum reported advanced")
	}
	wantMin(t, tr, low)
}

func TestDropSlowest(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			mustAdd(t, tr, "slow", wc.id(10, 0))
			mustAdd(t, tr, "mid1", wc.id(20, 0))
			mustAdd(t, tr, "mid2", wc.id(20, 1))
			mustAdd(t, tr, "fast", wc.id(30, 0))

			if mustDrop(t, tr, "fast") {
				t.Fatal("dropping a vchannel above the minimum reported advanced")
			}
			wantMin(t, tr, wc.id(10, 0))

			if !mustDrop(t, tr, "slow") {
				t.Fatal("dropping the only slowest vchannel did not report advanced")
			}
			if !tr.Minimum().EQ(wc.id(20, 0)) {
				t.Fatalf("Minimum() = %s, want %s", tr.Minimum(), wc.id(20, 0))
			}

			// Two tied at the minimum: dropping one leaves it where it is.
			if mustDrop(t, tr, "mid1") {
				t.Fatal("dropping one of two tied slowest vchannels reported advanced")
			}
			wantMin(t, tr, wc.id(20, 1))
		})
	}
}

func TestValidation(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			mustAdd(t, tr, "a", wc.id(10, 0))
			mustAdd(t, tr, "b", wc.id(20, 0))
			before := snapshot(tr)
			ok := wc.id(30, 0)
			for _, c := range []struct {
				op     string
				call   func() (bool, error)
				target error
			}{
				{"Add nil", func() (bool, error) { return tr.Add("c", nil) }, messages.ErrNilCheckpoint},
				{"Update nil", func() (bool, error) { return tr.Update("a", nil) }, messages.ErrNilCheckpoint},
				{"Update unknown nil", func() (bool, error) { return tr.Update("c", nil) }, messages.ErrNilCheckpoint},
				{"Add empty", func() (bool, error) { return tr.Add("", ok) }, messages.ErrEmptyVChannel},
				{"Update empty", func() (bool, error) { return tr.Update("", ok) }, messages.ErrEmptyVChannel},
				{"Drop empty", func() (bool, error) { return tr.Drop("") }, messages.ErrEmptyVChannel},
				{"Add empty nil", func() (bool, error) { return tr.Add("", nil) }, messages.ErrEmptyVChannel},
				{"Add foreign", func() (bool, error) { return tr.Add("c", wc.foreign) }, wal.ErrWALMismatch},
				{"Update foreign", func() (bool, error) { return tr.Update("a", wc.foreign) }, wal.ErrWALMismatch},
				{"Add foreign same name", func() (bool, error) { return tr.Add("a", wc.foreign) }, messages.ErrWALMismatch},
				{"Add unknown type", func() (bool, error) { return tr.Add("c", fakeID{}) }, wal.ErrWALMismatch},
				{"Update unknown type", func() (bool, error) { return tr.Update("a", fakeID{}) }, wal.ErrWALMismatch},
			} {
				advanced, err := c.call()
				wantRejected(t, c.op, advanced, err, c.target)
				wantUnchanged(t, c.op, tr, before)
			}
			if err := tr.Validate("c", ok); err != nil {
				t.Fatalf("Validate of a good checkpoint: %v", err)
			}
		})
	}
}

func TestKafkaTrackerRejectsPulsarID(t *testing.T) {
	tr := newTracker(t, wal.Kafka)
	advanced, err := tr.Add("v", wal.PulsarID{LedgerID: 1, EntryID: 2})
	wantRejected(t, "Add pulsar ID to kafka", advanced, err, wal.ErrWALMismatch)
	wantUnchanged(t, "Add pulsar ID to kafka", tr, state{})
	// RocksMQ and Kafka IDs are both int64 underneath, yet not comparable.
	advanced, err = tr.Add("v", wal.RocksMQID(3))
	wantRejected(t, "Add rocksmq ID to kafka", advanced, err, wal.ErrWALMismatch)
}

func TestCheckpointsIsACopy(t *testing.T) {
	tr := newTracker(t, wal.Kafka)
	mustAdd(t, tr, "a", wal.KafkaID(1))
	before := snapshot(tr)
	cps := tr.Checkpoints()
	cps["a"] = wal.KafkaID(100)
	cps["b"] = wal.KafkaID(2)
	delete(cps, "a")
	wantUnchanged(t, "mutating Checkpoints()", tr, before)
}

func TestUpdateDoesNotAllocate(t *testing.T) {
	const n, runs = 1000, 2000
	tr := newTracker(t, wal.Kafka)
	names := benchNames(n)
	ids := make([]wal.MessageID, n+runs+1)
	for i := range ids {
		ids[i] = wal.KafkaID(i)
	}
	for i := range n {
		mustAdd(t, tr, names[i], ids[i])
	}
	k := n
	allocs := testing.AllocsPerRun(runs, func() {
		if _, err := tr.Update(names[k%n], ids[k]); err != nil {
			t.Fatal(err)
		}
		k++
	})
	if allocs != 0 {
		t.Fatalf("Update allocates %v times per call, want 0", allocs)
	}
}

// --- Model-based property test -----------------------------------------------

// model is the obvious implementation: a map and a linear scan.
type model struct {
	walName wal.Name
	cps     map[string]wal.MessageID
	vals    map[string]int64 // the v each checkpoint was built from
}

func (m *model) validate(vchannel string, cp wal.MessageID) error {
	switch {
	case vchannel == "":
		return messages.ErrEmptyVChannel
	case cp == nil:
		return messages.ErrNilCheckpoint
	case cp.WALName() != m.walName:
		return wal.ErrWALMismatch
	}
	return nil
}

func (m *model) add(vchannel string, cp wal.MessageID, v int64) error {
	if err := m.validate(vchannel, cp); err != nil {
		return err
	}
	if _, ok := m.cps[vchannel]; ok {
		return messages.ErrVChannelExists
	}
	m.cps[vchannel], m.vals[vchannel] = cp, v
	return nil
}

func (m *model) update(vchannel string, cp wal.MessageID, v int64) error {
	if err := m.validate(vchannel, cp); err != nil {
		return err
	}
	cur, ok := m.cps[vchannel]
	switch {
	case !ok:
		return messages.ErrVChannelNotFound
	case cp.LT(cur):
		return messages.ErrCheckpointRollback
	case cp.EQ(cur):
		return nil // accepted, the stored ID stays
	}
	m.cps[vchannel], m.vals[vchannel] = cp, v
	return nil
}

func (m *model) drop(vchannel string) error {
	if vchannel == "" {
		return messages.ErrEmptyVChannel
	}
	if _, ok := m.cps[vchannel]; !ok {
		return messages.ErrVChannelNotFound
	}
	delete(m.cps, vchannel)
	delete(m.vals, vchannel)
	return nil
}

// atMinimum returns the vchannels whose checkpoint is the model's minimum, sorted.
func (m *model) atMinimum() []string {
	low := linearMin(m.cps)
	var names []string
	for name, cp := range m.cps {
		if cp.EQ(low) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// step runs one operation on the tracker and the model and compares the
// outcome: error, advanced, and no change at all when rejected.
func step(t *rapid.T, tr *Tracker, m *model, op string, real func() (bool, error), want func() error) {
	t.Helper()
	before := snapshot(tr)
	oldMin := linearMin(m.cps)
	advanced, err := real()
	wantErr := want()
	if wantErr != nil {
		wantRejected(t, op, advanced, err, wantErr)
		wantUnchanged(t, op, tr, before)
		return
	}
	if err != nil {
		t.Fatalf("%s: unexpected error %v", op, err)
	}
	if want := rose(oldMin, linearMin(m.cps)); advanced != want {
		t.Fatalf("%s: advanced = %v, want %v (model minimum %s -> %s)",
			op, advanced, want, wal.String(oldMin), wal.String(linearMin(m.cps)))
	}
}

// checkModel fails unless the tracker shows exactly the model's state.
func checkModel(t *rapid.T, tr *Tracker, m *model) {
	t.Helper()
	if err := checkHeap(tr); err != nil {
		t.Fatalf("%v", err)
	}
	if tr.Len() != len(m.cps) {
		t.Fatalf("Len() = %d, model has %d", tr.Len(), len(m.cps))
	}
	cps := tr.Checkpoints()
	if !sameCheckpoints(cps, m.cps) {
		t.Fatalf("Checkpoints() = %v, model has %v", cps, m.cps)
	}
	for name, cp := range m.cps {
		if got, ok := tr.Get(name); !ok || got != cp {
			t.Fatalf("Get(%q) = %s, %v; model has %s", name, wal.String(got), ok, cp)
		}
	}
	got, want := tr.Minimum(), linearMin(m.cps)
	if h := tr.Holder(); want == nil && h != "" {
		t.Fatalf("Holder() = %q with no vchannel", h)
	} else if want != nil && !slices.Contains(m.atMinimum(), h) {
		t.Fatalf("Holder() = %q, not one of the vchannels at the minimum %v", h, m.atMinimum())
	}
	switch {
	case want == nil:
		if got != nil {
			t.Fatalf("Minimum() = %s with no vchannel", got)
		}
	case got == nil || !got.EQ(want):
		t.Fatalf("Minimum() = %s, linear scan gives %s", wal.String(got), want)
	default:
		// With ties the heap may pick any of them, but it must be one of
		// the stored checkpoints exactly.
		stored := false
		for _, cp := range m.cps {
			stored = stored || cp == got
		}
		if !stored {
			t.Fatalf("Minimum() = %s is not a stored checkpoint", got)
		}
	}
}

func TestTrackerMatchesModel(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				tr := newTracker(t, wc.name)
				m := &model{walName: wc.name, cps: map[string]wal.MessageID{}, vals: map[string]int64{}}
				names := rapid.SampledFrom([]string{"", "a", "b", "c", "d", "e", "f", "g"})
				// A checkpoint: mostly valid and from a small range, so that
				// ties, equal updates and rollbacks are frequent.
				type drawn struct {
					cp wal.MessageID
					v  int64
				}
				cps := rapid.Custom(func(t *rapid.T) drawn {
					switch rapid.IntRange(0, 19).Draw(t, "kind") {
					case 0:
						return drawn{}
					case 1:
						return drawn{cp: wc.foreign}
					}
					v := rapid.Int64Range(0, 40).Draw(t, "v")
					return drawn{cp: wc.id(v, rapid.Int64Range(0, 2).Draw(t, "salt")), v: v}
				})
				t.Repeat(map[string]func(*rapid.T){
					"add": func(t *rapid.T) {
						name, d := names.Draw(t, "vchannel"), cps.Draw(t, "checkpoint")
						step(t, tr, m, fmt.Sprintf("Add(%q, %s)", name, wal.String(d.cp)),
							func() (bool, error) { return tr.Add(name, d.cp) },
							func() error { return m.add(name, d.cp, d.v) })
					},
					"update": func(t *rapid.T) {
						name, d := names.Draw(t, "vchannel"), cps.Draw(t, "checkpoint")
						step(t, tr, m, fmt.Sprintf("Update(%q, %s)", name, wal.String(d.cp)),
							func() (bool, error) { return tr.Update(name, d.cp) },
							func() error { return m.update(name, d.cp, d.v) })
					},
					// Move a vchannel at the minimum forward by 0 to 3: exercises
					// ties and the sift-down from the root.
					"advanceMinimum": func(t *rapid.T) {
						at := m.atMinimum()
						if len(at) == 0 {
							t.Skip("no vchannel")
						}
						name := rapid.SampledFrom(at).Draw(t, "vchannel")
						v := m.vals[name] + rapid.Int64Range(0, 3).Draw(t, "delta")
						cp := wc.id(v, rapid.Int64Range(0, 2).Draw(t, "salt"))
						step(t, tr, m, fmt.Sprintf("Update(%q, %s)", name, cp),
							func() (bool, error) { return tr.Update(name, cp) },
							func() error { return m.update(name, cp, v) })
					},
					"drop": func(t *rapid.T) {
						name := names.Draw(t, "vchannel")
						step(t, tr, m, fmt.Sprintf("Drop(%q)", name),
							func() (bool, error) { return tr.Drop(name) },
							func() error { return m.drop(name) })
					},
					"": func(t *rapid.T) { checkModel(t, tr, m) },
				})
			})
		})
	}
}

// TestMinimumQuick checks the heap's minimum against a linear scan over
// plain integers, as go.etcd.io/raft's quorum/quick_test.go does for the
// commit index.
func TestMinimumQuick(t *testing.T) {
	for _, walName := range []wal.Name{wal.Kafka, wal.Pulsar, wal.Woodpecker} {
		t.Run(string(walName), func(t *testing.T) {
			wc := caseFor(t, walName)
			f := func(initial []uint16, ops []uint32) bool {
				tr, err := New(walName)
				if err != nil {
					return false
				}
				vals := map[string]int64{}
				agrees := func() bool {
					if len(vals) == 0 {
						return tr.Minimum() == nil && tr.Len() == 0
					}
					low := int64(-1)
					for _, v := range vals {
						if low < 0 || v < low {
							low = v
						}
					}
					return tr.Len() == len(vals) && tr.Minimum().EQ(wc.id(low, 0)) && checkHeap(tr) == nil
				}
				for i, v := range initial {
					name := fmt.Sprintf("v%d", i)
					if _, err := tr.Add(name, wc.id(int64(v), 0)); err != nil {
						return false
					}
					vals[name] = int64(v)
					if !agrees() {
						return false
					}
				}
				for _, op := range ops {
					if len(initial) == 0 {
						break
					}
					name := fmt.Sprintf("v%d", int(op>>8)%len(initial))
					v, ok := vals[name]
					if !ok {
						continue
					}
					if op%7 == 0 {
						if _, err := tr.Drop(name); err != nil {
							return false
						}
						delete(vals, name)
					} else {
						v += int64(op % 256)
						if _, err := tr.Update(name, wc.id(v, int64(op%3))); err != nil {
							return false
						}
						vals[name] = v
					}
					if !agrees() {
						return false
					}
				}
				return true
			}
			if err := quick.Check(f, &quick.Config{MaxCount: 500}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// --- Benchmarks --------------------------------------------------------------

const benchVChannels = 1000

func benchNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("by-dev-rootcoord-dml_%d_v%d", i%16, i)
	}
	return names
}

// BenchmarkUpdate advances one of 1000 vchannels per iteration, round-robin,
// each by a small random step from a random start: the common case, where
// most updates move an entry a few levels at most. The IDs are built before
// the timer starts, so the KafkaID-to-interface conversion is not measured.
func BenchmarkUpdate(b *testing.B) {
	const n, rounds = benchVChannels, 256
	names := benchNames(n)
	rng := rand.New(rand.NewPCG(42, 1))
	// ids[r*n+j] is vchannel j's checkpoint after r updates.
	ids := make([]wal.MessageID, (rounds+1)*n)
	for j := range n {
		cp := rng.Int64N(1_000_000)
		for r := 0; r <= rounds; r++ {
			ids[r*n+j] = wal.KafkaID(cp)
			cp += 1 + rng.Int64N(1000)
		}
	}
	benchUpdates(b, names, ids, func(_ *Tracker, k int) string { return names[k%n] }, false)
}

// BenchmarkUpdateCold is BenchmarkUpdate as a node with many pchannels
// sees it: 10,000 trackers of 100 vchannels each, every one of them cold
// in the caches when its turn comes, each update moving one vchannel of
// each tracker in turn, two laps (the pattern of bench's BenchmarkScale).
// A look-up that touches one cache line rather than two or three is what
// it measures; ns/update is one Update. The trackers are built off the
// clock; run it with -benchtime=3x.
func BenchmarkUpdateCold(b *testing.B) {
	const pchannels, vchannels, laps = 10_000, 100, 2
	names := benchNames(vchannels)
	ids := make([]wal.MessageID, laps+1)
	for i := range ids {
		ids[i] = wal.KafkaID(int64(i))
	}
	start := make([]messages.VChannelCheckpoint, vchannels)
	for i, name := range names {
		start[i] = messages.VChannelCheckpoint{VChannel: name, Checkpoint: ids[0]}
	}
	trackers := make([]*Tracker, pchannels)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range trackers {
			var err error
			if trackers[i], err = NewFrom(wal.Kafka, start); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for k := range laps * vchannels {
			v, cp := names[k%vchannels], ids[k/vchannels+1]
			for _, tr := range trackers {
				if _, err := tr.Update(v, cp); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pchannels*vchannels*laps), "ns/update")
}

// BenchmarkUpdateMinimum always moves the vchannel at the minimum past every
// other one: the worst case, a sift-down from the root to a leaf.
func BenchmarkUpdateMinimum(b *testing.B) {
	const n, rounds = benchVChannels, 1024
	names := benchNames(n)
	ids := make([]wal.MessageID, n*rounds)
	for i := range ids {
		ids[i] = wal.KafkaID(i)
	}
	benchUpdates(b, names, ids, func(tr *Tracker, _ int) string { return tr.names[tr.heapSlot[0]] }, true)
}

// benchUpdates times b.N Updates, the k-th to ids[k] of the vchannel pick
// names, on a tracker holding names at their first len(names) IDs; when the
// IDs run out it starts a fresh one, off the clock. wantAdvanced asks every
// Update to raise the minimum.
func benchUpdates(b *testing.B, names []string, ids []wal.MessageID, pick func(tr *Tracker, k int) string, wantAdvanced bool) {
	fresh := func() *Tracker {
		tr := newTracker(b, wal.Kafka)
		for j, name := range names {
			mustAdd(b, tr, name, ids[j])
		}
		return tr
	}
	tr, k := fresh(), len(names)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if k == len(ids) {
			b.StopTimer()
			tr, k = fresh(), len(names)
			b.StartTimer()
		}
		advanced, err := tr.Update(pick(tr, k), ids[k])
		if err != nil || wantAdvanced && !advanced {
			b.Fatalf("Update %d: advanced = %v, err = %v", k, advanced, err)
		}
		k++
	}
}

// BenchmarkAddDrop drops one of 1000 vchannels and adds it back at another
// checkpoint per iteration.
func BenchmarkAddDrop(b *testing.B) {
	const n, pool = benchVChannels, 4096
	names := benchNames(n)
	rng := rand.New(rand.NewPCG(42, 2))
	ids := make([]wal.MessageID, pool)
	for i := range ids {
		ids[i] = wal.KafkaID(rng.Int64N(1_000_000))
	}
	tr := newTracker(b, wal.Kafka)
	for j := range n {
		mustAdd(b, tr, names[j], ids[j])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		name := names[i%n]
		if _, err := tr.Drop(name); err != nil {
			b.Fatal(err)
		}
		if _, err := tr.Add(name, ids[i%pool]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNewFromMatchesAdds builds trackers both ways, from the same random
// checkpoints, and checks that they show the same state and hold their
// invariants; and that NewFrom refuses what Add refuses.
func TestNewFromMatchesAdds(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, wc := range walCases {
		for _, n := range []int{0, 1, 2, 5, 6, 7, 100, 1000} {
			cps := make([]messages.VChannelCheckpoint, n)
			for i := range cps {
				cps[i] = messages.VChannelCheckpoint{VChannel: fmt.Sprintf("v%d", i), Checkpoint: wc.id(rng.Int64N(50), rng.Int64N(4))}
			}
			built, err := NewFrom(wc.name, cps)
			if err != nil {
				t.Fatalf("%s/%d: NewFrom = %v", wc.name, n, err)
			}
			added := newTracker(t, wc.name)
			for _, c := range cps {
				mustAdd(t, added, c.VChannel, c.Checkpoint)
			}
			if err := checkHeap(built); err != nil {
				t.Fatalf("%s/%d: %v", wc.name, n, err)
			}
			// Tied checkpoints may differ in bytes (Pulsar's partition), so
			// the minima are compared by order, not identity.
			a, b := snapshot(built), snapshot(added)
			if wal.Less(a.min, b.min) || wal.Less(b.min, a.min) || a.len != b.len || !sameCheckpoints(a.cps, b.cps) {
				t.Fatalf("%s/%d: NewFrom shows minimum %s of %d, Adds show %s of %d",
					wc.name, n, wal.String(a.min), a.len, wal.String(b.min), b.len)
			}
		}
	}
	k := wal.KafkaID(1)
	for name, tc := range map[string]struct {
		cps  []messages.VChannelCheckpoint
		want error
	}{
		"duplicate":   {[]messages.VChannelCheckpoint{{VChannel: "a", Checkpoint: k}, {VChannel: "a", Checkpoint: k}}, messages.ErrVChannelExists},
		"empty name":  {[]messages.VChannelCheckpoint{{VChannel: "", Checkpoint: k}}, messages.ErrEmptyVChannel},
		"nil":         {[]messages.VChannelCheckpoint{{VChannel: "a"}}, messages.ErrNilCheckpoint},
		"foreign WAL": {[]messages.VChannelCheckpoint{{VChannel: "a", Checkpoint: wal.PulsarID{}}}, wal.ErrWALMismatch},
	} {
		if tr, err := NewFrom(wal.Kafka, tc.cps); !errors.Is(err, tc.want) || tr != nil {
			t.Errorf("%s: NewFrom = (%v, %v), want %v", name, tr, err, tc.want)
		}
	}
	if _, err := NewFrom("nope", nil); !errors.Is(err, wal.ErrUnknownWAL) {
		t.Errorf("NewFrom of an unknown WAL = %v", err)
	}
}

// TestShareNamesIsCopiedOnWrite shares a tracker's names, then adds and
// drops: the shared slice never changes.
func TestShareNamesIsCopiedOnWrite(t *testing.T) {
	cps := []messages.VChannelCheckpoint{
		{VChannel: "a", Checkpoint: wal.KafkaID(1)},
		{VChannel: "b", Checkpoint: wal.KafkaID(2)},
		{VChannel: "c", Checkpoint: wal.KafkaID(3)},
	}
	for _, op := range []string{"drop", "add"} {
		tr, err := NewFrom(wal.Kafka, cps)
		if err != nil {
			t.Fatal(err)
		}
		shared := tr.ShareNames()
		want := slices.Clone(shared)
		if got := slices.Sorted(slices.Values(slices.DeleteFunc(slices.Clone(shared), func(n string) bool { return n == "" }))); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("ShareNames = %q, want a, b and c among free slots", shared)
		}
		if op == "drop" {
			if _, err := tr.Drop("a"); err != nil {
				t.Fatal(err)
			}
		} else {
			mustAdd(t, tr, "d", wal.KafkaID(4))
		}
		_, _ = tr.Update("b", wal.KafkaID(9))
		if !slices.Equal(shared, want) {
			t.Fatalf("after %s: shared names changed to %v", op, shared)
		}
		if err := checkHeap(tr); err != nil {
			t.Fatalf("after %s: %v", op, err)
		}
	}
}

// TestMassDropReturnsMemory adds many vchannels and drops them all: the
// tracker ends at its floor size, not at its peak, and keeps every
// invariant on the way down and back up.
func TestMassDropReturnsMemory(t *testing.T) {
	const n = 100_000
	tr := newTracker(t, wal.Kafka)
	names := benchNames(n)
	for i, name := range names {
		mustAdd(t, tr, name, wal.KafkaID(i))
	}
	peakSlots, peakTable := cap(tr.heap), len(tr.names)
	rng := rand.New(rand.NewPCG(9, 9))
	rng.Shuffle(n, func(i, j int) { names[i], names[j] = names[j], names[i] })
	for i, name := range names {
		mustDrop(t, tr, name)
		if left := n - i - 1; left%9973 == 0 || left < 300 && left%7 == 0 {
			if err := checkHeap(tr); err != nil {
				t.Fatalf("%d left: %v", left, err)
			}
			if slots := cap(tr.heap); slots > max(4*left+3, shrinkFloor) {
				t.Fatalf("%d left: %d slots kept", left, slots)
			}
			if size := len(tr.names); size > 4*tableSize(max(2*left, shrinkFloor)) {
				t.Fatalf("%d left: table of %d slots kept", left, size)
			}
		}
	}
	t.Logf("peak: heap of %d, table of %d; after dropping all: heap of %d, table of %d", peakSlots, peakTable, cap(tr.heap), len(tr.names))
	if cap(tr.heap) > shrinkFloor || cap(tr.heapSlot) > shrinkFloor {
		t.Fatalf("after dropping all: capacities heap %d, heapSlot %d, want at most %d", cap(tr.heap), cap(tr.heapSlot), shrinkFloor)
	}
	if len(tr.names) > tableSize(shrinkFloor) || cap(tr.names) != len(tr.names) || cap(tr.pos) != len(tr.pos) {
		t.Fatalf("after dropping all: table of %d (names cap %d, pos cap %d), want at most %d", len(tr.names), cap(tr.names), cap(tr.pos), tableSize(shrinkFloor))
	}
	// Usable again, through a grow and a second shrink.
	for i, name := range names[:1000] {
		mustAdd(t, tr, name, wal.KafkaID(i))
	}
	for _, name := range names[:990] {
		mustDrop(t, tr, name)
	}
	if err := checkHeap(tr); err != nil {
		t.Fatal(err)
	}
	wantMin(t, tr, wal.KafkaID(990))
}

// TestMassDropReturnsHeap measures what the process heap keeps after a
// 100,000 vchannels were added and dropped.
func TestMassDropReturnsHeap(t *testing.T) {
	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tr := newTracker(t, wal.Kafka)
	names := benchNames(n)
	for i, name := range names {
		mustAdd(t, tr, name, wal.KafkaID(i))
	}
	for _, name := range names {
		mustDrop(t, tr, name)
	}
	names = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(tr)
	t.Logf("heap held by an empty tracker after %d adds and drops: %d bytes", n, held)
	if held > 1<<20 {
		t.Fatalf("an empty tracker holds %d bytes after %d adds and drops", held, n)
	}
}

// TestHolder follows the vchannel that holds the minimum through every
// operation: exactly the one at the minimum when it is alone there, one of
// the tie otherwise, and the last of a tie once the others moved on.
func TestHolder(t *testing.T) {
	for _, wc := range walCases {
		t.Run(string(wc.name), func(t *testing.T) {
			tr := newTracker(t, wc.name)
			want := func(op, holder string) {
				t.Helper()
				if got := tr.Holder(); got != holder {
					t.Fatalf("after %s: Holder() = %q, want %q", op, got, holder)
				}
				if holder != "" {
					if cp, _ := tr.Get(holder); !cp.EQ(tr.Minimum()) {
						t.Fatalf("after %s: the holder is at %s, the minimum is %s", op, cp, tr.Minimum())
					}
				}
			}
			want("New", "")
			mustAdd(t, tr, "a", wc.id(30, 0))
			want("Add a 30", "a")
			mustAdd(t, tr, "b", wc.id(40, 0))
			want("Add b 40 (above)", "a")
			mustAdd(t, tr, "c", wc.id(20, 0))
			want("Add c 20 (below)", "c")
			mustUpdate(t, tr, "c", wc.id(35, 0))
			want("Update c 35 (past a)", "a")
			mustUpdate(t, tr, "b", wc.id(50, 0))
			want("Update b 50 (not the holder)", "a")
			if _, err := tr.Drop("a"); err != nil {
				t.Fatal(err)
			}
			want("Drop a (the holder)", "c")

			// A tie: either holds it; after the named one moves on, the other.
			mustAdd(t, tr, "d", wc.id(35, 1))
			first := tr.Holder()
			if first != "c" && first != "d" {
				t.Fatalf("tie of c and d at 35: Holder() = %q", first)
			}
			other := map[string]string{"c": "d", "d": "c"}[first]
			if mustUpdate(t, tr, first, wc.id(45, 0)) {
				t.Fatal("one of a tie moved: reported advanced")
			}
			want("Update of the named one of a tie", other)
			if _, err := tr.Drop(other); err != nil {
				t.Fatal(err)
			}
			want("Drop the last of the tie", first) // first at 45, b at 50
			if _, err := tr.Drop("b"); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.Drop(first); err != nil {
				t.Fatal(err)
			}
			want("Drop all", "")
		})
	}
}

// TestHolderDoesNotAllocate: the actor reads the holder on every rise.
func TestHolderDoesNotAllocate(t *testing.T) {
	tr := newTracker(t, wal.Kafka)
	mustAdd(t, tr, "a", wal.KafkaID(1))
	mustAdd(t, tr, "b", wal.KafkaID(2))
	if n := testing.AllocsPerRun(100, func() { _ = tr.Holder() }); n != 0 {
		t.Fatalf("Holder allocates %v times", n)
	}
}

// Below names exactly the vchannels whose checkpoint is below x, whatever
// the heap's shape after random moves.
func TestBelowNamesExactlyThoseBelow(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tr, err := New(wal.Kafka)
		if err != nil {
			rt.Fatal(err)
		}
		want := map[string]int64{}
		for i := range rapid.IntRange(0, 40).Draw(rt, "vchannels") {
			name := fmt.Sprintf("v%02d", i)
			cp := rapid.Int64Range(0, 100).Draw(rt, "checkpoint")
			if _, err := tr.Add(name, wal.KafkaID(cp)); err != nil {
				rt.Fatal(err)
			}
			want[name] = cp
		}
		for range rapid.IntRange(0, 40).Draw(rt, "moves") {
			if len(want) == 0 {
				break
			}
			name := rapid.SampledFrom(slices.Sorted(maps.Keys(want))).Draw(rt, "moved")
			cp := want[name] + rapid.Int64Range(0, 50).Draw(rt, "step")
			if _, err := tr.Update(name, wal.KafkaID(cp)); err != nil {
				rt.Fatal(err)
			}
			want[name] = cp
		}
		x := rapid.Int64Range(0, 160).Draw(rt, "x")
		var below []string
		for name, cp := range want {
			if cp < x {
				below = append(below, name)
			}
		}
		got := tr.Below(wal.KafkaID(x))
		slices.Sort(got)
		slices.Sort(below)
		if !slices.Equal(got, below) {
			rt.Fatalf("Below(%d) = %v, want %v", x, got, below)
		}
	})
}
