package actors_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// goexitOnce is a catalog whose Load or Save, the first time it is
// called with exitOn, ends its goroutine, as t.FailNow in a test's fake
// does; every other call goes through.
type goexitOnce struct {
	*persistence.Memory
	exitOn string // "Load", "Save" or "StartSave"
	calls  atomic.Int64
	done   atomic.Bool
}

func (g *goexitOnce) exit(op string) {
	g.calls.Add(1)
	if op == g.exitOn && g.done.CompareAndSwap(false, true) {
		runtime.Goexit()
	}
}

func (g *goexitOnce) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	g.exit("Load")
	return g.Memory.Load(ctx, pchannel)
}

func (g *goexitOnce) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	g.exit("Save")
	return g.Memory.Save(ctx, pchannel, id)
}

// startingGoexit is a goexitOnce that starts its saves (a
// persistence.SaveStarter), answering on a goroutine of its own.
type startingGoexit struct{ *goexitOnce }

func (g startingGoexit) StartSave(ctx context.Context, pchannel string, id wal.MessageID, done func(error)) error {
	g.exit("StartSave")
	go func() { done(g.Memory.Save(ctx, pchannel, id)) }()
	return nil
}

// failedUntilPersisted waits, 10 s at most, for want to be persisted, and
// returns the last failure of a read or a save before it.
func failedUntilPersisted(t *testing.T, sub *events.Subscription, want wal.MessageID) error {
	t.Helper()
	var failure error
	for {
		select {
		case ev := <-sub.C():
			switch ev := ev.(type) {
			case *messages.RecoveryFailed:
				failure = ev.Err
			case *messages.PersistFailed:
				failure = ev.Err
			case *messages.CheckpointPersisted:
				if ev.Value.EQ(want) {
					return failure
				}
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%v not persisted within 10 s; the last failure: %v", want, failure)
		}
	}
}

// A catalog call that ends its goroutine fails as a panic does, and is
// tried again on the backoff: its result used to never come, and the
// pchannel saved nothing, or never recovered, for good. The failure names
// the method that ended it.
func TestACatalogCallThatEndsItsGoroutineFails(t *testing.T) {
	for _, op := range []string{"Load", "Save", "StartSave"} {
		t.Run(op, func(t *testing.T) {
			g := &goexitOnce{Memory: persistence.NewMemory(), exitOn: op}
			var cat persistence.Catalog = g
			if op == "StartSave" {
				cat = startingGoexit{g}
			}
			system, sub, pid := spawnOnCatalog(t, cat)
			failure := failedUntilPersisted(t, sub, wal.KafkaID(10))
			var pe *actors.CatalogPanicError
			require.True(t, errors.As(failure, &pe), "%v", failure)
			require.Equal(t, op, pe.Op)
			require.ErrorIs(t, failure, actors.ErrCatalogPanicked)
			require.ErrorIs(t, failure, actors.ErrGoexit)
			require.NoError(t, system.Root.PoisonFuture(pid).Wait())
			sub.Close()
			stored, err := g.Memory.Load(context.Background(), "p")
			require.NoError(t, err)
			require.Equal(t, wal.KafkaID(10), stored)
		})
	}
}

// panickingStart is a catalog whose StartSave panics the first time, and
// then starts its saves on a goroutine of its own.
type panickingStart struct {
	*persistence.Memory
	panicked atomic.Bool
}

func (p *panickingStart) StartSave(ctx context.Context, pchannel string, id wal.MessageID, done func(error)) error {
	if p.panicked.CompareAndSwap(false, true) {
		panic("disk on fire")
	}
	go func() { done(p.Memory.Save(ctx, pchannel, id)) }()
	return nil
}

// A StartSave that panics is a failed save, retried, and the failure
// names StartSave: an operator reading "panicked in Save" would look in
// the wrong method.
func TestAStartSaveThatPanicsFailsTheSave(t *testing.T) {
	cat := &panickingStart{Memory: persistence.NewMemory()}
	system, sub, pid := spawnOnCatalog(t, cat)
	failure := failedUntilPersisted(t, sub, wal.KafkaID(10))
	require.EqualError(t, failure, "lowwater: catalog panicked in StartSave: disk on fire")
	require.ErrorIs(t, failure, actors.ErrCatalogPanicked)
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	sub.Close()
}

// A raw subscriber that ends the goroutine of the pchannel's mailbox
// fails the pchannel as a panic does: the request is answered, the
// pchannel restarts with its vchannels, and answers and stops after. Its
// mailbox, held by a goroutine that was gone, used to answer nothing
// again, not even a stop.
func TestAHandlerThatEndsItsGoroutineFailsThePChannel(t *testing.T) {
	system, sub, pid := spawnOnCatalog(t, persistence.NewMemory())
	defer sub.Close()
	var once atomic.Bool
	raw := system.EventStream.Subscribe(func(ev any) {
		if m, ok := ev.(*messages.MinimumAdvanced); ok && m.To.EQ(wal.KafkaID(20)) && once.CompareAndSwap(false, true) {
			runtime.Goexit()
		}
	})
	defer system.EventStream.Unsubscribe(raw)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)})
	var pe *actors.PChannelPanicError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.ErrorIs(t, pe, actors.ErrPChannelPanicked)
	require.Equal(t, actors.ErrGoexit, pe.Value)
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}))
	st, err := actors.GetState(ctx, system.Root, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(30), st.Minimum, "the update applied before the exit carried over, and the next one")
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
}

