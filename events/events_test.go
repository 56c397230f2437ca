package events_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testBound bounds every wait on something that must happen; a test that
// hits it has found a blocked publisher or a lost event.
const testBound = 10 * time.Second

func advanced(pchannel string, i int) *messages.MinimumAdvanced {
	return &messages.MinimumAdvanced{Header: messages.Header{PChannel: pchannel, At: time.Now()}, To: wal.KafkaID(i)}
}

func seqOf(t *testing.T, ev messages.Event) int {
	t.Helper()
	m, ok := ev.(*messages.MinimumAdvanced)
	require.True(t, ok, "unexpected event %T", ev)
	return int(m.To.(wal.KafkaID))
}

// publishAll publishes the events numbered from..to for pchannel and fails
// the test if publishing does not return: the publisher must never block.
func publishAll(t *testing.T, es *eventstream.EventStream, pchannel string, from, to int) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := from; i <= to; i++ {
			es.Publish(advanced(pchannel, i))
		}
	}()
	select {
	case <-done:
	case <-time.After(testBound):
		t.Fatalf("publishing events %d..%d blocked behind a slow subscriber", from, to)
	}
}

// checkOrdered checks that got is strictly increasing, ends with last, and
// that got plus dropped accounts for every one of n events.
func checkOrdered(t *testing.T, got []int, dropped uint64, n int) {
	t.Helper()
	require.NotEmpty(t, got)
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1], got[i], "events out of order at %d: %v", i, got)
	}
	assert.Equal(t, n, got[len(got)-1], "the newest event must survive")
	assert.Equal(t, uint64(n), uint64(len(got))+dropped, "delivered + dropped must be every event")
}

func TestChannelDropsOldest(t *testing.T) {
	es := eventstream.NewEventStream()
	sub, err := events.Subscribe(es, events.WithBuffer(8))
	require.NoError(t, err)

	publishAll(t, es, "p0", 1, 100) // nobody reads: the slowest consumer
	assert.Equal(t, uint64(92), sub.Dropped())
	sub.Close()

	var got []int
	for ev := range sub.C() { // closed after what was buffered
		got = append(got, seqOf(t, ev))
	}
	assert.Equal(t, []int{93, 94, 95, 96, 97, 98, 99, 100}, got)
	checkOrdered(t, got, sub.Dropped(), 100)

	es.Publish(advanced("p0", 101)) // after Close: ignored, no panic
	sub.Close()                     // idempotent
}

func TestFuncSlowSubscriber(t *testing.T) {
	es := eventstream.NewEventStream()
	gate := make(chan struct{})
	first := make(chan struct{})
	var got []int // written by the subscription's goroutine only
	var once sync.Once
	sub, err := events.SubscribeFunc(es, func(ev messages.Event) {
		once.Do(func() {
			close(first)
			<-gate // deliberately slow: stuck until the publisher is done
		})
		got = append(got, seqOf(t, ev))
	}, events.WithBuffer(16))
	require.NoError(t, err)

	es.Publish(advanced("p0", 1))
	<-first // the subscriber is now stuck inside its first event
	publishAll(t, es, "p0", 2, 1000)
	assert.Equal(t, uint64(1000-1-16), sub.Dropped(), "all but the one in hand and the buffer")
	close(gate)
	sub.Close() // delivers what is buffered, joins the goroutine
	checkOrdered(t, got, sub.Dropped(), 1000)
	assert.Len(t, got, 17)
}

// A Lossless subscription loses nothing: a consumer that lags makes the
// publisher wait, and says how often.
func TestLosslessBlocksInsteadOfDropping(t *testing.T) {
	es := eventstream.NewEventStream()
	gate := make(chan struct{})
	var got []int
	sub, err := events.SubscribeFunc(es, func(ev messages.Event) {
		<-gate
		got = append(got, seqOf(t, ev))
	}, events.WithBuffer(4), events.Lossless())
	require.NoError(t, err)
	const n = 1000
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := 1; i <= n; i++ {
			es.Publish(advanced("p0", i))
		}
	}()
	// The consumer is stuck in its first event: the buffer fills and the
	// publisher waits rather than drop.
	require.Eventually(t, func() bool { return sub.Blocked() > 0 }, testBound, time.Millisecond)
	select {
	case <-published:
		t.Fatal("the publisher finished although the consumer took nothing")
	default:
	}
	close(gate)
	select {
	case <-published:
	case <-time.After(testBound):
		t.Fatal("the publisher stayed blocked after the consumer caught up")
	}
	sub.Close()
	require.Len(t, got, n)
	checkOrdered(t, got, sub.Dropped(), n)
	assert.Zero(t, sub.Dropped())
}

