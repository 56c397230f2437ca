package actors

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
)

// TestMPSCKeepsEachProducersOrder pushes from many goroutines at once and
// pops from one: every message arrives once, and each producer's in the
// order it pushed them. Run under -race, it also checks the publication.
func TestMPSCKeepsEachProducersOrder(t *testing.T) {
	const producers, each = 8, 20_000
	var q mpsc[any]
	q.init()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				q.push([2]int{p, i})
			}
		}()
	}
	next := make([]int, producers)
	deadline := time.Now().Add(time.Minute)
	for got := 0; got < producers*each; {
		m, ok := q.pop()
		if !ok {
			require.True(t, time.Now().Before(deadline), "only %d of %d messages within a minute", got, producers*each)
			continue
		}
		pi := m.([2]int)
		require.Equal(t, next[pi[0]], pi[1], "producer %d out of order", pi[0])
		next[pi[0]]++
		got++
	}
	wg.Wait()
	_, ok := q.pop()
	require.False(t, ok)
	require.False(t, q.ready())
}

// invoker records what a mailbox delivers, and can panic on a message or
// ask for mailboxDrained.
type invoker struct {
	mu        sync.Mutex
	got       []any
	escalated []any
	panicOn   any
	want      atomic.Bool // wantsDrained
	delivered chan struct{}
}

func (r *invoker) record(m any) {
	r.mu.Lock()
	r.got = append(r.got, m)
	r.mu.Unlock()
	select {
	case r.delivered <- struct{}{}:
	default:
	}
}

func (r *invoker) InvokeSystemMessage(m any) { r.record(m) }
func (r *invoker) InvokeUserMessage(m any) {
	if _, ok := m.(mailboxDrained); ok {
		r.want.Store(false)
	}
	r.record(m)
	if m == r.panicOn {
		panic("boom")
	}
}
func (r *invoker) EscalateFailure(reason, m any) {
	r.mu.Lock()
	r.escalated = append(r.escalated, reason, m)
	r.mu.Unlock()
}

// Actor makes the invoker its own actor, as an actor context is.
func (r *invoker) Actor() actor.Actor    { return r }
func (r *invoker) Receive(actor.Context) {}
func (r *invoker) wantsDrained() bool    { return r.want.Load() }

func (r *invoker) messages() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.got...)
}

func newTestMailbox(r *invoker) *mailbox {
	m := newDrainingMailbox().(*mailbox)
	m.RegisterHandlers(r, actor.NewSynchronizedDispatcher(300))
	m.Start()
	return m
}

func TestMailboxSystemFirstSuspendResume(t *testing.T) {
	r := &invoker{}
	m := newTestMailbox(r)
	// Suspended, it takes system messages only; user messages wait.
	m.PostSystemMessage(&actor.SuspendMailbox{})
	m.PostUserMessage("u1")
	m.PostSystemMessage("s1")
	require.Equal(t, []any{"s1"}, r.messages())
	require.Equal(t, 1, m.UserMessageCount())
	m.PostSystemMessage(&actor.ResumeMailbox{})
	require.Equal(t, []any{"s1", "u1"}, r.messages())
	require.Equal(t, 0, m.UserMessageCount())
}

func TestMailboxEscalatesAPanicAndCarriesOn(t *testing.T) {
	r := &invoker{panicOn: "bad"}
	m := newTestMailbox(r)
	m.PostUserMessage("bad")
	m.PostUserMessage("good")
	require.Equal(t, []any{"bad", "good"}, r.messages())
	require.Equal(t, []any{"boom", "bad"}, r.escalated)
}

// batch is an actor.MessageBatch.
type batch []any

func (b *batch) GetMessages() []any { return *b }

func TestMailboxUnpacksBatches(t *testing.T) {
	r := &invoker{}
	m := newTestMailbox(r)
	batch := &batch{"a", "b"}
	m.PostUserMessage(batch)
	require.Equal(t, []any{"a", "b", batch}, r.messages())
}

