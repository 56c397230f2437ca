package tracker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// fragile is an ID of a WAL registered outside package wal whose LT panics
// whenever fragileRule holds for its operands, as a third party's may on
// an ID decoded from damaged bytes.
type fragile int64

var (
	fragileRule func(a, b fragile) bool
	// fragileLies makes LT answer true where it holds: a comparison that
	// is wrong, not only one that panics.
	fragileLies func(a, b fragile) bool
)

func (fragile) WALName() wal.Name { return "test-fragile" }
func (a fragile) LT(o wal.MessageID) bool {
	b := o.(fragile)
	if fragileRule != nil && fragileRule(a, b) {
		panic("fragile LT")
	}
	if fragileLies != nil && fragileLies(a, b) {
		return true
	}
	return a < b
}
func (a fragile) LTE(o wal.MessageID) bool { return a <= o.(fragile) }
func (a fragile) EQ(o wal.MessageID) bool  { return a == o.(fragile) }
func (a fragile) Marshal() []byte          { return binary.BigEndian.AppendUint64(nil, uint64(a)) }
func (a fragile) String() string           { return "test-fragile:" + strconv.FormatInt(int64(a), 10) }

func init() {
	err := wal.Register("test-fragile", wal.Codec[fragile]{
		Unmarshal: func(b []byte) (fragile, error) { return fragile(binary.BigEndian.Uint64(b)), nil },
		Parse:     func(s string) (fragile, error) { n, err := strconv.ParseInt(s, 10, 64); return fragile(n), err },
	})
	if err != nil {
		panic(err)
	}
}

// panicsWith holds when either operand is v.
func panicsWith(v fragile) func(a, b fragile) bool {
	return func(a, b fragile) bool { return a == v || b == v }
}

// panicsOnPair holds for x and y in either order.
func panicsOnPair(x, y fragile) func(a, b fragile) bool {
	return func(a, b fragile) bool { return a == x && b == y || a == y && b == x }
}

// once holds the first time rule does, and never after.
func once(rule func(a, b fragile) bool) func(a, b fragile) bool {
	done := false
	return func(a, b fragile) bool {
		if done || !rule(a, b) {
			return false
		}
		done = true
		return true
	}
}

