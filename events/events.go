package events

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/lowwater/lowwater/messages"
)

// DefaultBuffer is how many events a Subscription holds for a consumer that
// lags before it drops the oldest (or, Lossless, blocks the publisher).
const DefaultBuffer = 1024

// MaxBuffer is the most WithBuffer takes. The buffer is made whole when
// the subscription is, 16 bytes an event: MaxBuffer's is 16 MiB, and a
// larger one, allocated before any event comes, could end the process
// (out of memory), which no error or recover stops.
const MaxBuffer = 1 << 20

// ErrInvalidOption is returned for a configuration that cannot work; nothing
// is subscribed.
var ErrInvalidOption = errors.New("events: invalid option")

// Option configures a Subscription.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	buffer    int
	pchannels map[string]struct{}
	filter    func(messages.Event) bool
	lossless  bool
	admit     []func(*Subscription) error
	errs      []error
}

// ForPChannels keeps only the events of the named pchannels. Without it a
// Subscription takes the events of every pchannel of the actor system. No
// name, or the empty one, which no pchannel has, is an ErrInvalidOption.
func ForPChannels(names ...string) Option {
	return optionFunc(func(c *config) {
		if len(names) == 0 {
			c.errs = append(c.errs, errors.New("ForPChannels names no pchannel"))
			return
		}
		if c.pchannels == nil {
			c.pchannels = make(map[string]struct{}, len(names))
		}
		for _, n := range names {
			if n == "" {
				// No pchannel has it: a filter on it would pass nothing.
				c.errs = append(c.errs, errors.New("ForPChannels names the empty pchannel name"))
				return
			}
			c.pchannels[n] = struct{}{}
		}
	})
}

// WithFilter keeps only the events keep returns true for. keep runs on the
// publishing actor's goroutine, before the buffer: it must be quick, must
// not block, and must be safe for concurrent use. An event it panics on is
// filtered out, for this subscription only (it is not counted in
// Dropped, which counts what the buffer lost). Filtering there is what
// keeps unwanted events from pushing wanted ones out of the buffer.
//
// Options narrow a subscription together: with several WithFilter, an
// event must pass every one, in the order given, and ForPChannels too.
func WithFilter(keep func(messages.Event) bool) Option {
	return optionFunc(func(c *config) {
		if keep == nil {
			c.errs = append(c.errs, errors.New("nil filter"))
			return
		}
		if prev := c.filter; prev != nil {
			c.filter = func(ev messages.Event) bool { return prev(ev) && keep(ev) }
			return
		}
		c.filter = keep
	})
}

// WithBuffer sets how many events wait for a lagging consumer before the
// oldest is dropped; n must be from 1 to MaxBuffer, and is allocated at
// Subscribe, 16 bytes an event. The default is DefaultBuffer.
func WithBuffer(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 || n > MaxBuffer {
			c.errs = append(c.errs, fmt.Errorf("buffer %d: want 1 to %d (MaxBuffer)", n, MaxBuffer))
			return
		}
		c.buffer = n
	})
}

// Lossless makes a full buffer wait for the consumer instead of dropping
// the oldest event: nothing is lost, and a lagging consumer slows the
// publishing actors instead (Blocked counts how often). It is for consumers
// that must see every event, such as an audit or the checks of a test; a
// dashboard or a metrics exporter prefers a counted gap to a slower
// pchannel.
//
// Slower actors hold back only the producers that wait for them: a
// request (actors.Request) or a Sender. Commands sent with a raw Send
// queue in the pchannel's mailbox meanwhile, which has no bound: the
// backlog the buffer does not hold is held there.
//
// Its consumer must never wait on a pchannel (actors.GetState,
// actors.Request, a Sender's Flush) while it handles events: once the
// buffer is full, the pchannel waits for the consumer, which then waits for
// the pchannel, until the request's deadline. Ask from another goroutine.
func Lossless() Option {
	return optionFunc(func(c *config) { c.lossless = true })
}

// Admit runs check on the subscription before it takes its first event,
// on the goroutine that subscribes: an error from check refuses it, and
// Subscribe or SubscribeFunc returns that error with nothing subscribed.
// check may ask the subscription what it would take (Overlaps). With
// several Admit, each runs in the order given, up to the first error; a
// subscription refused is closed (Done), so that a check before that kept
// it lets it go. One that a check closes is refused
// (ErrInvalidOption).
//
// It is for whoever keeps subscriptions and must refuse some of them: a
// metrics collector refuses one that would count an event twice, and
// keeps the one it admits, before that one has taken any event.
func Admit(check func(*Subscription) error) Option {
	return optionFunc(func(c *config) {
		if check == nil {
			c.errs = append(c.errs, errors.New("nil Admit check"))
			return
		}
		c.admit = append(c.admit, check)
	})
}