func TestMailboxDrainedOnlyWhenWanted(t *testing.T) {
	r := &invoker{}
	m := newTestMailbox(r)
	m.PostUserMessage("a")
	require.Equal(t, []any{"a"}, r.messages())
	r.want.Store(true)
	m.PostUserMessage("b")
	require.Equal(t, []any{"a", "b", mailboxDrained{}}, r.messages())
	m.PostUserMessage("c")
	require.Equal(t, []any{"a", "b", mailboxDrained{}, "c"}, r.messages())
}

// TestMailboxDrainedAfterTheBurst posts a burst while the mailbox is busy:
// mailboxDrained comes once, after the last message of the burst.
func TestMailboxDrainedAfterTheBurst(t *testing.T) {
	r := &invoker{delivered: make(chan struct{}, 1)}
	m := newDrainingMailbox().(*mailbox)
	m.RegisterHandlers(r, actor.NewDefaultDispatcher(300))
	// Hold the mailbox as if its goroutine were busy, so the burst queues.
	require.True(t, m.running.CompareAndSwap(false, true))
	r.want.Store(true)
	for i := range 100 {
		m.PostUserMessage(i)
	}
	go m.process()
	want := make([]any, 0, 101)
	for i := range 100 {
		want = append(want, i)
	}
	want = append(want, mailboxDrained{})
	require.Eventually(t, func() bool { return len(r.messages()) == len(want) }, 10*time.Second, time.Millisecond)
	require.Equal(t, want, r.messages())
}

// TestMailboxManySenders has senders race a goroutine dispatcher going
// idle and waking: nothing is lost or taken twice.
func TestMailboxManySenders(t *testing.T) {
	const senders, each = 8, 5_000
	r := &invoker{}
	m := newDrainingMailbox().(*mailbox)
	m.RegisterHandlers(r, actor.NewDefaultDispatcher(300))
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m.PostUserMessage(fmt.Sprint(s, "/", i))
			}
		}()
	}
	wg.Wait()
	require.Eventually(t, func() bool { return len(r.messages()) == senders*each }, time.Minute, time.Millisecond)
	seen := map[any]bool{}
	for _, msg := range r.messages() {
		require.False(t, seen[msg], "%v delivered twice", msg)
		seen[msg] = true
	}
	require.Eventually(t, func() bool { return !m.running.Load() }, 10*time.Second, time.Millisecond)
}

// afterInvoker starts a blocking task from a handler through runAfter, as
// the persister starts a save, and a stop comes in meanwhile.
type afterInvoker struct {
	m       *mailbox
	release chan struct{}
	stopped chan struct{}
	ran     chan struct{}
}

func (r *afterInvoker) InvokeSystemMessage(msg any) {
	if msg == "stop" {
		close(r.stopped)
	}
}

func (r *afterInvoker) InvokeUserMessage(msg any) {
	if msg == "start" {
		r.m.runAfter(funcTask(func() {
			close(r.ran)
			<-r.release
		}))
		r.m.PostSystemMessage("stop")
	}
}

func (r *afterInvoker) EscalateFailure(any, any) {}

// TestMailboxRunAfterHoldsUpNoMessage: a system message that comes while a
// handler starts a slow task is handled while the task runs, not after.
func TestMailboxRunAfterHoldsUpNoMessage(t *testing.T) {
	r := &afterInvoker{m: newMailbox(), release: make(chan struct{}), stopped: make(chan struct{}), ran: make(chan struct{})}
	defer close(r.release)
	r.m.RegisterHandlers(r, actor.NewDefaultDispatcher(300))
	r.m.PostUserMessage("start")
	for what, c := range map[string]chan struct{}{"the task": r.ran, "the stop": r.stopped} {
		select {
		case <-c:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not run while the task blocked", what)
		}
	}
}

// chainInvoker starts, from each message, a task that delivers the next
// message: as each save's result starts the next save.
type chainInvoker struct {
	m        *mailbox
	last     int
	maxDepth int
	done     chan struct{}
}

type chainStep struct {
	m *mailbox
	i int
}

func (c chainStep) run() task { return c.m.deliver(c.i) }

func (r *chainInvoker) InvokeSystemMessage(any)  {}
func (r *chainInvoker) EscalateFailure(any, any) {}
func (r *chainInvoker) InvokeUserMessage(msg any) {
	pcs := make([]uintptr, 4096)
	r.maxDepth = max(r.maxDepth, runtime.Callers(0, pcs))
	i := msg.(int)
	if i == r.last {
		close(r.done)
		return
	}
	r.m.runAfter(chainStep{r.m, i + 1})
}

