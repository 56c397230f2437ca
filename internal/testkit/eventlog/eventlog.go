// Package eventlog records lowwater's events for tests: in publishing order,
// and with a way to wait for one without sleeping.
//
// Its Observe runs as an EventStream handler, on the publishing actor's
// goroutine, so it only appends and signals.
package eventlog

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/lowwater/lowwater/messages"
)

// Log keeps the events of one pchannel, or of all.
type Log struct {
	pchannel string
	paused   atomic.Bool

	mu     sync.Mutex
	events []messages.Event
	// changed is closed, and replaced, on every event, waking every Await.
	changed chan struct{}
}

// New returns a log of pchannel's events; "" keeps every pchannel's.
func New(pchannel string) *Log { return &Log{pchannel: pchannel, changed: make(chan struct{})} }

// Observe is the EventStream handler: system.EventStream.Subscribe(l.Observe).
func (l *Log) Observe(e any) {
	ev, ok := e.(messages.Event)
	if !ok || l.paused.Load() || (l.pchannel != "" && ev.EventHeader().PChannel != l.pchannel) {
		return
	}
	l.mu.Lock()
	l.events = append(l.events, ev)
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
}

// Pause drops events while paused is true, for tests that measure the heap.
func (l *Log) Pause(paused bool) { l.paused.Store(paused) }

// Len returns the number of events kept.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

// Since returns a copy of the events from index from on.
func (l *Log) Since(from int) []messages.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]messages.Event(nil), l.events[from:]...)
}

// Await returns the first event at index >= from that matches, waiting up
// to timeout for it; ok is false on timeout.
func (l *Log) Await(from int, timeout time.Duration, match func(messages.Event) bool) (ev messages.Event, idx int, ok bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	next := from
	for {
		l.mu.Lock()
		for ; next < len(l.events); next++ {
			if match(l.events[next]) {
				ev := l.events[next]
				l.mu.Unlock()
				return ev, next, true
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return nil, -1, false
		}
	}
}
