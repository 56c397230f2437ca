package invariants

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// loadUpdates is the size of TestLoad: LOWWATER_LOAD_UPDATES, or
// 1,000,000 updates, which takes about 5 s under -race on 2 cores
// (make soak runs it 5 times over).
func loadUpdates(t *testing.T) int {
	if s := os.Getenv("LOWWATER_LOAD_UPDATES"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "LOWWATER_LOAD_UPDATES")
		return n
	}
	return 1_000_000
}

// TestLoad: one pchannel actor takes N updates from 8 goroutines while the
// catalog fails 30 % of saves. The final persisted value is the final
// minimum, saves are coalesced (far fewer than updates), the heap comes
// back to where it was (I5) and no goroutine is left (I6).
func TestLoad(t *testing.T) {
	const (
		senders    = 8
		perSender  = 4 // vchannels each sender owns
		heapBudget = 1 << 20
	)
	n := loadUpdates(t)
	perRound := n / senders / 2

	store := newLatest()
	cat := faultinject.Wrap(store, faultinject.WithSaveFailureRate(0.3), faultinject.WithSeed(4))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))

	// A lean subscriber: a million events must not pile up in the test.
	var persisted atomic.Pointer[wal.MessageID]
	var failed, advanced atomic.Int64
	changed := make(chan struct{}, 1)
	sub := sys.EventStream.Subscribe(func(e any) {
		switch ev := e.(type) {
		case *messages.CheckpointPersisted:
			v := ev.Value
			persisted.Store(&v)
			select {
			case changed <- struct{}{}:
			default:
			}
		case *messages.PersistFailed:
			failed.Add(1)
		case *messages.MinimumAdvanced:
			advanced.Add(1)
		}
	})

	initial := map[string]wal.MessageID{}
	for g := range senders {
		for j := range perSender {
			initial[fmt.Sprintf("v%d-%d", g, j)] = wal.KafkaID(0)
		}
	}
	props, err := actors.NewProps("pch-load", wal.Kafka, cat, actors.WithVChannels(initial))
	require.NoError(t, err)
	pid := sys.Root.Spawn(props)
	st, err := actors.GetState(ctxtest.Within(time.Minute), sys.Root, pid)
	require.NoError(t, err)
	require.Equal(t, senders*perSender, st.VChannels)

	before := heapAlloc()
	began := time.Now()
	// Two equal rounds: the first grows protoactor's mailbox ring to the
	// backlog's size (it never shrinks while the actor lives), the second
	// must find the heap where the first left it: nothing is kept per
	// update, however many (I5).
	var heaps [2]int64
	for round := range 2 {
		var wg sync.WaitGroup
		for g := range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				names := make([]string, perSender)
				for j := range names {
					names[j] = fmt.Sprintf("v%d-%d", g, j)
				}
				for i := round * perRound; i < (round+1)*perRound; i++ {
					// Each vchannel rises by one every perSender updates.
					sys.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: names[i%perSender], Checkpoint: wal.KafkaID(int64(i/perSender + 1))})
				}
			}()
		}
		sent := make(chan struct{})
		go func() { wg.Wait(); close(sent) }()
		select {
		case <-sent:
		case <-time.After(5 * time.Minute):
			t.Fatal("senders did not finish")
		}
		// Every vchannel ends the round at the same offset; GetState
		// queues behind every update.
		final := wal.KafkaID(int64((round + 1) * perRound / perSender))
		st, err = actors.GetState(ctxtest.Within(5*time.Minute), sys.Root, pid)
		require.NoError(t, err)
		require.Equal(t, final, st.Minimum)

		deadline := time.After(time.Minute)
		for p := persisted.Load(); p == nil || *p != final; p = persisted.Load() {
			select {
			case <-changed:
			case <-deadline:
				t.Fatalf("final minimum %s not persisted; last %v", final, p)
			}
		}
		st, err = actors.GetState(ctxtest.Within(time.Minute), sys.Root, pid)
		require.NoError(t, err)
		require.Equal(t, final, st.Persisted)
		require.Equal(t, final, store.value())
		heaps[round] = heapAlloc()
	}
	took := time.Since(began)

	require.NoError(t, sys.Root.PoisonFuture(pid).Wait())
	sys.EventStream.Unsubscribe(sub)
	require.NoError(t, cat.Close())
	sys.Shutdown()
	after := heapAlloc()

	saves := cat.Calls(faultinject.OpSave)
	t.Logf("%d updates from %d goroutines in %v; %d minima, %d saves (%d failed); heap %d before, %d and %d settled after each half, %d after stop",
		2*perRound*senders, senders, took, advanced.Load(), saves, cat.Failures(faultinject.OpSave), before, heaps[0], heaps[1], after)
	require.Less(t, heaps[1]-heaps[0], int64(heapBudget), "the second half kept %d bytes more", heaps[1]-heaps[0])
	require.Less(t, after-before, int64(heapBudget), "heap after stop grew from %d to %d", before, after)
	require.Equal(t, int64(cat.Failures(faultinject.OpSave)), failed.Load())
	require.Less(t, saves, n/10, "saves are coalesced")
	require.Zero(t, store.regressions.Load(), "I2")
	goleak.VerifyNone(t)
}

// latest is a Catalog that keeps only the latest checkpoint per pchannel
// (O(1), unlike Memory's history), refuses to go backward like every
// store, and counts attempts to.
type latest struct {
	mu          sync.Mutex
	stored      map[string]wal.MessageID
	regressions atomic.Int64
}

var _ persistence.Catalog = (*latest)(nil)

func newLatest() *latest { return &latest{stored: map[string]wal.MessageID{}} }

func (l *latest) value() wal.MessageID {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range l.stored {
		return v
	}
	return nil
}

func (l *latest) Load(_ context.Context, pchannel string) (wal.MessageID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stored[pchannel], nil
}

func (l *latest) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old := l.stored[pchannel]; old != nil && v.LT(old) {
		l.regressions.Add(1)
		return &persistence.StoredAheadError{PChannel: pchannel, Stored: old, Attempted: v}
	}
	l.stored[pchannel] = v
	return nil
}

func (l *latest) LoadAll(context.Context) (map[string]wal.MessageID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]wal.MessageID, len(l.stored))
	for k, v := range l.stored {
		out[k] = v
	}
	return out, nil
}

func (l *latest) Delete(_ context.Context, pchannel string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.stored, pchannel)
	return nil
}

func (l *latest) Close() error { return nil }
