package events

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/lowwater/lowwater/messages"
)

// Defaults of the options below.
const (
	// DefaultBuffer is how many events a Subscription holds for a consumer
	// that lags before it drops the oldest.
	DefaultBuffer = 1024
	// DefaultAckTimeout is how long SubscribeActor waits for its actor to
	// take one batch before it sends the next one anyway.
	DefaultAckTimeout = 5 * time.Second
)

// ErrInvalidOption is returned for a configuration that cannot work; nothing
// is subscribed.
var ErrInvalidOption = errors.New("events: invalid option")

// Option configures a Subscription.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	buffer     int
	pchannels  map[string]struct{}
	filter     func(messages.Event) bool
	ackTimeout time.Duration
	errs       []error
}

// ForPChannels keeps only the events of the named pchannels. Without it a
// Subscription takes the events of every pchannel of the actor system.
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
			c.pchannels[n] = struct{}{}
		}
	})
}

// WithFilter keeps only the events keep returns true for. keep runs on the
// publishing actor's goroutine, before the buffer: it must be quick, must
// not block, and must be safe for concurrent use. Filtering there is what
// keeps unwanted events from pushing wanted ones out of the buffer.
func WithFilter(keep func(messages.Event) bool) Option {
	return optionFunc(func(c *config) {
		if keep == nil {
			c.errs = append(c.errs, errors.New("nil filter"))
			return
		}
		c.filter = keep
	})
}

// WithBuffer sets how many events wait for a lagging consumer before the
// oldest is dropped; n must be at least 1. The default is DefaultBuffer.
func WithBuffer(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("buffer %d: want at least 1", n))
			return
		}
		c.buffer = n
	})
}

// WithAckTimeout sets how long SubscribeActor waits for its actor to take a
// batch before sending the next one anyway (the default is
// DefaultAckTimeout). The buffer bounds what waits for an actor only while
// the actor keeps up within this time.
func WithAckTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("ack timeout %v: want > 0", d))
			return
		}
		c.ackTimeout = d
	})
}

