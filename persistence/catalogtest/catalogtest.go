// Package catalogtest is the conformance suite for implementations of
// persistence.Catalog, as testing/fstest is for fs.FS: a catalog that
// passes it keeps every promise lowwater's actors rely on. lowwater runs
// its own catalogs (Memory, Bolt, etcd, the fault-injecting wrapper)
// through it; a catalog written elsewhere (over another database, or a
// fake for tests) should run it too, from an ordinary test:
//
//	func TestCatalog(t *testing.T) {
//		catalogtest.Run(t, func(t *testing.T) persistence.Catalog {
//			c, err := mystore.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return c
//		})
//	}
//
// A store that several processes or nodes open at once runs RunShared
// too, with two instances on one store: Run, given one, cannot see
// whether they keep each other's saves.
//
// It knows nothing about any one store. It uses the built-in WALs, and one
// WAL of its own, registered (wal.Register) the first time a check needs it
// under the name "catalogtest-panicky": an ID type whose comparison panics,
// as a third-party one with a bug may. wal.Names lists it from then on.
package catalogtest

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/promoted"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Run tests a Catalog implementation. newCatalog must return a new, empty,
// open catalog each time it is called (a fresh file, a fresh key prefix):
// Run calls it once per check and closes every catalog it gets. Each check
// is a subtest named after the rule it checks, so that one can be rerun
// alone (go test -run 'TestCatalog/SaveLowerIsRefused').
//
// The rules are the persistence.Catalog contract: an absent pchannel loads
// as (nil, nil); a save is read back exactly, every field of the ID
// included, by Load and by LoadAll; saving the stored value again
// succeeds; a lower value is refused with a *persistence.StoredAheadError
// naming both values and changes nothing; every name a node takes is
// stored apart, up to 512 bytes long, with any character but NUL; a value
// of another WAL (wrapping wal.ErrWALMismatch), an empty pchannel name, a
// nil, typed-nil or unregistered ID, or one that does not read back as
// marshalled (wrapping wal.ErrCorruptID), is persistence.ErrInvalidArgument
// and changes nothing, and so is a sentinel (a negative Kafka offset,
// wrapping wal.ErrSentinel), which no node recovers from; so is a value
// whose comparison with the stored one panics (wrapping wal.ErrCorruptID:
// compare with wal.Compare), which fails that save only, whichever of the
// two values the panic came from, and never the catalog; Load and Delete
// of a name no node takes, but the empty one, succeed; concurrent writers
// never make the stored value go back; Delete retires a pchannel (and
// deleting nothing succeeds); a done context fails a call with the
// context's error and writes nothing; every call after Close fails with
// persistence.ErrClosed, and so does a second Close.
//
// A catalog that is a persistence.SaveStarter runs every check a second
// time, under "StartSave/", unless it changes Save and keeps the StartSave
// of a catalog it embeds, whose saves the actors make with its Save: with
// each save started through StartSave (and
// through Save where StartSave declines with errors.ErrUnsupported, as the
// actors do): the same rules hold, and each save that started is told
// exactly once, within a minute, and never from within StartSave; one
// StartSave refused (it returned an error) is never told. Once a
// started save was not told in time, every save after it fails at once,
// so that the run ends within go test's default timeout. A save told
// again after its check ended fails the "StartSave" test around it, if
// that has not ended.
//
// A panic out of a call the suite makes fails the check it happened in,
// with the call and the stack where it panicked, and the checks after it
// still run; so does a call that ends its goroutine (runtime.Goexit, as
// t.FailNow does), which the actors take for a failed call. A panic on a
// goroutine of the catalog's own still ends the test binary, as any
// would.
//
// ConcurrentSavesNeverGoBack races writers and a reader, each read held
// to every save acknowledged before it began: a catalog whose compare and
// write are two steps fails it in nearly every run if anything takes time
// between them (10 µs, as I/O does: 100 runs of 100 on a quiet machine;
// a loaded one passed it once), and in some runs only if nothing does (an
// in-memory store: 1 in 10 under -race). Run it with -count=200, -race,
// before trusting a pass:
//
//	go test -race -count=200 -run 'TestCatalog/ConcurrentSavesNeverGoBack'
//
// Every call the suite makes has a deadline, of 10 s unless its check
// gives a sooner one, and is waited for no longer than 5 s past it: a
// catalog must end a call when its context ends, and one that does not
// fails the check the call hung in, naming the call. Every call after it
// then fails at once, so that the run ends within seconds, not at go
// test's timeout. (A deadline that ends during a call is not provoked:
// the suite cannot slow a catalog's call down from outside.)
//
// Run needs no goroutine of the catalog's to end by itself: checks that
// race writers wait for them with a deadline of a minute and a half, and
// whatever those find after it is not reported.
func Run(t *testing.T, newCatalog func(t *testing.T) persistence.Catalog) {
	t.Helper()
	overran := new(atomic.Bool) // shared by every check: see bounded
	run(t, newCatalog, overran)
	t.Run("StartSave", func(t *testing.T) {
		probe := newCatalog(t)
		_, ok := probe.(persistence.SaveStarter)
		closeChecked(t, &bounded{c: probe, report: newReporter(t, nil), overran: overran})
		if !ok {
			t.Skip("not a persistence.SaveStarter")
		}
		if promoted.Split(probe, "Save", "StartSave") {
			// The actors call its Save, as Run did above.
			t.Skipf("%T changes Save and keeps the StartSave of a catalog it embeds: the actors save through its Save", probe)
		}
		outer := newReporter(t, nil)
		untold := new(atomic.Bool)
		run(t, func(t *testing.T) persistence.Catalog {
			c := newCatalog(t)
			starter, ok := c.(persistence.SaveStarter)
			if !ok {
				t.Fatalf("newCatalog returned a %T, which is no persistence.SaveStarter, where it returned one before", c)
			}
			return &startedSaves{SaveStarter: starter, report: newReporter(t, outer), untold: untold}
		}, overran)
	})
}