func TestFilters(t *testing.T) {
	es := eventstream.NewEventStream()
	sub, err := events.Subscribe(es, events.ForPChannels("p1", "p2"),
		events.WithFilter(func(ev messages.Event) bool {
			_, ok := ev.(*messages.MinimumAdvanced)
			return ok
		}))
	require.NoError(t, err)
	es.Publish(advanced("p0", 1))
	es.Publish(advanced("p1", 2))
	es.Publish(&messages.CheckpointPersisted{Header: messages.Header{PChannel: "p1", At: time.Now()}, Value: wal.KafkaID(2)})
	es.Publish(advanced("p2", 3))
	es.Publish("not a lowwater event")
	sub.Close()
	var got []string
	for ev := range sub.C() {
		got = append(got, ev.EventHeader().PChannel)
	}
	assert.Equal(t, []string{"p1", "p2"}, got)
	assert.Zero(t, sub.Dropped())
}

// Several WithFilter narrow together, as ForPChannels and WithFilter do:
// an event passes only if every filter keeps it. The last one given used
// to replace the others.
func TestFiltersNarrowTogether(t *testing.T) {
	es := eventstream.NewEventStream()
	var asked []string
	sub, err := events.Subscribe(es,
		events.WithFilter(func(ev messages.Event) bool {
			asked = append(asked, "pchannel")
			return ev.EventHeader().PChannel == "p1"
		}),
		events.WithFilter(func(ev messages.Event) bool {
			asked = append(asked, "kind")
			_, ok := ev.(*messages.MinimumAdvanced)
			return ok
		}))
	require.NoError(t, err)
	es.Publish(advanced("p0", 1))
	es.Publish(&messages.CheckpointPersisted{Header: messages.Header{PChannel: "p1", At: time.Now()}, Value: wal.KafkaID(2)})
	es.Publish(advanced("p1", 3))
	sub.Close()
	var got []int
	for ev := range sub.C() {
		got = append(got, seqOf(t, ev))
	}
	assert.Equal(t, []int{3}, got)
	assert.Equal(t, []string{"pchannel", "pchannel", "kind", "pchannel", "kind"}, asked, "in the order given, stopping at the first that refuses")
	assert.Zero(t, sub.Dropped())
}

// Many publishers at once against one consumer: each publisher's events
// arrive in its order, and none is lost without being counted.
func TestConcurrentPublishers(t *testing.T) {
	es := eventstream.NewEventStream()
	last := map[string]int{}
	delivered := 0
	sub, err := events.SubscribeFunc(es, func(ev messages.Event) {
		p, i := ev.EventHeader().PChannel, seqOf(t, ev)
		if i <= last[p] {
			t.Errorf("%s: event %d after %d", p, i, last[p])
		}
		last[p] = i
		delivered++
	}, events.WithBuffer(64))
	require.NoError(t, err)
	const publishers, n = 8, 2000
	var wg sync.WaitGroup
	for p := range publishers {
		name := string(rune('a' + p))
		wg.Go(func() {
			for i := 1; i <= n; i++ {
				es.Publish(advanced(name, i))
			}
		})
	}
	wg.Wait()
	sub.Close()
	assert.Equal(t, uint64(publishers*n), uint64(delivered)+sub.Dropped())
}