// A handler that panics while it ends its goroutine (a deferred call
// that panics after runtime.Goexit) fails the pchannel too: the panic is
// recovered, the goroutine ends all the same, and the mailbox goes on on
// another one. It was left held by a goroutine that was gone.
func TestAHandlerThatPanicsAsItEndsItsGoroutineFailsThePChannel(t *testing.T) {
	for name, exit := range map[string]func(){
		"Goexit":                 func() { runtime.Goexit() },
		"Goexit, then a panic":   func() { defer func() { panic("deferred") }(); runtime.Goexit() },
		"a panic, then a Goexit": func() { defer runtime.Goexit(); panic("first") },
	} {
		t.Run(name, func(t *testing.T) {
			system := actor.NewActorSystem()
			defer system.Shutdown()
			props, err := actors.NewProps("p", wal.Kafka, persistence.NewMemory(),
				actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
			require.NoError(t, err)
			var once atomic.Bool
			props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
				return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
					if u, ok := env.Message.(*messages.UpdateCheckpoint); ok && u.Checkpoint.EQ(wal.KafkaID(20)) && once.CompareAndSwap(false, true) {
						exit()
					}
					next(c, env)
				}
			}))
			pid := system.Root.Spawn(props)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)})
			require.ErrorIs(t, err, actors.ErrPChannelPanicked)
			require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}),
				"the mailbox goes on after the failure")
			require.NoError(t, system.Root.PoisonFuture(pid).Wait())
		})
	}
}

// A subscriber that ends its goroutine on Stopped, the last event, ends
// neither the stop nor its future: both stops return at once, and the
// pchannel is gone. protoactor finished the stop on that goroutine, and
// its futures waited out their timeout (10 s).
func TestASubscriberThatEndsItsGoroutineOnStoppedEndsNoStop(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		t.Run(map[bool]string{true: "Poison", false: "Stop"}[graceful], func(t *testing.T) {
			system, sub, pid := spawnOnCatalog(t, persistence.NewMemory())
			defer sub.Close()
			var exited atomic.Bool
			raw := system.EventStream.Subscribe(func(ev any) {
				if _, ok := ev.(*messages.Stopped); ok {
					exited.Store(true)
					runtime.Goexit()
				}
			})
			defer system.EventStream.Unsubscribe(raw)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}))
			stop := system.Root.StopFuture
			if graceful {
				stop = system.Root.PoisonFuture
			}
			began := time.Now()
			require.NoError(t, stop(pid).Wait())
			require.Less(t, time.Since(began), 5*time.Second)
			require.True(t, exited.Load())
			_, err := actors.GetState(ctx, system.Root, pid)
			require.ErrorIs(t, err, actor.ErrDeadLetter)
		})
	}
}

// heldLoad is a catalog whose first Load waits until release is closed.
type heldLoad struct {
	*persistence.Memory
	release chan struct{}
	calls   atomic.Int64
}

func (h *heldLoad) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if h.calls.Add(1) == 1 {
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Memory.Load(ctx, pchannel)
}