// RunShared tests what Run cannot see: two instances of a catalog open
// on one store at once, as two processes or two nodes have it. newPair
// must return two new, open catalogs on one new, empty store (a fresh
// directory both open, a fresh key prefix both use); RunShared calls it
// once per check and closes both.
//
// The rules: what one instance saves or deletes, the other reads at once,
// by Load and by LoadAll (an instance keeps no copy of what is stored); a
// lower value saved through one is refused as Run's rules say, naming
// what the other saved; and writers saving through both never make the
// stored value go back. That last one is where a store whose instances
// share it fails, having passed Run: a save's compare and its write must
// be one step of the store's (a transaction, a conditional write, a lock
// the store itself holds), and a mutex of the instance makes them one
// step only among that instance's saves: a store of an instance's mutex
// with 10 µs of I/O between its read and its write failed it in 100 runs
// of 100. With nothing between, it may pass some: as for Run, run it with
// -count=200, -race, before trusting a pass.
// Saves go through Save alone, a persistence.SaveStarter's StartSave too.
//
// A store that one process holds alone (a bbolt file, which it locks)
// has no second instance to give, and needs no RunShared.
func RunShared(t *testing.T, newPair func(t *testing.T) (a, b persistence.Catalog)) {
	t.Helper()
	overran := new(atomic.Bool)
	tests := []struct {
		name string
		run  func(t *testing.T, a, b persistence.Catalog)
	}{
		{"SavedThroughOneIsReadThroughTheOther", testSharedSave},
		{"DeletedThroughOneIsGoneForTheOther", testSharedDelete},
		{"ConcurrentSavesThroughBothNeverGoBack", func(t *testing.T, a, b persistence.Catalog) {
			raceSaves(t, &alternating{cs: [2]persistence.Catalog{a, b}},
				" (the saves and the reads went through the two instances in turn: the step must be the store's, "+
					"a transaction or a conditional write, not a lock of one instance's)")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			madeA, madeB := newPair(t)
			if madeA == nil || madeB == nil {
				t.Fatalf("newPair returned %v, %v: want two catalogs", madeA, madeB)
			}
			if madeA == madeB {
				t.Fatal("newPair returned one catalog twice: want two instances on one store")
			}
			a := &bounded{c: madeA, report: newReporter(t, nil), overran: overran}
			b := &bounded{c: madeB, report: newReporter(t, nil), overran: overran}
			t.Cleanup(func() { closeChecked(t, a); closeChecked(t, b) })
			if overran.Load() {
				t.Fatal("not run: a call earlier ran past its deadline (see the first check that failed)")
			}
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s\n%s", panicked(p), panicStack(p))
				}
			}()
			tt.run(t, a, b)
		})
	}
}

// alternating is two instances of one store as one catalog: each call
// goes to the next of them in turn.
type alternating struct {
	cs [2]persistence.Catalog
	n  atomic.Uint64
}

func (a *alternating) next() persistence.Catalog { return a.cs[a.n.Add(1)%2] }

func (a *alternating) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	return a.next().Load(ctx, pchannel)
}

func (a *alternating) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	return a.next().Save(ctx, pchannel, checkpoint)
}

func (a *alternating) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	return a.next().LoadAll(ctx)
}

func (a *alternating) Delete(ctx context.Context, pchannel string) error {
	return a.next().Delete(ctx, pchannel)
}

// Close is RunShared's, which closes each instance itself.
func (a *alternating) Close() error { return nil }

func testSharedSave(t *testing.T, a, b persistence.Catalog) {
	for _, p := range pairs() {
		pchannel := pchannelOf(p.high)
		mustSave(t, a, pchannel, p.low)
		wantSeen(t, b, pchannel, p.low)
		mustSave(t, b, pchannel, p.high)
		wantSeen(t, a, pchannel, p.high)
		var ahead *persistence.StoredAheadError
		err := a.Save(context.Background(), pchannel, p.low)
		if !errors.As(err, &ahead) || ahead.Stored != p.high || ahead.Attempted != p.low {
			t.Fatalf("Save(%q, %s) through one, over %s saved through the other = %v, want a *StoredAheadError naming %s: "+
				"an instance must compare with the store, not with what it saved itself", pchannel, p.low, p.high, err, p.high)
		}
		wantSeen(t, b, pchannel, p.high)
	}
	want := make(map[string]wal.MessageID)
	for _, p := range pairs() {
		want[pchannelOf(p.high)] = p.high
	}
	wantAll(t, a, want)
	wantAll(t, b, want)
}