// An event whose publish began before Close, and reaches the
// subscription after it, is not delivered, nor does it panic the
// publishing actor: protoactor calls the handlers of a copy of its
// subscriptions, taken before Close unsubscribed.
func TestPublishRacingCloseIsDropped(t *testing.T) {
	es := eventstream.NewEventStream()
	held := holdFirst(es)
	sub, err := events.Subscribe(es)
	require.NoError(t, err)
	published := held.publish(t, advanced("p", 1))
	sub.Close()
	held.release()
	waitFor(t, published, "the publish to return")
	for ev := range sub.C() {
		t.Fatalf("delivered after Close: %v", ev)
	}
}

// heldPublish is a handler subscribed first to a stream, which holds the
// next publish before the subscriptions after it until release.
type heldPublish struct {
	es               *eventstream.EventStream
	entered, proceed chan struct{}
}

func holdFirst(es *eventstream.EventStream) heldPublish {
	h := heldPublish{es: es, entered: make(chan struct{}), proceed: make(chan struct{})}
	es.Subscribe(func(any) {
		close(h.entered)
		<-h.proceed
	})
	return h
}

// publish publishes ev on es from a goroutine of its own, returns once the
// handler holds it, and a channel closed when the publish has returned.
func (h heldPublish) publish(t *testing.T, ev messages.Event) <-chan struct{} {
	t.Helper()
	published := make(chan struct{})
	go func() {
		defer close(published)
		h.es.Publish(ev)
	}()
	waitFor(t, h.entered, "the publish to begin")
	return published
}

func (h heldPublish) release() { close(h.proceed) }

// A publish that took its list of subscribers before Close unsubscribed,
// and reaches the subscription once Close has begun, delivers nothing: a
// subscription made meanwhile, which may already take events, never takes
// one this one takes too. The publish is held in a handler subscribed
// first; Close is held between its beginning and its Unsubscribe by a
// reader of the stream's lock.
func TestCloseTakesNoEventOnceBegun(t *testing.T) {
	es := eventstream.NewEventStream()
	held := holdFirst(es)
	sub, err := events.Subscribe(es)
	require.NoError(t, err)
	published := held.publish(t, advanced("p", 1))

	es.RLock() // Unsubscribe waits for it
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		sub.Close()
	}()
	deadline := time.Now().Add(testBound)
	for sub.Overlaps(sub) { // until Close has begun
		require.True(t, time.Now().Before(deadline), "Close did not begin")
		runtime.Gosched()
	}
	held.release()
	waitFor(t, published, "the publish to return")
	es.RUnlock()
	waitFor(t, closed, "Close to return")
	for ev := range sub.C() {
		t.Fatalf("taken once Close had begun: %v", ev)
	}
}

// Admit refuses a subscription before it takes any event, with the check's
// own error, and leaves nothing subscribed; an event published while the
// check runs is not taken by the subscription it lets through.
func TestAdmit(t *testing.T) {
	es := eventstream.NewEventStream()
	errFull := errors.New("full")
	var checked []string
	_, err := events.SubscribeFunc(es, func(messages.Event) { t.Error("a refused subscription took an event") },
		events.Admit(func(*events.Subscription) error { checked = append(checked, "first"); return nil }),
		events.Admit(func(s *events.Subscription) error {
			checked = append(checked, "second")
			es.Publish(advanced("p", 1))
			require.True(t, s.Overlaps(s), "the check sees the subscription it admits")
			return errFull
		}),
		events.Admit(func(*events.Subscription) error { checked = append(checked, "third"); return nil }))
	require.ErrorIs(t, err, errFull)
	assert.Equal(t, []string{"first", "second"}, checked, "checks in order, up to the first error")
	assert.Zero(t, es.Length(), "a refused subscription must leave nothing subscribed")

	sub, err := events.Subscribe(es, events.Admit(func(*events.Subscription) error {
		es.Publish(advanced("p", 1))
		return nil
	}))
	require.NoError(t, err)
	es.Publish(advanced("p", 2))
	sub.Close()
	var got []int
	for ev := range sub.C() {
		got = append(got, seqOf(t, ev))
	}
	assert.Equal(t, []int{2}, got, "only what was published once it was admitted")
}