// TestMailboxChainOfTasksDoesNotRecurse: a task run after a handler whose
// result starts the next one runs in a loop on one goroutine; run one
// inside the other, a long enough chain of saves overflowed the stack.
func TestMailboxChainOfTasksDoesNotRecurse(t *testing.T) {
	r := &chainInvoker{m: newMailbox(), last: 2000, done: make(chan struct{})}
	r.m.RegisterHandlers(r, actor.NewDefaultDispatcher(300))
	r.m.PostUserMessage(0)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the chain did not end")
	}
	require.Less(t, r.maxDepth, 64, "the stack grows with the chain")
}

// The count of waiting messages is right once a run ends, with more
// messages than a segment holds and more than a run takes in a row.
func TestMailboxCountsWhatWaits(t *testing.T) {
	r := &invoker{}
	m := newTestMailbox(r) // runs on the posting goroutine
	m.PostSystemMessage(&actor.SuspendMailbox{})
	for i := range 1000 {
		m.PostUserMessage(i)
	}
	require.Equal(t, 1000, m.UserMessageCount())
	m.PostSystemMessage(&actor.ResumeMailbox{})
	require.Len(t, r.messages(), 1000)
	require.Equal(t, 0, m.UserMessageCount())
}

// A handled message must not stay reachable from the queue: an idle
// mailbox would otherwise hold it (an UpdateBatch and its slice, say) for
// as long as the mailbox lives.
func TestMailboxKeepsNothingItHandled(t *testing.T) {
	r := &invoker{}
	m := newTestMailbox(r) // runs on the posting goroutine
	for i := range segmentCells + 3 {
		m.PostUserMessage(i)
	}
	require.Len(t, r.messages(), segmentCells+3)
	require.Equal(t, 3, m.user.at, "the run ends inside the second segment")
	for i := range m.user.head.cells {
		require.Nil(t, m.user.head.cells[i].msg, "cell %d", i)
	}
}