func testSharedDelete(t *testing.T, a, b persistence.Catalog) {
	mustSave(t, a, "p", wal.KafkaID(7))
	wantSeen(t, b, "p", wal.KafkaID(7))
	if err := b.Delete(context.Background(), "p"); err != nil {
		t.Fatalf("Delete(%q) = %v", "p", err)
	}
	wantSeen(t, a, "p", nil)
	wantAll(t, a, map[string]wal.MessageID{})
	// Retired, the pchannel starts again from anything: a lower value too.
	mustSave(t, a, "p", wal.KafkaID(3))
	wantSeen(t, b, "p", wal.KafkaID(3))
}

// wantSeen checks that c reads want, which the other instance made the
// stored value.
func wantSeen(t *testing.T, c persistence.Catalog, pchannel string, want wal.MessageID) {
	t.Helper()
	wantLoaded(t, c, pchannel, want, ", stored through the other instance: an instance must read the store, not a copy of its own")
}

func run(t *testing.T, newCatalog func(t *testing.T) persistence.Catalog, overran *atomic.Bool) {
	t.Helper()
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
		{"SaveComparePanicIsRefused", testSaveComparePanic},
		{"InvalidArguments", testInvalidArguments},
		{"LoadAllManyPChannels", testLoadAll},
		{"EveryNameIsStored", testEveryName},
		{"ConcurrentSavesNeverGoBack", testConcurrentSaves},
		{"DeleteRetires", testDelete},
		{"DeleteAbsentSucceeds", testDeleteAbsent},
		{"DoneContextWritesNothing", testDoneContext},
		{"CallsAfterClose", testClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			made := newCatalog(t)
			if made == nil {
				t.Fatal("newCatalog returned nil")
			}
			c := &bounded{c: made, report: newReporter(t, nil), overran: overran}
			t.Cleanup(func() { closeChecked(t, c) })
			if overran.Load() {
				t.Fatal("not run: a call earlier ran past its deadline (see the first check that failed)")
			}
			// A panic out of the catalog fails this check, not the whole
			// test binary, so that the other checks still run.
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s\n%s", panicked(p), panicStack(p))
				}
			}()
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

func pchannelOf(id wal.MessageID) string { return "pch-" + string(id.WALName()) }

func mustSave(t *testing.T, c persistence.Catalog, pchannel string, id wal.MessageID) {
	t.Helper()
	if err := c.Save(context.Background(), pchannel, id); err != nil {
		t.Fatalf("Save(%q, %s) = %v, want nil", pchannel, id, err)
	}
}

// wantStored checks the stored value exactly, every field included.
func wantStored(t *testing.T, c persistence.Catalog, pchannel string, want wal.MessageID) {
	t.Helper()
	wantLoaded(t, c, pchannel, want, "")
}

// wantLoaded is wantStored, why ending the message of a wrong value.
func wantLoaded(t *testing.T, c persistence.Catalog, pchannel string, want wal.MessageID, why string) {
	t.Helper()
	got, err := c.Load(context.Background(), pchannel)
	if err != nil {
		t.Fatalf("Load(%q) = %v", pchannel, err)
	}
	if got != want {
		t.Fatalf("Load(%q) = %s, want %s%s", pchannel, exact(got), exact(want), why)
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
			t.Fatalf("LoadAll[%q] = %s, want %s", pchannel, exact(got[pchannel]), exact(id))
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
		if err := c.Save(context.Background(), "p", other); !errors.Is(err, persistence.ErrInvalidArgument) || !errors.Is(err, wal.ErrWALMismatch) {
			t.Fatalf("Save(%s) over a Kafka checkpoint = %v, want ErrInvalidArgument wrapping wal.ErrWALMismatch (wal.Compare)", other, err)
		}
	}
	wantStored(t, c, "p", wal.KafkaID(5))
}

// testSaveComparePanic saves values of a WAL whose comparison panics on
// one value, as a new checkpoint and as the stored one: each such save is
// refused as an invalid argument wrapping wal.ErrCorruptID (CheckSaveArgs
// refuses a value that cannot be ordered against itself), writes nothing,
// and leaves the catalog serving every pchannel. The stored one is saved
// while the value compares, as an older build could have stored it.
func testSaveComparePanic(t *testing.T, c persistence.Catalog) {
	registerPanicky(t)
	poisonMu.Lock() // poisonCalm is the process's: one such check at a time
	defer poisonMu.Unlock()
	mustSave(t, c, "other", wal.KafkaID(1))
	mustSave(t, c, "p", panickyID(10))
	wantUnordered(t, c, "p", poisonID)
	wantStored(t, c, "p", panickyID(10))
	wantUnordered(t, c, "q", poisonID) // nothing stored: refused all the same
	wantStored(t, c, "q", nil)
	saveCalm(t, c, "q", poisonID)
	wantUnordered(t, c, "q", panickyID(5))
	wantStored(t, c, "q", poisonID)
	mustSave(t, c, "p", panickyID(11))
	mustSave(t, c, "other", wal.KafkaID(2))
	wantAll(t, c, map[string]wal.MessageID{"other": wal.KafkaID(2), "p": panickyID(11), "q": poisonID})
}