// A subscriber that ends its goroutine on the Recovered a graceful stop
// publishes, once the read it waited for comes, fails the Stopping
// handler before its flush: Stopped names that failure. It said
// ErrFlushTimeout alone, about 1 ms into a 20 s flush timeout.
func TestAStopCutByAFailureNamesIt(t *testing.T) {
	cat := &heldLoad{Memory: persistence.NewMemory(), release: make(chan struct{})}
	system, sub, pid := spawnOnCatalog(t, cat)
	defer sub.Close()
	var exits atomic.Int64
	raw := system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Recovered); ok {
			exits.Add(1)
			runtime.Goexit()
		}
	})
	defer system.EventStream.Unsubscribe(raw)
	// The pill is in the mailbox before the read's result: the stop
	// waits for the read, and the Recovered comes within it.
	stopped := system.Root.PoisonFuture(pid)
	close(cat.release)
	began := time.Now()
	require.NoError(t, stopped.Wait())
	require.Less(t, time.Since(began), 5*time.Second)
	require.EqualValues(t, 1, exits.Load())

	var ev *messages.Stopped
	for ev == nil {
		select {
		case e := <-sub.C():
			ev, _ = e.(*messages.Stopped)
		case <-time.After(10 * time.Second):
			t.Fatal("no Stopped within 10 s")
		}
	}
	require.True(t, ev.Graceful)
	require.False(t, ev.Flushed)
	require.Equal(t, wal.KafkaID(10), ev.Dropped)
	require.Nil(t, ev.LastPersisted)
	require.ErrorIs(t, ev.Reason, messages.ErrFlushTimeout)
	require.ErrorIs(t, ev.Reason, actors.ErrPChannelPanicked)
	require.ErrorIs(t, ev.Reason, actors.ErrGoexit)
	require.Nil(t, ev.Failure, "restarted since it failed")
	stored, err := cat.Memory.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Nil(t, stored)
}

// panicsOnceWith is a catalog whose Load or Save panics once with value,
// then goes through.
type panicsOnceWith struct {
	*persistence.Memory
	op    string // "Load" or "Save"
	value any
	done  atomic.Bool
}

func (c *panicsOnceWith) panicOn(op string) {
	if op == c.op && c.done.CompareAndSwap(false, true) {
		panic(c.value)
	}
}

func (c *panicsOnceWith) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	c.panicOn("Load")
	return c.Memory.Load(ctx, pchannel)
}

func (c *panicsOnceWith) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	c.panicOn("Save")
	return c.Memory.Save(ctx, pchannel, id)
}

// A catalog that panics with an error lowwater acts on when returned
// (closed, fenced, stored ahead) has a bug, and gave no answer: the call
// is retried like any that panics. It used to stop the saves for good, or
// the actor, or take the value named as stored, and a stop then said
// "flushed" with nothing stored.
func TestACatalogPanicIsNotTakenForItsAnswer(t *testing.T) {
	for name, c := range map[string]struct {
		op    string
		value any
	}{
		"Save, closed":        {"Save", persistence.ErrClosed},
		"Save, closed within": {"Save", fmt.Errorf("driver: connection lost: %w", persistence.ErrClosed)},
		"Save, fenced":        {"Save", persistence.ErrFenced},
		"Save, stored ahead":  {"Save", &persistence.StoredAheadError{PChannel: "p", Stored: wal.KafkaID(99)}},
		"Load, closed":        {"Load", persistence.ErrClosed},
	} {
		t.Run(name, func(t *testing.T) {
			cat := &panicsOnceWith{Memory: persistence.NewMemory(), op: c.op, value: c.value}
			system, sub, pid := spawnOnCatalog(t, cat)
			var failures int
			for saved := false; !saved; {
				select {
				case ev := <-sub.C():
					switch ev := ev.(type) {
					case *messages.RecoveryFailed:
						failures++
						require.ErrorIs(t, ev.Err, actors.ErrCatalogPanicked)
						require.NotZero(t, ev.NextRetry, "a panic in Load was not retried")
					case *messages.PersistFailed:
						failures++
						require.ErrorIs(t, ev.Err, actors.ErrCatalogPanicked)
						require.NotZero(t, ev.NextRetry, "a panic in Save was not retried")
						require.Nil(t, ev.Adopted, "a panic's value was taken as stored")
					case *messages.OwnershipLost:
						t.Fatalf("a panic was taken for a fence: %v", ev.Cause)
					case *messages.CheckpointPersisted:
						require.Equal(t, wal.KafkaID(10), ev.Value)
						saved = true
					}
				case <-time.After(10 * time.Second):
					t.Fatal("kafka:10 not persisted within 10 s of a panic")
				}
			}
			require.Equal(t, 1, failures)
			stopped := make(chan *messages.Stopped, 1)
			go func() {
				for ev := range sub.C() {
					if s, ok := ev.(*messages.Stopped); ok {
						stopped <- s
						return
					}
				}
			}()
			require.NoError(t, system.Root.PoisonFuture(pid).Wait())
			select {
			case s := <-stopped:
				require.True(t, s.Flushed)
				require.Equal(t, wal.KafkaID(10), s.LastPersisted)
			case <-time.After(10 * time.Second):
				t.Fatal("no Stopped within 10 s of the stop")
			}
			sub.Close()
			stored, err := cat.Memory.Load(context.Background(), "p")
			require.NoError(t, err)
			require.Equal(t, wal.KafkaID(10), stored)
		})
	}
}
