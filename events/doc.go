// Package events delivers lowwater's events off the publishing actor's
// goroutine, so that a slow consumer never slows a pchannel.
//
// protoactor's EventStream calls every subscriber synchronously on the
// goroutine of the actor that publishes: a handler that blocks, logs to a
// slow disk or waits on a lock holds the pchannel's mailbox with it. A
// Subscription puts a bounded buffer between the two. The handler it
// installs only appends to the buffer and never waits: when the buffer is
// full it drops the oldest buffered event to make room and counts it
// (Dropped). The consumer takes events at its own pace, in the order each
// pchannel published them, from one of two places:
//
//	Subscribe       a channel, read from C()
//	SubscribeFunc   a function, called on the subscription's own goroutine
//
// An actor that wants the events subscribes with SubscribeFunc and sends
// each one to itself: the buffer, not its mailbox, then holds what it has
// not taken yet.
//
// Options choose which events: ForPChannels keeps the events of some
// pchannels (the default is all of them), WithFilter keeps those a predicate
// accepts; WithBuffer sizes the buffer (DefaultBuffer).
//
// Dropping is the price of never blocking. A consumer that needs every
// event (an audit, the checks of cmd/demo) asks for Lossless and accepts
// that it slows the actors when it lags (Blocked counts how often); its
// handler must not wait on a pchannel, which may be waiting for it.
// Monitoring (package metrics) and dashboards prefer a gap, which Dropped
// makes visible, to a slower pchannel.
//
// Close unsubscribes, delivers what is still buffered, and returns when the
// subscription's goroutine, if any, has ended; a SubscribeFunc handler
// that wants to end its subscription calls go sub.Close(), since Close
// waits for the handler.
package events