// wantUnordered saves id, whose comparison with the stored value panics,
// and checks the refusal. A panic out of Save fails the check, not the
// whole test binary, so that the other checks still run.
func wantUnordered(t *testing.T, c persistence.Catalog, pchannel string, id wal.MessageID) {
	t.Helper()
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panicked: %v", p)
			}
		}()
		return c.Save(context.Background(), pchannel, id)
	}()
	if !errors.Is(err, persistence.ErrInvalidArgument) || !errors.Is(err, wal.ErrCorruptID) {
		t.Fatalf("Save(%q, %s), whose comparison panics, = %v, want ErrInvalidArgument wrapping wal.ErrCorruptID", pchannel, id, err)
	}
}

// saveRecovered is c.Save, with a panic out of it as its error: what the
// check expected follows it, and the stack after that.
func saveRecovered(t *testing.T, c persistence.Catalog, ctx context.Context, pchannel string, id wal.MessageID) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			err = errors.New(panicked(p))
			t.Logf("where it panicked:\n%s", panicStack(p))
		}
	}()
	return c.Save(ctx, pchannel, id)
}

// recoverTo reports a panic on a goroutine of a check, where the check's
// own recover cannot see it, as a failure of the check. Deferred.
func recoverTo(r *reporter, who string) {
	if p := recover(); p != nil {
		r.errorf("%s: %s\n%s", who, panicked(p), panicStack(p))
	}
}

// panickyID is the ID of the WAL panickyWAL: LT, LTE and EQ panic when
// either side is poisonID, unless poisonCalm is set.
type panickyID int64

const (
	panickyWAL wal.Name  = "catalogtest-panicky"
	poisonID   panickyID = 666
	// driftID reads back as another ID, as one of a codec with a bug
	// does: every catalog refuses it (wal.Marshal).
	driftID panickyID = 777
)

func (panickyID) WALName() wal.Name { return panickyWAL }

func (a panickyID) LT(o wal.MessageID) bool  { return a.order(o) < 0 }
func (a panickyID) LTE(o wal.MessageID) bool { return a.order(o) <= 0 }
func (a panickyID) EQ(o wal.MessageID) bool  { return a.order(o) == 0 }
func (a panickyID) Marshal() []byte          { return binary.BigEndian.AppendUint64(nil, uint64(a)) }
func (a panickyID) String() string           { return fmt.Sprintf("%s:%d", panickyWAL, int64(a)) }

// poisonCalm, while set, keeps poisonID's comparisons from panicking;
// poisonMu keeps the checks that rely on it apart.
var (
	poisonCalm atomic.Bool
	poisonMu   sync.Mutex
)

// saveCalm saves id while its comparisons do not panic, as an older build
// could have stored it.
func saveCalm(t *testing.T, c persistence.Catalog, pchannel string, id wal.MessageID) {
	t.Helper()
	poisonCalm.Store(true)
	defer poisonCalm.Store(false)
	mustSave(t, c, pchannel, id)
}

func (a panickyID) order(o wal.MessageID) int {
	b := o.(panickyID)
	if !poisonCalm.Load() && (a == poisonID || b == poisonID) {
		panic(fmt.Sprintf("catalogtest: comparing %d with %d", a, b))
	}
	return cmp.Compare(a, b)
}

var (
	registerOnce sync.Once
	registerErr  error
)

// registerPanicky registers panickyWAL once per process.
func registerPanicky(t *testing.T) {
	t.Helper()
	registerOnce.Do(func() {
		registerErr = wal.Register(panickyWAL, wal.Codec[panickyID]{
			Unmarshal: func(b []byte) (panickyID, error) {
				if len(b) != 8 {
					return 0, fmt.Errorf("%w: %d bytes, want 8", wal.ErrCorruptID, len(b))
				}
				if id := panickyID(binary.BigEndian.Uint64(b)); id != driftID {
					return id, nil
				}
				return driftID + 1, nil // does not read back
			},
			Parse: func(text string) (panickyID, error) {
				n, err := strconv.ParseInt(text, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("%w: %w", wal.ErrSyntax, err)
				}
				return panickyID(n), nil
			},
		})
	})
	if registerErr != nil {
		t.Fatalf("registering the test WAL %q: %v", panickyWAL, registerErr)
	}
}

// unknownID is a message ID of a WAL no catalog knows.
type unknownID struct{}