// A subscription refused by a later check is closed, so that an earlier
// check that kept it can let it go: Done is closed, Close returns, and it
// overlaps nothing. One a check closes is refused, and Subscribe returns.
// Before, the first never ended, and the second hung in Subscribe.
func TestAdmitEndsWhatItRefuses(t *testing.T) {
	es := eventstream.NewEventStream()
	for _, subscribe := range []func(...events.Option) (*events.Subscription, error){
		func(opts ...events.Option) (*events.Subscription, error) { return events.Subscribe(es, opts...) },
		func(opts ...events.Option) (*events.Subscription, error) {
			return events.SubscribeFunc(es, func(messages.Event) {}, opts...)
		},
	} {
		var kept *events.Subscription
		_, err := subscribe(
			events.Admit(func(s *events.Subscription) error { kept = s; return nil }),
			events.Admit(func(*events.Subscription) error { return errors.New("refused") }))
		require.EqualError(t, err, "refused")
		waitFor(t, kept.Done(), "the refused subscription to end")
		kept.Close()
		require.False(t, kept.Overlaps(kept), "a refused subscription overlaps nothing")

		returned := make(chan error, 1)
		go func() {
			_, err := subscribe(events.Admit(func(s *events.Subscription) error { s.Close(); return nil }))
			returned <- err
		}()
		select {
		case err := <-returned:
			require.ErrorIs(t, err, events.ErrInvalidOption)
		case <-time.After(testBound):
			t.Fatal("Subscribe hung on a check that closed its subscription")
		}
		require.Zero(t, es.Length(), "nothing subscribed")
	}
}

func waitFor(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(testBound):
		t.Fatalf("waited too long for %s", what)
	}
}

func TestInvalidOptions(t *testing.T) {
	es := eventstream.NewEventStream()
	for name, opts := range map[string][]events.Option{
		"buffer 0":     {events.WithBuffer(0)},
		"buffer 2^40":  {events.WithBuffer(1 << 40)}, // allocated whole, it ended the process
		"buffer max+1": {events.WithBuffer(events.MaxBuffer + 1)},
		"no pchannels": {events.ForPChannels()},
		"empty name":   {events.ForPChannels("p0", "")},
		"nil filter":   {events.WithFilter(nil)},
		"nil admit":    {events.Admit(nil)},
		"nil option":   {nil},
	} {
		_, err := events.Subscribe(es, opts...)
		assert.ErrorIs(t, err, events.ErrInvalidOption, name)
	}
	sub, err := events.Subscribe(es, events.WithBuffer(events.MaxBuffer))
	require.NoError(t, err)
	sub.Close()
	_, err = events.Subscribe(nil)
	assert.ErrorIs(t, err, events.ErrInvalidOption)
	_, err = events.SubscribeFunc(es, nil)
	assert.ErrorIs(t, err, events.ErrInvalidOption)
	assert.Zero(t, es.Length(), "a failed Subscribe must leave no subscription")
}

// A handler ends its own subscription with go sub.Close(), as Close's doc
// says: the Close returns once the handler has, nothing is delivered past
// the events already buffered, and no goroutine is left (goleak).
func TestHandlerEndsItsOwnSubscription(t *testing.T) {
	es := eventstream.NewEventStream()
	var sub *events.Subscription
	closed := make(chan struct{})
	var got []int // written by the subscription's goroutine only
	sub, err := events.SubscribeFunc(es, func(ev messages.Event) {
		got = append(got, seqOf(t, ev))
		if seqOf(t, ev) == 3 {
			go func() {
				sub.Close()
				close(closed)
			}()
		}
	})
	require.NoError(t, err)
	publishAll(t, es, "p0", 1, 3)
	select {
	case <-closed:
	case <-time.After(testBound):
		t.Fatal("go sub.Close() from the handler did not return")
	}
	publishAll(t, es, "p0", 4, 6) // unsubscribed: not delivered
	require.Equal(t, []int{1, 2, 3}, got)
}