// fiveFragile tracks a..e at 1..5: a heap whose root a has children b and
// c, and b has d and e.
func fiveFragile(t *testing.T) *Tracker {
	t.Helper()
	tr, err := New("test-fragile")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"a", "b", "c", "d", "e"} {
		if _, err := tr.Add(v, fragile(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

// TestComparisonPanicIsRefusedAndChangesNothing: a change during which
// the WAL's LT panics is refused with wal.ErrCorruptID, wherever in the
// change the panic comes, and leaves the tracker as it was, whole.
func TestComparisonPanicIsRefusedAndChangesNothing(t *testing.T) {
	for _, c := range []struct {
		name   string
		rule   func(a, b fragile) bool
		change func(*Tracker) error
	}{
		{"update, against the old checkpoint", panicsWith(666),
			func(tr *Tracker) error { _, err := tr.Update("a", fragile(666)); return err }},
		// a moves from the root past b, then meets d and e.
		{"update, deep in the heap", panicsOnPair(10, 4),
			func(tr *Tracker) error { _, err := tr.Update("a", fragile(10)); return err }},
		{"update, against the new minimum", once(panicsOnPair(1, 2)),
			func(tr *Tracker) error { _, err := tr.Update("a", fragile(3)); return err }},
		{"add", panicsWith(666),
			func(tr *Tracker) error { _, err := tr.Add("f", fragile(666)); return err }},
		// e fills the root's hole and sinks past b; the panic comes once,
		// so that the restored order can be rebuilt.
		{"drop", once(panicsOnPair(5, 4)),
			func(tr *Tracker) error { _, err := tr.Drop("a"); return err }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := fiveFragile(t)
			before, min, holder := tr.Checkpoints(), tr.Minimum(), tr.Holder()
			fragileRule = c.rule
			err := c.change(tr)
			fragileRule = nil
			if !errors.Is(err, wal.ErrCorruptID) {
				t.Fatalf("err = %v, want wal.ErrCorruptID", err)
			}
			if err := checkHeap(tr); err != nil {
				t.Fatal(err)
			}
			if got := tr.Checkpoints(); !maps.Equal(got, before) {
				t.Errorf("checkpoints = %v, want %v as before", got, before)
			}
			if tr.Minimum() != min || tr.Holder() != holder {
				t.Errorf("minimum %v held by %q, want %v by %q", tr.Minimum(), tr.Holder(), min, holder)
			}
			if tr.Broken() != nil {
				t.Errorf("Broken() = %v, want nil", tr.Broken())
			}
			// It goes on as if nothing happened.
			if adv, err := tr.Update("a", fragile(7)); err != nil || !adv || tr.Minimum() != fragile(2) {
				t.Errorf("Update after = (%v, %v), minimum %v, want (true, nil), 2", adv, err, tr.Minimum())
			}
		})
	}
}

// TestOrderLostBreaksTheTracker: when rebuilding the order after a refused
// change panics too, the tracker says it is broken and refuses every
// change from then on, with the same error.
func TestOrderLostBreaksTheTracker(t *testing.T) {
	tr := fiveFragile(t)
	calls := 0
	fragileRule = func(a, b fragile) bool { calls++; return calls > 2 } // all but the read-back and rollback checks
	_, err := tr.Update("a", fragile(10))
	fragileRule = nil
	if !errors.Is(err, wal.ErrCorruptID) || tr.Broken() == nil || err != tr.Broken() {
		t.Fatalf("Update = %v, Broken() = %v; want the same error, wrapping wal.ErrCorruptID", err, tr.Broken())
	}
	for name, change := range map[string]func() error{
		"add":    func() error { _, err := tr.Add("f", fragile(9)); return err },
		"update": func() error { _, err := tr.Update("b", fragile(9)); return err },
		"drop":   func() error { _, err := tr.Drop("b"); return err },
	} {
		if err := change(); err != tr.Broken() {
			t.Errorf("%s on a broken tracker = %v, want %v", name, err, tr.Broken())
		}
	}
	if tr.Len() != 5 {
		t.Errorf("Len = %d, want 5: nothing was added or dropped", tr.Len())
	}
}

func TestNewFromRefusesAComparisonPanic(t *testing.T) {
	fragileRule = panicsWith(666)
	defer func() { fragileRule = nil }()
	_, err := NewFrom("test-fragile", []messages.VChannelCheckpoint{
		{VChannel: "a", Checkpoint: fragile(1)}, {VChannel: "b", Checkpoint: fragile(666)}, {VChannel: "c", Checkpoint: fragile(3)},
	})
	if !errors.Is(err, wal.ErrCorruptID) {
		t.Fatalf("NewFrom = %v, want wal.ErrCorruptID", err)
	}
}

func TestBuiltInWALsAreNotGuarded(t *testing.T) {
	for _, name := range []wal.Name{wal.Kafka, wal.RocksMQ, wal.Pulsar, wal.Woodpecker} {
		if tr, _ := New(name); tr.guarded {
			t.Errorf("a %s tracker guards its comparisons; its IDs cannot panic", name)
		}
	}
	if tr, _ := New("test-fragile"); !tr.guarded {
		t.Error("a tracker of a registered WAL does not guard its comparisons")
	}
}

// A Drop whose comparisons are wrong on one pair and panic on another
// never changes another vchannel's checkpoint: only the item that fills
// the hole may move (up only if down left it in place), so a panic leaves
// one hole, which restore fills with that very item. Drop used to sift up
// whatever had taken the hole's place after down, and restore then wrote
// the filling item into another vchannel's slot.
func TestDropWithAWrongAndAPanickingComparison(t *testing.T) {
	tr, err := New("test-fragile")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 15; i++ { // heap position i-1 holds i
		if _, err := tr.Add("v"+strconv.Itoa(i), fragile(i)); err != nil {
			t.Fatal(err)
		}
	}
	before := tr.Checkpoints()
	// v15 fills v4's place (position 3) and sinks past v8; sifting v8 up
	// then, LT(8, 2) is wrongly true and LT(8, 1) panics.
	fragileLies = func(a, b fragile) bool { return a == 8 && b == 2 }
	fragileRule = once(func(a, b fragile) bool { return a == 8 && b == 1 })
	_, err = tr.Drop("v4")
	fragileLies, fragileRule = nil, nil
	after := tr.Checkpoints()
	for v, cp := range before {
		if got, ok := after[v]; v != "v4" && (!ok || got != cp) {
			t.Errorf("vchannel %s: %v before the Drop, %v (%v) after (Drop = %v)", v, cp, got, ok, err)
		}
	}
	if got, ok := after["v4"]; ok && (err == nil || got != fragile(4)) {
		t.Errorf("v4 after the Drop: %v (Drop = %v)", got, err)
	}
	if len(after) != len(before)-1 && err == nil {
		t.Errorf("%d vchannels after a Drop of 15 that succeeded", len(after))
	}
}

// TestRandomComparisonPanicsChangeNothing runs random Adds, Updates and
// Drops on a fragile WAL whose LT panics at a random comparison of some
// of them: a change that panicked is refused and leaves the tracker as
// it was, one that did not does what the model (a map) says, and the
// internal invariants hold after each. Drops move slots around (a hole
// in the table is filled from behind), which a restore must follow.
func TestRandomComparisonPanicsChangeNothing(t *testing.T) {
	defer func() { fragileRule = nil }()
	rng := rand.New(rand.NewPCG(11, 12))
	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	tr, err := New("test-fragile")
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]wal.MessageID{}
	refused := 0
	for step := range 5000 {
		name := names[rng.IntN(len(names))]
		old, tracked := model[name]
		v := fragile(rng.Int64N(50))
		if tracked && rng.IntN(4) != 0 {
			v = old.(fragile) + fragile(rng.Int64N(4))
		}
		// The k-th comparison of this change panics, if it makes k.
		k, n := rng.IntN(8), 0
		fragileRule = func(a, b fragile) bool { n++; return n == k }
		var op string
		var change func() (bool, error)
		switch rng.IntN(3) {
		case 0:
			op, change = "Add", func() (bool, error) { return tr.Add(name, v) }
		case 1:
			op, change = "Update", func() (bool, error) { return tr.Update(name, v) }
		default:
			op, change = "Drop", func() (bool, error) { return tr.Drop(name) }
		}
		before := tr.Checkpoints()
		_, err := change()
		fragileRule = nil
		switch {
		case errors.Is(err, wal.ErrCorruptID):
			refused++
		case err != nil:
		case op == "Drop":
			delete(model, name)
		default:
			model[name] = v
		}
		if err != nil && !maps.Equal(tr.Checkpoints(), before) {
			t.Fatalf("step %d: %s %q %v refused (%v) but changed %v to %v", step, op, name, v, err, before, tr.Checkpoints())
		}
		if got := tr.Checkpoints(); !maps.Equal(got, model) {
			t.Fatalf("step %d: %s %q %v (err %v): checkpoints %v, want %v", step, op, name, v, err, got, model)
		}
		if err := checkHeap(tr); err != nil {
			t.Fatalf("step %d: %s %q %v: %v", step, op, name, v, err)
		}
		if tr.Broken() != nil {
			t.Fatalf("step %d: broken: %v", step, tr.Broken())
		}
		if want := linearMin(model); (want == nil) != (tr.Minimum() == nil) || want != nil && !want.EQ(tr.Minimum()) {
			t.Fatalf("step %d: minimum %v, want %v", step, tr.Minimum(), want)
		}
	}
	if refused < 500 {
		t.Fatalf("only %d changes refused for a panic: the test exercises too few", refused)
	}
	t.Logf("%d of 5000 changes refused for a panic", refused)
}

// TestComparisonPanicsAcrossResizes grows a fragile tracker to thousands
// of vchannels and drops it back to a few, twice, with a comparison panic
// in a third of the changes and the names shared now and then: the table
// is rebuilt on the way up and on the way down, and a refused change must
// leave it as it was all the same, a shared name list untouched.
func TestComparisonPanicsAcrossResizes(t *testing.T) {
	defer func() { fragileRule = nil }()
	rng := rand.New(rand.NewPCG(3, 7))
	tr, err := New("test-fragile")
	if err != nil {
		t.Fatal(err)
	}
	model := map[string]wal.MessageID{}
	var shared, sharedWas []string
	resizes, refused := 0, 0
	// change runs f with a panic at a random comparison, in a third of the
	// calls, and reports whether it was accepted.
	change := func(f func() error) bool {
		if rng.IntN(3) == 0 {
			k, n := rng.IntN(14), 0
			fragileRule = func(a, b fragile) bool { n++; return n == k }
		}
		err := f()
		fragileRule = nil
		if err != nil && !errors.Is(err, wal.ErrCorruptID) {
			t.Fatal(err)
		}
		if err != nil {
			refused++
		}
		return err == nil
	}
	check := func(step string) {
		t.Helper()
		if got := tr.Checkpoints(); !maps.Equal(got, model) {
			t.Fatalf("%s: %d checkpoints, want %d as the model's", step, len(got), len(model))
		}
		if err := checkHeap(tr); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if shared != nil && !slices.Equal(shared, sharedWas) {
			t.Fatalf("%s: the shared names changed", step)
		}
		if tr.Broken() != nil {
			t.Fatalf("%s: broken: %v", step, tr.Broken())
		}
	}
	share := func() {
		if rng.IntN(500) == 0 {
			shared = tr.ShareNames()
			sharedWas = slices.Clone(shared)
		}
	}
	for round := range 2 {
		for i := range 1500 {
			name, v := fmt.Sprintf("r%d-%d", round, i), fragile(rng.Int64N(100))
			size := len(tr.names)
			if change(func() error { _, err := tr.Add(name, v); return err }) {
				model[name] = v
			}
			if len(tr.names) != size {
				resizes++
				check("grown")
			}
			share()
		}
		check("full")
		names := slices.Sorted(maps.Keys(model))
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		for i, name := range names[:len(names)-10] {
			size := len(tr.names)
			if change(func() error { _, err := tr.Drop(name); return err }) {
				delete(model, name)
			}
			if len(tr.names) != size {
				resizes++
				check("shrunk")
			}
			if i%5 == 0 {
				other := names[len(names)-1-rng.IntN(10)]
				if old, ok := model[other]; ok {
					v := old.(fragile) + fragile(rng.Int64N(5))
					if change(func() error { _, err := tr.Update(other, v); return err }) {
						model[other] = v
					}
				}
			}
			if i%97 == 0 {
				check("dropping")
			}
			share()
		}
		check("emptied")
	}
	if resizes < 8 || refused < 200 {
		t.Fatalf("%d resizes and %d refused changes: the test exercises too few", resizes, refused)
	}
	t.Logf("%d resizes, %d changes refused for a panic", resizes, refused)
}