func (unknownID) WALName() wal.Name      { return "nats" }
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
	// Each save on its own: a catalog that panics on one (a nil ID) is
	// told of the others too. persistence.CheckSaveArgs refuses them all.
	for _, s := range saves {
		if err := saveRecovered(t, c, ctx, s.pchannel, s.id); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Errorf("Save(%q, %T) = %v, want ErrInvalidArgument (persistence.CheckSaveArgs)", s.pchannel, s.id, err)
		}
	}
	for _, sentinel := range []wal.KafkaID{-1, -2} {
		err := saveRecovered(t, c, ctx, "p", sentinel)
		if !errors.Is(err, persistence.ErrInvalidArgument) || !errors.Is(err, wal.ErrSentinel) {
			t.Errorf("Save(\"p\", %s) = %v, want ErrInvalidArgument wrapping wal.ErrSentinel (persistence.CheckSaveArgs)", sentinel, err)
		}
	}
	registerPanicky(t)
	if err := saveRecovered(t, c, ctx, "p", driftID); !errors.Is(err, persistence.ErrInvalidArgument) || !errors.Is(err, wal.ErrCorruptID) {
		t.Errorf("Save(\"p\", %s), which reads back as another ID, = %v, want ErrInvalidArgument wrapping wal.ErrCorruptID (persistence.CheckSaveArgs)", driftID, err)
	}
	if id, err := c.Load(ctx, ""); !errors.Is(err, persistence.ErrInvalidArgument) || id != nil {
		t.Errorf("Load(\"\") = (%s, %v), want ErrInvalidArgument", wal.String(id), err)
	}
	if err := c.Delete(ctx, ""); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Errorf("Delete(\"\") = %v, want ErrInvalidArgument", err)
	}
	wantAll(t, c, map[string]wal.MessageID{})
}