func newConfig(opts []Option) (config, error) {
	c := config{buffer: DefaultBuffer}
	for _, o := range opts {
		if o == nil {
			c.errs = append(c.errs, errors.New("nil option"))
			continue
		}
		o.apply(&c)
	}
	if len(c.errs) > 0 {
		return c, fmt.Errorf("%w: %w", ErrInvalidOption, errors.Join(c.errs...))
	}
	return c, nil
}

// Subscription is one consumer's subscription to lowwater's events on an
// actor system's EventStream. Its methods are safe for concurrent use.
type Subscription struct {
	es  *eventstream.EventStream
	sub *eventstream.Subscription
	cfg config

	// ch is the bounded buffer: the publishers push into it and, when it
	// is full, pull its oldest event out to make room.
	ch      chan messages.Event
	dropped atomic.Uint64
	blocked atomic.Uint64

	// mu orders pushes against Close, which closes ch under it: a
	// Publish that began before Unsubscribe may still call the handler
	// afterwards. It also guards sub and done, set as the subscription
	// is subscribed, once admitted (Admit), which a check that kept it
	// may Close meanwhile.
	mu sync.RWMutex
	// closing is closed when Close begins; from then on the handler
	// takes no event. It also ends a Lossless publisher's wait on a full
	// buffer: Close waits for mu, which that publisher holds, and the
	// consumer may only read once Close returned.
	closing chan struct{}

	// done is closed when the delivery goroutine (SubscribeFunc) has
	// ended, at once for Subscribe.
	done chan struct{}
	// ended is closed by Close, once done is (Done).
	ended     chan struct{}
	closeOnce sync.Once

	// toChan is set for Subscribe, whose consumer reads ch itself.
	toChan bool
}

// newSubscription makes the subscription, admits it (Admit), and
// subscribes it to es: to deliver to f on a goroutine of its own, or,
// with f nil, to its channel.
func newSubscription(es *eventstream.EventStream, opts []Option, f func(messages.Event)) (*Subscription, error) {
	if es == nil {
		return nil, fmt.Errorf("%w: nil event stream", ErrInvalidOption)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	s := &Subscription{
		es:      es,
		cfg:     cfg,
		ch:      make(chan messages.Event, cfg.buffer),
		done:    noGoroutine,
		ended:   make(chan struct{}),
		closing: make(chan struct{}),
		toChan:  f == nil,
	}
	for _, check := range cfg.admit {
		if err := check(s); err != nil {
			// Closed: a check before this one may have kept it.
			s.Close()
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isClosed() {
		return nil, fmt.Errorf("%w: closed by an Admit check before it was subscribed", ErrInvalidOption)
	}
	if f != nil {
		s.done = make(chan struct{})
		go s.deliver(f)
	}
	s.sub = es.Subscribe(s.handle)
	return s, nil
}

// noGoroutine is the done of a subscription with no goroutine of its own:
// one of Subscribe, or one not subscribed yet.
var noGoroutine = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Subscribe delivers the lowwater events published on es to a channel: read
// them from C. The channel is closed by Close, after the events still
// buffered.
func Subscribe(es *eventstream.EventStream, opts ...Option) (*Subscription, error) {
	return newSubscription(es, opts, nil)
}

// SubscribeFunc calls f with each lowwater event published on es, in order,
// on one goroutine of the subscription's own: f may take its time, at the
// cost of dropped events, never of a slower actor (unless Lossless). A
// panic in f is not recovered. f must not call Close (see Close). An f
// that ends its goroutine (runtime.Goexit) ends the subscription, as
// Close does: Done is closed, and what was left unread counts as dropped.
func SubscribeFunc(es *eventstream.EventStream, f func(messages.Event), opts ...Option) (*Subscription, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: nil func", ErrInvalidOption)
	}
	return newSubscription(es, opts, f)
}

// deliver calls f with each event of the buffer until Close closes it.
func (s *Subscription) deliver(f func(messages.Event)) {
	defer close(s.done)
	returned := false
	defer func() {
		if !returned {
			// f ended the goroutine (runtime.Goexit, as t.FailNow does):
			// nothing reads the buffer again, so the subscription ends,
			// as Close ends it, rather than hold up a Lossless publisher
			// for good.
			go s.Close()
		}
	}()
	for ev := range s.ch {
		f(ev)
	}
	returned = true
}

// C returns the channel of a subscription made with Subscribe, nil for the
// others. It is closed after Close, once the buffered events were read.
func (s *Subscription) C() <-chan messages.Event {
	if !s.toChan {
		return nil
	}
	return s.ch
}

// Dropped returns how many events were pushed out of a full buffer by newer
// ones; for a Lossless subscription, how many a publisher waiting on a
// full buffer gave up when Close came (see Close); and those a
// SubscribeFunc handler that ended its goroutine left unread.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Blocked returns how many events of a Lossless subscription found the
// buffer full and made their publisher wait.
func (s *Subscription) Blocked() uint64 { return s.blocked.Load() }

// Close unsubscribes, delivers the events still buffered, and returns once
// the subscription's goroutine, if any, has ended. It is idempotent. No
// event is taken once it has begun, not even from a publish that began
// before it: so a subscription made once Close has begun, which may take
// events from the start, never takes one this one takes too. It
// may be called before the channel of Subscribe is read: a Lossless
// publisher waiting on a full buffer then gives up its event, and the
// buffered ones are still read until the channel is closed.
//
// A SubscribeFunc handler must not call Close: Close would wait for the
// handler to return, on the handler's own goroutine, for good. To end the
// subscription from the handler (on seeing Stopped, say), call go
// sub.Close(): it returns once the handler has.
func (s *Subscription) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.mu.RLock()
		sub := s.sub // nil when it was never subscribed (Admit)
		s.mu.RUnlock()
		s.es.Unsubscribe(sub)
		s.mu.Lock()
		close(s.ch)
		done := s.done
		s.mu.Unlock()
		<-done
		if !s.toChan {
			// Left by a handler that ended its goroutine: never read.
			for range s.ch {
				s.dropped.Add(1)
			}
		}
		close(s.ended)
	}) // a concurrent Close returns once this one has: done is closed then
}