func newConfig(opts []Option) (config, error) {
	c := config{buffer: DefaultBuffer, ackTimeout: DefaultAckTimeout}
	for _, o := range opts {
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

	// mu orders pushes against Close: a Publish that began before
	// Unsubscribe may still call the handler afterwards.
	mu     sync.RWMutex
	closed bool

	// quit is closed by Close; done is closed when the delivery goroutine
	// (SubscribeFunc, SubscribeActor) has ended, at once for Subscribe.
	quit      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	// toChan is set for Subscribe, whose consumer reads ch itself.
	toChan bool
	// For SubscribeActor: taken is the last batch the actor took (see
	// EndOfBatch), gone is set when the actor no longer exists, and
	// ackSignal wakes the deliverer when either changes.
	taken     atomic.Uint64
	gone      atomic.Bool
	ackSignal chan struct{}
}

func newSubscription(es *eventstream.EventStream, opts []Option) (*Subscription, error) {
	if es == nil {
		return nil, fmt.Errorf("%w: nil event stream", ErrInvalidOption)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Subscription{
		es:   es,
		cfg:  cfg,
		ch:   make(chan messages.Event, cfg.buffer),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}, nil
}

// Subscribe delivers the lowwater events published on es to a channel: read
// them from C. The channel is closed by Close, after the events still
// buffered.
func Subscribe(es *eventstream.EventStream, opts ...Option) (*Subscription, error) {
	s, err := newSubscription(es, opts)
	if err != nil {
		return nil, err
	}
	s.toChan = true
	close(s.done) // no goroutine of its own
	s.sub = es.Subscribe(s.handle)
	return s, nil
}

// SubscribeFunc calls f with each lowwater event published on es, in order,
// on one goroutine of the subscription's own: f may take its time, at the
// cost of dropped events, never of a slower actor. A panic in f is not
// recovered.
func SubscribeFunc(es *eventstream.EventStream, f func(messages.Event), opts ...Option) (*Subscription, error) {
	if f == nil {
		return nil, fmt.Errorf("%w: nil func", ErrInvalidOption)
	}
	s, err := newSubscription(es, opts)
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(s.done)
		for ev := range s.ch {
			f(ev)
		}
	}()
	s.sub = es.Subscribe(s.handle)
	return s, nil
}

// SubscribeActor sends the lowwater events published on system's
// EventStream to the actor pid, as the same messages (*messages.Recovered,
// *messages.CheckpointPersisted, ...), in order.
//
// The events go in batches of what is buffered, each followed by an
// *EndOfBatch, which protoactor answers by itself once the actor's Receive
// has returned for it (the actor may ignore it). The next batch waits for
// that answer, so that the buffer, not the actor's mailbox, holds what the
// actor has not taken yet, and a slow actor loses the oldest events instead
// of growing its mailbox. When the answer does not come within the ack
// timeout the next batch goes anyway. When the actor is gone (its messages
// end in dead letters), delivery stops and later events count as dropped.
func SubscribeActor(system *actor.ActorSystem, pid *actor.PID, opts ...Option) (*Subscription, error) {
	if system == nil || pid == nil {
		return nil, fmt.Errorf("%w: nil actor system or pid", ErrInvalidOption)
	}
	s, err := newSubscription(system.EventStream, opts)
	if err != nil {
		return nil, err
	}
	s.ackSignal = make(chan struct{}, 1)
	go s.deliverToActor(system.Root, pid)
	s.sub = system.EventStream.Subscribe(s.handle)
	return s, nil
}

// C returns the channel of a subscription made with Subscribe, nil for the
// others. It is closed after Close, once the buffered events were read.
func (s *Subscription) C() <-chan messages.Event {
	if !s.toChan {
		return nil
	}
	return s.ch
}

// Dropped returns how many events were dropped: pushed out of a full buffer
// by newer ones, or published after an actor subscriber was gone.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Close unsubscribes, delivers the events still buffered (a SubscribeActor
// subscription sends them without waiting for the actor), and returns once
// the subscription's goroutine, if any, has ended. It is idempotent.
func (s *Subscription) Close() {
	s.closeOnce.Do(func() {
		s.es.Unsubscribe(s.sub)
		s.mu.Lock()
		s.closed = true
		close(s.ch)
		s.mu.Unlock()
		close(s.quit)
	})
	<-s.done
}

// handle is the EventStream handler. It runs on the publishing actor's
// goroutine and never waits: a full buffer loses its oldest event.
func (s *Subscription) handle(e any) {
	ev, ok := e.(messages.Event)
	if !ok {
		if dl, ok := e.(*actor.DeadLetterEvent); ok {
			s.deadLetter(dl)
		}
		return
	}
	if !s.wants(ev) {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return
	}
	if s.gone.Load() {
		s.dropped.Add(1) // an actor subscriber that no longer exists
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
	return s.cfg.filter == nil || s.cfg.filter(ev)
}

// EndOfBatch follows each batch of events that SubscribeActor sends. It is
// an actor.AutoRespond: protoactor answers it after the actor's Receive has
// returned for it, which tells the subscription that the batch was taken.
// The actor's Receive sees it and may ignore it.
type EndOfBatch struct {
	sub *Subscription
	seq uint64
}

var _ actor.AutoRespond = (*EndOfBatch)(nil)

// GetAutoResponse implements actor.AutoRespond; protoactor calls it on the
// actor's goroutine after Receive.
func (m *EndOfBatch) GetAutoResponse(actor.Context) any {
	s := m.sub
	for {
		old := s.taken.Load()
		if old >= m.seq || s.taken.CompareAndSwap(old, m.seq) {
			break
		}
	}
	s.signal()
	return m
}

// deadLetter notices that an EndOfBatch could not reach its actor.
func (s *Subscription) deadLetter(dl *actor.DeadLetterEvent) {
	if m, ok := dl.Message.(*EndOfBatch); ok && m.sub == s {
		s.gone.Store(true)
		s.signal()
	}
}

func (s *Subscription) signal() {
	select {
	case s.ackSignal <- struct{}{}:
	default: // already signalled
	}
}

// deliverToActor sends what is buffered as one batch and waits until the
// actor took it (or the ack timeout passed) before sending the next.
func (s *Subscription) deliverToActor(root *actor.RootContext, pid *actor.PID) {
	defer close(s.done)
	var seq uint64
	for ev := range s.ch {
		n := 1
		root.Send(pid, ev)
		for more := true; more && n < cap(s.ch); {
			select {
			case ev, ok := <-s.ch:
				if !ok {
					return
				}
				root.Send(pid, ev)
				n++
			default:
				more = false
			}
		}
		seq++
		if !s.waitTaken(root, pid, seq) {
			return
		}
	}
}

// waitTaken sends an EndOfBatch and waits for its answer. It returns false
// when delivery must stop: the actor is gone. Once Close was called it does
// not wait: the rest is sent at once.
func (s *Subscription) waitTaken(root *actor.RootContext, pid *actor.PID, seq uint64) bool {
	if isClosed(s.quit) {
		return true
	}
	// The future gives the answer a sender to go to; the wait is on taken.
	root.RequestFuture(pid, &EndOfBatch{sub: s, seq: seq}, s.cfg.ackTimeout)
	timer := time.NewTimer(s.cfg.ackTimeout)
	defer timer.Stop()
	for {
		if s.gone.Load() {
			s.goneNow()
			return false
		}
		if s.taken.Load() >= seq {
			return true
		}
		select {
		case <-s.ackSignal:
		case <-timer.C:
			return true
		case <-s.quit:
			return true
		}
	}
}

// goneNow stops delivery to an actor that no longer exists: what is
// buffered, and what comes later, counts as dropped.
func (s *Subscription) goneNow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		select {
		case _, ok := <-s.ch:
			if !ok {
				return
			}
			s.dropped.Add(1)
		default:
			return
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