// testEveryName stores names a node takes that a store of one key or file
// per pchannel may not (persistence.ValidatePChannel: up to 512 bytes of
// UTF-8 with no NUL): long ones, multi-byte ones, ones with a slash, a dot,
// spaces, a backslash, a colon; each reads back under its own name alone.
// A name no node takes, stored by another writer, is read (nothing
// stored, here) and deleted all the same: only the empty name is refused.
func testEveryName(t *testing.T, c persistence.Catalog) {
	names := []string{
		strings.Repeat("n", persistence.MaxNameLen),
		strings.Repeat("ü", persistence.MaxNameLen/2),
		"orders/dml/0", "../orders", ".", "a b", `back\slash`, "c:0", "%2F", "UPPER", "upper",
	}
	want := map[string]wal.MessageID{}
	for i, name := range names {
		id := wal.KafkaID(int64(i + 1))
		mustSave(t, c, name, id)
		want[name] = id
	}
	for name, id := range want {
		wantStored(t, c, name, id)
	}
	wantAll(t, c, want)
	for _, name := range []string{"p\x00", "\xff", strings.Repeat("n", persistence.MaxNameLen+1)} {
		if id, err := c.Load(context.Background(), name); err != nil || id != nil {
			t.Errorf("Load(%q), a name no node takes, with nothing stored = (%s, %v), want (nil, nil): Load refuses the empty name only", name, wal.String(id), err)
		}
		if err := c.Delete(context.Background(), name); err != nil {
			t.Errorf("Delete(%q), a name no node takes = %v, want nil: Delete refuses the empty name only", name, err)
		}
	}
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
// would. Every refusal must name a value above the refused one, no read
// may find the value below one acknowledged before it began, and the
// highest value must win.
func testConcurrentSaves(t *testing.T, c persistence.Catalog) { raceSaves(t, c, "") }

// raceSaves races writers and a reader on c; hint ends the message of a
// value gone back.
func raceSaves(t *testing.T, c persistence.Catalog, hint string) {
	const writers, perWriter = 4, 100
	ctx := context.Background()
	// The writers and the reader report through it: should one of them
	// outlive the wait for it, it cannot report to the ended test.
	r := newReporter(t, nil)
	// A catalog that refuses wrongly refuses hundreds of these saves:
	// the first few are told, and how many more.
	var refusals atomic.Int64
	// acked is the highest save acknowledged so far. A read that finds
	// less than it found at the read's start found an acknowledged
	// checkpoint lowered: a lower save's write landed after it, as a
	// catalog that compares and writes in two steps lets it. Each writer
	// reads after each of its saves, when the lowering is likeliest seen;
	// a reader that compared a read with the one before it alone caught
	// a lock of one instance's in one run of six.
	var acked atomic.Int64
	lowered := func(who string) bool {
		floor := acked.Load()
		got, err := c.Load(ctx, "p")
		switch {
		case errors.Is(err, errNotMade):
			return true // the check has failed already
		case err != nil:
			r.errorf("Load = %v", err)
			return true
		case floor > 0 && (got == nil || wal.Less(got, wal.KafkaID(floor))):
			r.errorf("%s read %s, below %s, acknowledged before the read began%s", who, exact(got), wal.KafkaID(floor), hint)
			return true
		}
		return false
	}
	top := wal.KafkaID(writers * perWriter)
	var topMu sync.Mutex
	topErr := errors.New("not made") // what the highest save returned; guarded by topMu
	refused := func(format string, args ...any) {
		if refusals.Add(1) <= 3 {
			r.errorf(format, args...)
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer recoverTo(r, "a writer")
			for i := range perWriter {
				id := wal.KafkaID(i*writers + w + 1)
				err := c.Save(ctx, "p", id)
				if id == top {
					topMu.Lock()
					topErr = err
					topMu.Unlock()
				}
				var ahead *persistence.StoredAheadError
				switch {
				case err == nil:
					for n := acked.Load(); n < int64(id) && !acked.CompareAndSwap(n, int64(id)); n = acked.Load() {
					}
					if lowered("a writer, after its save of " + id.String() + ",") {
						return
					}
				case errors.Is(err, errNotMade):
					return // the check has failed already
				case errors.As(err, &ahead):
					switch {
					case ahead.Stored == nil:
						refused("Save(%s) refused naming no value stored: a refusal must name a stored value above the one refused", id)
					case !id.LT(ahead.Stored):
						refused("Save(%s) refused with stored %s, which is not above it: a refusal must name a stored value above the one refused", id, ahead.Stored)
					}
				default:
					refused("Save(%s) = %v, want nil, or a *persistence.StoredAheadError naming the value stored above it", id, err)
				}
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer recoverTo(r, "the reader")
		for {
			select {
			case <-writersDone:
				return
			default:
			}
			if lowered("the reader") {
				return
			}
		}
	}()
	// Both, always: the reader stops early at the first regression, and a
	// writer still running after the test returned could not report.
	waitFor(t, writersDone, "the writers")
	waitFor(t, readerDone, "the reader")
	if n := refusals.Load(); n > 3 {
		t.Errorf("and %d more saves refused so", n-3)
	}
	// The highest save cannot be refused rightly. Once acknowledged, a
	// lower value read after it is a lower save's write landed after it,
	// as a catalog that compares and writes in two steps lets it.
	got, err := c.Load(context.Background(), "p")
	switch {
	case err != nil:
		t.Errorf("Load(%q) = %v", "p", err)
	case topErr != nil:
		t.Errorf("Save(%s), above every other, = %v, want nil: nothing can be above it; Load(%q) = %s", top, topErr, "p", exact(got))
	case got == nil || !got.EQ(top):
		t.Errorf("Load(%q) = %s, want %s: %s was acknowledged and then overwritten by a lower save: "+
			"a save's compare and its write must be one atomic step%s", "p", exact(got), exact(top), top, hint)
	}
}

// waitFor bounds a wait so that a deadlock fails the test instead of hanging
// it. Its bound is above toldWithin, so that a started save never told
// fails as such, not as a writer that never finished.
func waitFor(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(toldWithin + 30*time.Second):
		t.Fatalf("%s did not finish within %v", what, toldWithin+30*time.Second)
	}
}

// testDelete retires one pchannel of several: it loads as absent, LoadAll
// leaves it out, the others are untouched, and a new life of it may start
// lower than the old one ended.
func testDelete(t *testing.T, c persistence.Catalog) {
	want := map[string]wal.MessageID{}
	for _, p := range pairs() {
		mustSave(t, c, pchannelOf(p.high), p.high)
		want[pchannelOf(p.high)] = p.high
	}
	retired := pchannelOf(wal.KafkaID(0))
	if err := c.Delete(context.Background(), retired); err != nil {
		t.Fatalf("Delete(%q) = %v, want nil", retired, err)
	}
	delete(want, retired)
	wantStored(t, c, retired, nil)
	wantAll(t, c, want)
	mustSave(t, c, retired, wal.KafkaID(1))
	wantStored(t, c, retired, wal.KafkaID(1))
}

func testDeleteAbsent(t *testing.T, c persistence.Catalog) {
	mustSave(t, c, "p", wal.KafkaID(1))
	for range 2 {
		if err := c.Delete(context.Background(), "absent"); err != nil {
			t.Fatalf("Delete(absent) = %v, want nil", err)
		}
	}
	wantAll(t, c, map[string]wal.MessageID{"p": wal.KafkaID(1)})
}

func testDoneContext(t *testing.T, c persistence.Catalog) {
	mustSave(t, c, "kept", wal.KafkaID(3))
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
			t.Errorf("Load = (%s, %v), want %v", wal.String(id), err, tc.want)
		}
		if all, err := c.LoadAll(tc.ctx); !errors.Is(err, tc.want) || all != nil {
			t.Errorf("LoadAll = (%v, %v), want %v", all, err, tc.want)
		}
		if err := c.Delete(tc.ctx, "kept"); !errors.Is(err, tc.want) {
			t.Errorf("Delete = %v, want %v", err, tc.want)
		}
	}
	// A call with a done context that wrote or deleted anything shows
	// here: say so, as the calls above may have answered rightly.
	if all, err := c.LoadAll(context.Background()); err != nil || len(all) != 1 || all["kept"] == nil || !all["kept"].EQ(wal.KafkaID(3)) {
		t.Errorf("LoadAll after the calls with a done context = (%v, %v), want only kept at kafka:3: one of them wrote or deleted", all, err)
	}
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
		t.Errorf("Load after Close = (%s, %v), want ErrClosed", wal.String(id), err)
	}
	if all, err := c.LoadAll(ctx); !errors.Is(err, persistence.ErrClosed) || all != nil {
		t.Errorf("LoadAll after Close = (%v, %v), want ErrClosed", all, err)
	}
	if err := c.Delete(ctx, "p"); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("Delete after Close = %v, want ErrClosed", err)
	}
	if err := c.Close(); !errors.Is(err, persistence.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

// exact shows an ID as it prints and with every field, so that two IDs
// that print alike are told apart.
func exact(id wal.MessageID) string {
	if id == nil {
		return wal.String(id)
	}
	return fmt.Sprintf("%s (%#v)", wal.String(id), id)
}

// reporter takes the failures goroutines find, which testing forbids
// reporting to a test that has ended: a check's started saves may be told
// after it ends. Once its test has ended a failure goes to the test
// around it, while that one runs, and after that to no one.
type reporter struct {
	mu     sync.Mutex
	t      *testing.T
	ended  bool // guarded by mu
	parent *reporter
}

func newReporter(t *testing.T, parent *reporter) *reporter {
	r := &reporter{t: t, parent: parent}
	t.Cleanup(func() {
		r.mu.Lock()
		r.ended = true
		r.mu.Unlock()
	})
	return r
}

func (r *reporter) errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.ended:
		r.t.Helper()
		r.t.Errorf(format, args...)
	case r.parent != nil:
		r.parent.errorf("after %s ended: "+format, append([]any{r.t.Name()}, args...)...)
	}
}