// Done is closed once Close has ended the subscription: no event is
// buffered, dropped or blocked on it any more, and a SubscribeFunc handler
// has returned for the last time. Whoever keeps subscriptions (the metrics
// collector sums their drops) lets a closed one go then: it holds its
// actor system's event stream, and with it the system.
func (s *Subscription) Done() <-chan struct{} { return s.ended }

// Overlaps reports whether s and o are sure to take some events both: they
// are on the same event stream, neither is closed, and their ForPChannels,
// if either has one, share a pchannel. A WithFilter on either may keep
// them apart, which Overlaps cannot tell: it then says false, unless s
// and o are one subscription. A nil or zero Subscription overlaps
// nothing.
func (s *Subscription) Overlaps(o *Subscription) bool {
	if s == nil || o == nil || s.es == nil || o.es == nil {
		return false
	}
	if s == o {
		return !s.isClosed()
	}
	if s.es != o.es || s.cfg.filter != nil || o.cfg.filter != nil || s.isClosed() || o.isClosed() {
		return false
	}
	a, b := s.cfg.pchannels, o.cfg.pchannels
	if a == nil || b == nil {
		return true // one takes every pchannel's events
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	for name := range a {
		if _, ok := b[name]; ok {
			return true
		}
	}
	return false
}

// isClosed reports whether Close has begun.
func (s *Subscription) isClosed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// handle is the EventStream handler. It runs on the publishing actor's
// goroutine and never waits unless Lossless: a full buffer loses its
// oldest event.
func (s *Subscription) handle(e any) {
	ev, ok := e.(messages.Event)
	if !ok {
		return // protoactor's own events (dead letters, supervision)
	}
	if v := reflect.ValueOf(ev); v.Kind() == reflect.Pointer && v.IsNil() {
		// Published by someone else: no lowwater actor publishes one, and
		// reading its header would panic on the consumer's goroutine.
		return
	}
	if !s.wants(ev) {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.isClosed() {
		return
	}
	if s.cfg.lossless {
		select {
		case s.ch <- ev:
		default:
			s.blocked.Add(1)
			select {
			case s.ch <- ev:
			case <-s.closing:
				s.dropped.Add(1) // given up: the consumer never sees it
			}
		}
		return
	}
	for {
		select {
		case s.ch <- ev:
			return
		default:
		}
		// Full: make room by dropping the oldest. Another publisher or the
		// consumer may have made room meanwhile; then nothing is dropped.
		select {
		case <-s.ch:
			s.dropped.Add(1)
		default:
		}
	}
}

func (s *Subscription) wants(ev messages.Event) bool {
	if s.cfg.pchannels != nil {
		if _, ok := s.cfg.pchannels[ev.EventHeader().PChannel]; !ok {
			return false
		}
	}
	return s.cfg.filter == nil || s.keep(ev)
}

// keep runs the filter. One that panics drops the event for this
// subscription alone: let through, the panic would also have kept the
// event from every subscriber after this one on the stream.
func (s *Subscription) keep(ev messages.Event) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return s.cfg.filter(ev)
}