// TestLosslessCloseBeforeReading: Close, then read what was buffered, as
// the README's quick start does. With the buffer full and a Lossless
// publisher waiting on it, Close waited for that publisher, which waited
// for a reader that would only read once Close returned: both, and the
// publishing actor with them, for good.
func TestLosslessCloseBeforeReading(t *testing.T) {
	es := eventstream.NewEventStream()
	sub, err := events.Subscribe(es, events.Lossless(), events.WithBuffer(2))
	require.NoError(t, err)
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range 3 {
			es.Publish(advanced("p", i))
		}
	}()
	require.Eventually(t, func() bool { return sub.Blocked() == 1 }, testBound, time.Millisecond, "the third event waits")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		sub.Close()
	}()
	for _, c := range []chan struct{}{closed, published} {
		select {
		case <-c:
		case <-time.After(testBound):
			t.Fatal("Close, or the publisher, still waits")
		}
	}
	var got []int
	for ev := range sub.C() {
		got = append(got, seqOf(t, ev))
	}
	require.Equal(t, []int{0, 1}, got, "the buffered events are still read")
	require.Equal(t, uint64(1), sub.Dropped(), "the event its publisher gave up at Close is counted")
}

// TestSubscriptionSurvivesBadEvents: a typed nil event published by a
// neighbour panicked on the consumer's goroutine (the metrics collector's,
// ending the process), and a filter that panics kept the event from every
// subscriber after it. Both drop that event for that subscription only.
func TestSubscriptionSurvivesBadEvents(t *testing.T) {
	es := eventstream.NewEventStream()
	seen := make(chan int, 4)
	fn, err := events.SubscribeFunc(es, func(ev messages.Event) { seen <- seqOf(t, ev) }, events.ForPChannels("p"))
	require.NoError(t, err)
	defer fn.Close()
	panicky, err := events.Subscribe(es, events.WithFilter(func(ev messages.Event) bool {
		if seqOf(t, ev) == 1 {
			panic("filter")
		}
		return true
	}))
	require.NoError(t, err)
	after, err := events.Subscribe(es)
	require.NoError(t, err)

	es.Publish((*messages.CheckpointPersisted)(nil))
	es.Publish(advanced("p", 1))
	es.Publish(advanced("p", 2))

	for _, want := range []int{1, 2} {
		select {
		case got := <-seen:
			require.Equal(t, want, got)
		case <-time.After(testBound):
			t.Fatalf("event %d never reached the func subscriber", want)
		}
	}
	panicky.Close()
	var kept []int
	for ev := range panicky.C() {
		kept = append(kept, seqOf(t, ev))
	}
	require.Equal(t, []int{2}, kept, "the event its filter panicked on is dropped")
	after.Close()
	var got []int
	for ev := range after.C() {
		got = append(got, seqOf(t, ev))
	}
	require.Equal(t, []int{1, 2}, got, "a subscriber after the panicking filter sees every event")
}

// Done closes when Close ends the subscription, not before, and after a
// SubscribeFunc handler's last call.
func TestDone(t *testing.T) {
	es := eventstream.NewEventStream()
	ch, err := events.Subscribe(es)
	require.NoError(t, err)
	var last atomic.Int64
	fn, err := events.SubscribeFunc(es, func(ev messages.Event) { last.Store(int64(seqOf(t, ev))) })
	require.NoError(t, err)

	publishAll(t, es, "p0", 1, 10)
	for _, sub := range []*events.Subscription{ch, fn} {
		select {
		case <-sub.Done():
			t.Fatal("Done closed before Close")
		default:
		}
	}
	ch.Close()
	fn.Close()
	for _, sub := range []*events.Subscription{ch, fn} {
		select {
		case <-sub.Done():
		default:
			t.Fatal("Done still open after Close returned")
		}
	}
	assert.Equal(t, int64(10), last.Load(), "the handler had every event before Done")
	assert.Len(t, ch.C(), 10, "Done does not drain the channel of Subscribe")
}