// A request or a stop gets a worker of its own, but a Sender's batch is
// the data plane: it waits its turn in the pool's queue, as a bare update
// does. A batch that anyone else asks for is a request like any other.
func TestMailboxSendersBatchesWaitTheirTurnRequestsDoNot(t *testing.T) {
	p := newPool(time.Millisecond, 4)
	p.coming.Store(1) // as if one had been woken: what is not urgent queues
	batches, asks := &invoker{delivered: make(chan struct{}, 1)}, &invoker{delivered: make(chan struct{}, 1)}
	mb, ma := newTestMailbox(batches), newTestMailbox(asks)
	mb.pool, ma.pool = p, p
	batch := &actor.MessageEnvelope{Message: &messages.UpdateBatch{}, Sender: actor.NewPID("local", senderIDPrefix+"1")}
	ask := &actor.MessageEnvelope{Message: &messages.UpdateBatch{}, Sender: actor.NewPID("local", "future$1")}

	mb.PostUserMessage(batch)
	p.mu.Lock()
	require.Equal(t, 1, p.queuedLocked(), "the batch is not queued")
	p.mu.Unlock()
	require.Zero(t, p.live.Load(), "a worker was started for the batch")

	// The request's own worker runs it, and then takes the queued batch.
	ma.PostUserMessage(ask)
	for _, r := range []*invoker{asks, batches} {
		select {
		case <-r.delivered:
		case <-time.After(10 * time.Second):
			t.Fatal("the request, or the batch after it, did not run")
		}
	}
	require.Equal(t, []any{ask}, asks.messages())
	require.Equal(t, []any{batch}, batches.messages())
	p.arrived() // the worker on its way comes at last, to find nothing to do
	requireSettled(t, p)
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// On a pool, a mailbox whose turn is over (Throughput messages in a row)
// goes to the back of the pool's queue, and its goroutine runs what waited
// there; with nothing waiting, it goes on. It never yields its goroutine
// to the scheduler, behind every goroutine ready to run.
func TestMailboxTurnOverGoesToTheBackOfThePool(t *testing.T) {
	p := newPool(time.Millisecond, 4)
	r := &invoker{}
	m := newDrainingMailbox().(*mailbox)
	m.RegisterHandlers(r, actor.NewSynchronizedDispatcher(2))
	m.pool = p
	m.running.Store(true) // the test runs it, by hand
	for i := range 8 {
		m.PostUserMessage(i)
	}
	var ran []string
	p.coming.Store(1) // as if one had been woken: the other task queues
	p.Go(funcTask(func() { ran = append(ran, "other") }))

	next := drainTask{m}.run()
	require.Equal(t, []any{0, 1, 2}, r.messages(), "a turn is Throughput messages and one more")
	require.NotNil(t, next)
	require.Nil(t, next.run())
	require.Equal(t, []string{"other"}, ran)
	p.mu.Lock()
	require.Equal(t, 1, p.queuedLocked(), "the mailbox is not queued behind it")
	back := p.dequeueLocked()
	p.mu.Unlock()
	require.Equal(t, drainTask{m}, back)

	// Its turn again, and nothing waits: past its turn, it goes on to
	// the end.
	require.Nil(t, back.run())
	require.Equal(t, []any{0, 1, 2, 3, 4, 5, 6, 7}, r.messages())
	require.False(t, m.running.Load())
	p.coming.Store(0)
}

// TestMailboxHeldUntilRegistered: protoactor makes a PID known before it
// registers the mailbox's handlers; a message posted in between used to
// start a mailbox with no dispatcher, panicking in the sender. It waits
// for the registration instead, and is delivered then.
func TestMailboxHeldUntilRegistered(t *testing.T) {
	m := newDrainingMailbox().(*mailbox)
	m.PostUserMessage("early")
	r := &invoker{}
	m.RegisterHandlers(r, actor.NewSynchronizedDispatcher(300))
	require.Equal(t, []any{"early"}, r.messages())
}

// actorInvoker is an invoker of an actor system's, as an actor context is.
type actorInvoker struct {
	*invoker
	system *actor.ActorSystem
}

func (a actorInvoker) ActorSystem() *actor.ActorSystem { return a.system }

// TestMailboxWaitsForStarted: an actor's mailbox hands on no user message
// before the actor handled Started, which protoactor posts only after the
// registration: a message posted by name during the spawn reached a
// pchannel with no tracker, which panicked, and the update was lost.
func TestMailboxWaitsForStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		system := actor.NewActorSystem()
		r := actorInvoker{invoker: &invoker{}, system: system}
		m := newDrainingMailbox().(*mailbox)
		m.PostUserMessage("before registration")
		m.RegisterHandlers(r, actor.NewDefaultDispatcher(300))
		m.PostUserMessage("before Started")
		synctest.Wait()
		require.Empty(t, r.messages(), "handed on before Started")
		started := &actor.Started{}
		m.PostSystemMessage(started)
		synctest.Wait()
		require.Equal(t, []any{started, "before registration", "before Started"}, r.messages())
		system.Shutdown()
		time.Sleep(3 * poolIdleFor) // the bubble's clock: the pool sheds its idle workers
	})
}

// TestMailboxStartedFirst: a Stop posted by name during the spawn, before
// protoactor posted Started, was handled first: the actor stopped without
// ever starting, and a pchannel's Stopped handler panicked on its missing
// tracker, so no Stopped was published and the stop never completed.
func TestMailboxStartedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		system := actor.NewActorSystem()
		r := actorInvoker{invoker: &invoker{}, system: system}
		m := newDrainingMailbox().(*mailbox)
		m.RegisterHandlers(r, actor.NewDefaultDispatcher(300))
		stop := &actor.Stop{}
		m.PostSystemMessage(stop)
		synctest.Wait()
		require.Empty(t, r.messages(), "handled before Started")
		started := &actor.Started{}
		m.PostSystemMessage(started)
		synctest.Wait()
		require.Equal(t, []any{started, stop}, r.messages())
		system.Shutdown()
		time.Sleep(3 * poolIdleFor) // the bubble's clock: the pool sheds its idle workers
	})
}