// startedSaves saves through StartSave, and checks that each save that
// started is told exactly once, within toldWithin, and never from within
// StartSave. Once a save was not told in time, every save after it, in
// its check and those that follow, fails at once: each would otherwise
// wait that long, and the run outlast go test's own timeout.
type startedSaves struct {
	persistence.SaveStarter
	report *reporter
	untold *atomic.Bool // shared by the checks of a run
}

// toldWithin bounds the wait for a started save to be told. A variable
// for the suite's own tests alone.
var toldWithin = time.Minute

func (s *startedSaves) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if s.untold.Load() {
		return errors.New("a save started earlier was never told (see the first check that failed): no more are started")
	}
	var told sync.Mutex
	times := 0
	var startErr error // guarded by told: what StartSave returned, if it failed
	result := make(chan error, 1)
	err := s.StartSave(ctx, pchannel, checkpoint, func(err error) {
		if withinStartSave() {
			s.report.errorf("StartSave(%q, %s) called done from within StartSave", pchannel, wal.String(checkpoint))
		}
		told.Lock()
		defer told.Unlock()
		if startErr != nil {
			s.report.errorf("StartSave(%q, %s) returned %v, and called done after: a StartSave that fails never calls done",
				pchannel, wal.String(checkpoint), startErr)
			return
		}
		if times++; times == 1 {
			result <- err
			return
		}
		s.report.errorf("StartSave(%q, %s): done called %d times", pchannel, wal.String(checkpoint), times)
	})
	if err != nil {
		told.Lock()
		startErr = err
		if times > 0 {
			s.report.errorf("StartSave(%q, %s) returned %v, and called done: a StartSave that fails never calls done",
				pchannel, wal.String(checkpoint), err)
		}
		told.Unlock()
	}
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return s.SaveStarter.Save(ctx, pchannel, checkpoint)
	case err != nil:
		return err
	}
	select {
	case err := <-result:
		return err
	case <-time.After(toldWithin):
		s.untold.Store(true)
		s.report.errorf("StartSave(%q, %s) started, and was not told within %v", pchannel, wal.String(checkpoint), toldWithin)
		return fmt.Errorf("not told within %v", toldWithin)
	}
}

// withinStartSave reports whether startedSaves.Save, which calls
// StartSave, is on the calling goroutine's stack, however deep: a done
// called there is called from within StartSave. One the catalog calls on
// a goroutine of its own has it nowhere on its stack, however soon it
// runs (even while StartSave waits for that goroutine: not checked).
func withinStartSave() bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	for n == len(pcs) {
		pcs = make([]uintptr, 2*len(pcs))
		n = runtime.Callers(2, pcs)
	}
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, "catalogtest.(*startedSaves).Save") {
			return true
		}
		if !more {
			return false
		}
	}
}

// The bounds of every call the suite makes (see Run). Variables for the
// suite's own tests alone.
var (
	callWithin = 10 * time.Second
	callGrace  = 5 * time.Second
)

// bounded is the catalog under test as the checks call it: each call
// runs with a deadline, on a goroutine of its own, and is waited for
// until callGrace past that deadline. A call still running then fails
// its check, and every call after it, in this check and those that
// follow, fails at once: each would otherwise wait as long.
type bounded struct {
	c       persistence.Catalog
	report  *reporter
	overran *atomic.Bool
}

func (b *bounded) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	b.report.t.Helper()
	return within(b, ctx, fmt.Sprintf("Load(%q)", pchannel), func(ctx context.Context) (wal.MessageID, error) {
		return b.c.Load(ctx, pchannel)
	})
}

func (b *bounded) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	b.report.t.Helper()
	_, err := within(b, ctx, fmt.Sprintf("Save(%q, %s)", pchannel, described(checkpoint)), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.c.Save(ctx, pchannel, checkpoint)
	})
	return err
}

func (b *bounded) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	b.report.t.Helper()
	return within(b, ctx, "LoadAll", b.c.LoadAll)
}

func (b *bounded) Delete(ctx context.Context, pchannel string) error {
	b.report.t.Helper()
	_, err := within(b, ctx, fmt.Sprintf("Delete(%q)", pchannel), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, b.c.Delete(ctx, pchannel)
	})
	return err
}