// A handler that ends its goroutine (runtime.Goexit, as t.FailNow does)
// ends its subscription: a Lossless publisher is not held up for good by
// a buffer that nothing reads again, and what the buffer held counts as
// dropped.
func TestAHandlerThatEndsItsGoroutineEndsTheSubscription(t *testing.T) {
	es := eventstream.NewEventStream()
	got, gate := make(chan struct{}), make(chan struct{})
	sub, err := events.SubscribeFunc(es, func(messages.Event) {
		got <- struct{}{}
		<-gate
		runtime.Goexit()
	}, events.WithBuffer(2), events.Lossless())
	require.NoError(t, err)
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := 1; i <= 10; i++ {
			es.Publish(advanced("p0", i))
		}
	}()
	<-got
	require.Eventually(t, func() bool { return sub.Blocked() > 0 }, testBound, time.Millisecond, "the buffer fills")
	close(gate)
	select {
	case <-published:
	case <-time.After(testBound):
		t.Fatal("a publisher is held up by a subscription whose handler is gone")
	}
	select {
	case <-sub.Done():
	case <-time.After(testBound):
		t.Fatal("the subscription did not end")
	}
	// The two buffered, never read; and any that a publisher waiting on
	// the full buffer gave up.
	require.GreaterOrEqual(t, sub.Dropped(), uint64(2))
	sub.Close() // idempotent, and returns at once
}

// A handler that ends its goroutine on an event published while
// SubscribeFunc returns still ends the subscription: it is subscribed
// before the handler's goroutine starts, and unsubscribed by its end.
func TestAHandlerThatEndsItsGoroutineAtOnceIsUnsubscribed(t *testing.T) {
	es := eventstream.NewEventStream()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			es.Publish(advanced("p0", i))
		}
	}()
	for range 500 {
		sub, err := events.SubscribeFunc(es, func(messages.Event) { runtime.Goexit() })
		require.NoError(t, err)
		select {
		case <-sub.Done():
		case <-time.After(testBound):
			t.Fatal("the subscription did not end")
		}
	}
	stop.Store(true)
	<-done
	require.Zero(t, es.Length(), "subscriptions left on the stream after every one ended")
}

// Overlaps is sure of an overlap only where the pchannels are known: the
// same stream, and ForPChannels that share a name or none at all. A
// filter of the caller's may split them, and a closed subscription takes
// nothing.
func TestOverlaps(t *testing.T) {
	es, other := eventstream.NewEventStream(), eventstream.NewEventStream()
	sub := func(es *eventstream.EventStream, opts ...events.Option) *events.Subscription {
		s, err := events.Subscribe(es, opts...)
		require.NoError(t, err)
		t.Cleanup(s.Close)
		return s
	}
	all := sub(es)
	keepAll := func(messages.Event) bool { return true }
	for _, tc := range []struct {
		name string
		b    *events.Subscription
		want bool
	}{
		{"itself", all, true},
		{"every pchannel twice", sub(es, events.WithBuffer(8)), true},
		{"another stream", sub(other), false},
		{"some of all", sub(es, events.ForPChannels("a", "b")), true},
		{"a filter, which may split them", sub(es, events.WithFilter(keepAll)), false},
	} {
		assert.Equal(t, tc.want, all.Overlaps(tc.b), tc.name)
		assert.Equal(t, tc.want, tc.b.Overlaps(all), "%s, the other way", tc.name)
	}
	ab, cd, bc := sub(es, events.ForPChannels("a", "b")), sub(es, events.ForPChannels("c", "d")), sub(es, events.ForPChannels("b", "c"))
	assert.False(t, ab.Overlaps(cd), "disjoint pchannels")
	assert.True(t, ab.Overlaps(bc), "b in both")
	assert.True(t, cd.Overlaps(bc), "c in both")

	closed := sub(es)
	closed.Close()
	assert.False(t, all.Overlaps(closed))
	assert.False(t, closed.Overlaps(closed))
	assert.False(t, all.Overlaps(nil))
	assert.False(t, (*events.Subscription)(nil).Overlaps(all))
	var zero, other0 events.Subscription
	assert.False(t, zero.Overlaps(&other0), "subscribed to nothing")
	filtered := sub(es, events.WithFilter(keepAll))
	assert.True(t, filtered.Overlaps(filtered), "itself, filter or not")
}
