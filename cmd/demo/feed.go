package main

import (
	"sync"
	"sync/atomic"

	"github.com/lowwater/lowwater/messages"
)

// feedBuffer is far more than a run publishes in the time the printer takes
// to catch up; a full buffer is counted (feed.blocked) and reported.
const feedBuffer = 8192

// sink takes every event of a feed, in order, on the feed's goroutine.
type sink func(messages.Event)

// feed carries lowwater's events off the actors' goroutines. The
// EventStream handler only pushes into a buffered channel, because it runs
// on the publishing actor's goroutine; one goroutine hands each event to
// the sinks (the record the checks read, the printer, later a live view).
//
// A full buffer blocks the publisher instead of dropping the event: the
// checks need every event, and a demo can afford to slow down.
type feed struct {
	ch    chan messages.Event
	sinks []sink
	done  chan struct{}

	// mu orders handle against close: an EventStream publish that started
	// before Unsubscribe may still call handle afterwards.
	mu      sync.RWMutex
	closed  bool
	blocked atomic.Int64
}

func newFeed(sinks ...sink) *feed {
	f := &feed{ch: make(chan messages.Event, feedBuffer), sinks: sinks, done: make(chan struct{})}
	go f.loop()
	return f
}

// handle is the EventStream subscriber: quick, non-blocking unless the
// buffer is full, and safe for concurrent use.
func (f *feed) handle(e any) {
	ev, ok := e.(messages.Event)
	if !ok {
		return // protoactor's own events (dead letters, supervision)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return
	}
	select {
	case f.ch <- ev:
	default:
		f.blocked.Add(1)
		f.ch <- ev
	}
}

func (f *feed) loop() {
	defer close(f.done)
	for ev := range f.ch {
		for _, s := range f.sinks {
			s(ev)
		}
	}
}

// close delivers what is buffered and joins the feed's goroutine; the
// sinks may be read once it returns. Unsubscribe before calling it.
func (f *feed) close() {
	f.mu.Lock()
	if !f.closed {
		f.closed = true
		close(f.ch)
	}
	f.mu.Unlock()
	<-f.done
}
