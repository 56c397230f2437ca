package baseline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// saves reports every successful save of a catalog on a channel, so that a
// test waits for the value it expects instead of sleeping.
type saves struct {
	persistence.Catalog
	mu    sync.Mutex
	want  wal.MessageID
	reach chan struct{}
}

func (s *saves) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	err := s.Catalog.Save(ctx, pchannel, v)
	if err == nil {
		s.mu.Lock()
		if s.reach != nil && !v.LT(s.want) {
			close(s.reach)
			s.reach = nil
		}
		s.mu.Unlock()
	}
	return err
}

// expect returns a channel closed once a value at or above want is saved.
func (s *saves) expect(want wal.MessageID) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want, s.reach = want, make(chan struct{})
	return s.reach
}

func wait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func k(n int64) wal.MessageID { return wal.KafkaID(n) }

func TestReachesTheMinimum(t *testing.T) {
	mem := persistence.NewMemory()
	cat := &saves{Catalog: mem}
	initial := map[string]wal.MessageID{"a": k(10), "b": k(20), "c": k(30)}
	reached := cat.expect(k(10))
	m, err := Recover(context.Background(), cat, wal.Kafka, "p", initial)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.StartMessageID(); got != k(10) {
		t.Fatalf("start = %v, want kafka:10 (the minimum at recovery)", got)
	}
	wait(t, reached, "the minimum at recovery")

	reached = cat.expect(k(30))
	m.Update("a", k(40))
	m.Update("b", k(35))
	m.Update("b", k(1))  // rollback: refused, only logged
	m.Update("x", k(99)) // unknown: refused, only logged
	wait(t, reached, "kafka:30")
	if got := m.Minimum(); got != k(30) {
		t.Fatalf("minimum = %v, want kafka:30", got)
	}

	// Expect before the drop: the save it causes may come at once.
	reached = cat.expect(k(31))
	m.AddVChannel("a", k(0)) // exists: refused
	m.AddVChannel("d", k(31))
	m.DropVChannel("c")
	wait(t, reached, "kafka:31 after the drop")
	for _, v := range mem.History("p") {
		if v.LT(k(10)) || k(31).LT(v) {
			t.Fatalf("saved %v outside [10, 31]: %v", v, mem.History("p"))
		}
	}
	if h := mem.History("p"); !slices.IsSortedFunc(h, func(a, b wal.MessageID) int { return cmpIDs(a, b) }) {
		t.Fatalf("saves went backward: %v", h)
	}
}

func cmpIDs(a, b wal.MessageID) int {
	switch {
	case a.LT(b):
		return -1
	case b.LT(a):
		return 1
	default:
		return 0
	}
}

func TestStartsFromTheStoredCheckpoint(t *testing.T) {
	mem := persistence.NewMemory()
	if err := mem.Save(context.Background(), "p", k(50)); err != nil {
		t.Fatal(err)
	}
	cat := &saves{Catalog: mem}
	m, err := Recover(context.Background(), cat, wal.Kafka, "p", map[string]wal.MessageID{"a": k(10)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := m.StartMessageID(); got != k(50) {
		t.Fatalf("start = %v, want the stored kafka:50", got)
	}
	reached := cat.expect(k(60))
	m.Update("a", k(45)) // below the stored value: nothing to save
	m.Update("a", k(60))
	wait(t, reached, "kafka:60")
	if h := mem.History("p"); len(h) != 2 || h[1] != k(60) {
		t.Fatalf("history = %v, want [kafka:50 kafka:60]", h)
	}
}

func TestRecoveryFailsOnce(t *testing.T) {
	cat := faultinject.Wrap(persistence.NewMemory())
	defer cat.Close()
	cat.Script(faultinject.OpLoad, faultinject.Error())
	_, err := Recover(context.Background(), cat, wal.Kafka, "p", nil)
	if !errors.Is(err, faultinject.ErrInjected) {
		t.Fatalf("Recover = %v, want the injected error (the reference does not retry)", err)
	}
}

func TestRetriesAFailedSave(t *testing.T) {
	fi := faultinject.Wrap(persistence.NewMemory())
	defer fi.Close()
	fi.Script(faultinject.OpSave, faultinject.Error())
	cat := &saves{Catalog: fi}
	reached := cat.expect(k(7))
	m, err := Recover(context.Background(), cat, wal.Kafka, "p", map[string]wal.MessageID{"a": k(7)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	wait(t, reached, "kafka:7 after one failed save")
	if got := fi.Failures(faultinject.OpSave); got != 1 {
		t.Fatalf("failed saves = %d, want 1", got)
	}
}

// TestHeapMatchesLinearScan checks the indexed heap against a plain map
// under random adds, updates and drops.
func TestHeapMatchesLinearScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	s := newVChannels(nil)
	model := map[string]int64{}
	for range 5000 {
		name := fmt.Sprintf("v%d", r.IntN(40))
		v := r.Int64N(1000)
		switch r.IntN(3) {
		case 0:
			err := s.Add(name, k(v))
			if _, ok := model[name]; ok != (err != nil) {
				t.Fatalf("Add(%s) = %v with model %v", name, err, model)
			}
			if err == nil {
				model[name] = v
			}
		case 1:
			err := s.Update(name, k(v))
			old, ok := model[name]
			if !ok || v < old {
				if err == nil {
					t.Fatalf("Update(%s, %d) accepted over %d (present %v)", name, v, old, ok)
				}
				continue
			}
			if err != nil {
				t.Fatalf("Update(%s, %d) = %v", name, v, err)
			}
			model[name] = v
		default:
			err := s.Drop(name)
			if _, ok := model[name]; ok != (err == nil) {
				t.Fatalf("Drop(%s) = %v with model %v", name, err, model)
			}
			delete(model, name)
		}
		var want wal.MessageID
		for _, v := range model {
			if want == nil || k(v).LT(want) {
				want = k(v)
			}
		}
		if got := s.Minimum(); got != want || s.Len() != len(model) {
			t.Fatalf("minimum %v len %d, want %v len %d", got, s.Len(), want, len(model))
		}
	}
}