// Close has no context: it is waited for as a call with no deadline
// sooner than callWithin.
func (b *bounded) Close() error {
	b.report.t.Helper()
	_, err := within(b, context.Background(), "Close", func(context.Context) (struct{}, error) {
		return struct{}{}, b.c.Close()
	})
	return err
}

// described is an ID as a failure names it: the suite's own IDs include
// a nil, a typed nil and one of no registered WAL, named by their type.
func described(id wal.MessageID) string {
	if id == nil {
		return "<nil>"
	}
	if _, err := wal.NameOf(id); err != nil {
		return fmt.Sprintf("%T", id)
	}
	return wal.String(id)
}

// callPanic is a panic out of a call, or its goroutine's end (Goexit),
// carried to the check's goroutine with the call and the stack of the
// call's own goroutine.
type callPanic struct {
	call  string
	value any
	stack []byte
}

func (p *callPanic) String() string { return fmt.Sprint(p.value) }

// panicked says what the catalog did that the check recovered, p: it
// panicked, in a call the suite made or not, or a call ended its
// goroutine.
func panicked(p any) string {
	cp, ok := p.(*callPanic)
	switch {
	case !ok:
		return fmt.Sprintf("the catalog panicked: %v", p)
	case cp.value == errGoexit && cp.call == "Close":
		return "the catalog ended the goroutine of Close (runtime.Goexit, as t.FailNow does): it returned nothing"
	case cp.value == errGoexit:
		return fmt.Sprintf("the catalog ended the goroutine of %s (runtime.Goexit, as t.FailNow does): it returned nothing, "+
			"which the actors take for a failed call", cp.call)
	}
	return fmt.Sprintf("the catalog panicked in %s: %v", cp.call, cp.value)
}

// closeChecked closes c at the end of a check, where the check's own
// recover is gone: a panic or Goexit in Close fails the check, and the
// checks after it still run.
func closeChecked(t *testing.T, c *bounded) {
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s\n%s", panicked(p), panicStack(p))
		}
	}()
	_ = c.Close()
}

// typedNil is a nil pointer (or map, slice, func or chan) that a call
// returned as its error: not nil to its caller, which takes it for a
// failure, while %v prints it as <nil>, and a check said
// "Save(...) = <nil>, want nil". It names it instead; it wraps nothing,
// a nil's methods being no safer to call for errors.Is than for %v.
type typedNil struct{ err error }

func (e typedNil) Error() string {
	return fmt.Sprintf("a nil %T returned as an error: not nil to its caller (return a plain nil)", e.err)
}

// namedNil is err, or a typedNil if err is a typed nil.
func namedNil(err error) error {
	if err == nil {
		return nil
	}
	switch v := reflect.ValueOf(err); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		if v.IsNil() {
			return typedNil{err}
		}
	}
	return err
}

// errGoexit is what a call that ended its goroutine (runtime.Goexit, as
// t.FailNow does) is taken to have panicked with.
var errGoexit = errors.New("the call ended its goroutine")

// errNotMade is the error of a call not made, once one ran past its
// deadline.
var errNotMade = errors.New("catalogtest: not made: a call earlier ran past its deadline (see the first check that failed)")

// panicStack is the stack to report with the panic value p: the call's,
// where it panicked, if it came out of one.
func panicStack(p any) []byte {
	if cp, ok := p.(*callPanic); ok {
		return cp.stack
	}
	return debug.Stack()
}

// within runs call with ctx bounded by callWithin, and returns what it
// returned; a panic in it panics again here, where the check recovers it.
func within[T any](b *bounded, ctx context.Context, name string, call func(context.Context) (T, error)) (T, error) {
	b.report.t.Helper()
	var zero T
	if b.overran.Load() {
		return zero, fmt.Errorf("%s: %w", name, errNotMade)
	}
	ctx, cancel := context.WithTimeout(ctx, callWithin)
	defer cancel()
	type result struct {
		v     T
		err   error
		panic *callPanic
	}
	done := make(chan result, 1)
	go func() {
		var r result
		returned := false
		defer func() {
			if p := recover(); p != nil {
				r.panic = &callPanic{call: name, value: p, stack: debug.Stack()}
			} else if !returned {
				r.panic = &callPanic{call: name, value: errGoexit, stack: debug.Stack()}
			}
			done <- r
		}()
		r.v, r.err = call(ctx)
		returned = true
	}()
	deadline, _ := ctx.Deadline()
	// A deadline passed already (a check of a done context) is waited
	// past from now.
	wait := time.NewTimer(max(time.Until(deadline), 0) + callGrace)
	defer wait.Stop()
	select {
	case r := <-done:
		if r.panic != nil {
			panic(r.panic)
		}
		return r.v, namedNil(r.err)
	case <-wait.C:
		b.overran.Store(true)
		if name == "Close" {
			b.report.errorf("Close has not returned %v after it began: a catalog's Close must return", callWithin+callGrace)
		} else {
			b.report.errorf("%s still runs %v past its context's deadline: a catalog must end each call when its context ends", name, callGrace)
		}
		return zero, fmt.Errorf("catalogtest: %s ran past its deadline", name)
	}
}
