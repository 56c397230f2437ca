package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

const (
	requestTimeout = 2 * time.Second
	pollInterval   = 20 * time.Millisecond
)

// node is one actor system hosting the demo's pchannels on one catalog, as
// one process of a service would. It does not own the catalog.
type node struct {
	system *actor.ActorSystem
	names  []string
	pids   map[string]*actor.PID
	// feed is lossless: the checks need every event, and a demo can afford
	// to slow down.
	feed *events.Subscription
	// metrics is the collector's own subscription: lossy by design, off
	// the actors' goroutines, unlike the feed.
	metrics *events.Subscription
}

// startNode spawns one PChannel actor per name, tracking the vchannels of
// spawn[name], feeds their events to sinks, and counts them in collector.
func startNode(cfg config, logger *zap.Logger, catalog persistence.Catalog, names []string,
	spawn map[string]map[string]wal.MessageID, collector *metrics.Collector, sinks ...sink,
) (*node, error) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(logger)))
	n := &node{system: system, names: names, pids: make(map[string]*actor.PID, len(names))}
	var err error
	n.feed, err = events.SubscribeFunc(system.EventStream, feed(sinks...), events.Lossless(), events.WithBuffer(feedBuffer))
	if err != nil {
		system.Shutdown()
		return nil, err
	}
	// The demo's own events (catalog outages) go to the feed, not to the
	// metrics: they are about no pchannel.
	n.metrics, err = collector.Subscribe(system.EventStream, events.WithFilter(func(ev messages.Event) bool {
		_, demo := ev.(*catalogOutage)
		return !demo
	}))
	if err != nil {
		_ = n.stop()
		return nil, err
	}
	for _, name := range names {
		props, err := actors.NewProps(name, wal.Kafka, catalog,
			actors.WithVChannels(spawn[name]),
			actors.WithLogger(logger),
			actors.WithMinSaveInterval(cfg.minSaveInterval),
			actors.WithCounters(collector.Counters(name)),
			actors.WithStallAfter(cfg.stallAfter),
		)
		if err == nil {
			n.pids[name], err = system.Root.SpawnNamed(props, name)
		}
		if err != nil {
			_ = n.stop()
			return nil, fmt.Errorf("spawn pchannel %s: %w", name, err)
		}
	}
	return n, nil
}

// send delivers a command without waiting: a rejection shows up only as a
// CommandRejected event.
func (n *node) send(pchannel string, cmd messages.Command) {
	n.system.Root.Send(n.pids[pchannel], cmd)
}

// states asks every pchannel for its state, in name order.
func (n *node) states() ([]*messages.State, error) {
	states := make([]*messages.State, 0, len(n.names))
	for _, name := range n.names {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		st, err := actors.GetState(ctx, n.system.Root, n.pids[name])
		cancel()
		if err != nil {
			return nil, fmt.Errorf("state of %s: %w", name, err)
		}
		states = append(states, st)
	}
	return states, nil
}

// waitAll polls the states until every one satisfies ok, bound passes or
// ctx is done. It returns the last states and whether all were ok.
func (n *node) waitAll(ctx context.Context, bound time.Duration, ok func(*messages.State) bool) ([]*messages.State, bool, error) {
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		states, err := n.states()
		if err != nil {
			return nil, false, err
		}
		all := true
		for _, st := range states {
			all = all && ok(st)
		}
		if all {
			return states, true, nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return states, false, nil
		case <-ctx.Done():
			return states, false, nil
		}
	}
}

// caughtUp: nothing above the persisted checkpoint waits to be saved.
func caughtUp(st *messages.State) bool { return st.Recovered && !wal.Less(st.Persisted, st.Minimum) }

func recovered(st *messages.State) bool { return st.Recovered }

// feedBuffer is far more than a run publishes in the time the printer takes
// to catch up; a full buffer is counted (Blocked) and reported.
const feedBuffer = 8192

// sink takes every event of the feed, in order, on the feed's goroutine.
type sink func(messages.Event)

// feed returns the sink that hands each event to sinks in turn, a stall at
// lastOffset as atEnd (see endMarker).
func feed(sinks ...sink) sink {
	ends := endMarker{}
	return func(ev messages.Event) {
		if ev = ends.mark(ev); ev == nil {
			return
		}
		for _, s := range sinks {
			s(ev)
		}
	}
}

// atEnd is the demo's own event in place of a MinimumStalled at
// lastOffset: the minimum does not rise there because no offset lies past
// it, not because a vchannel holds it back, and it is no stall to report.
type atEnd struct{ *messages.MinimumStalled }

// endMarker turns a MinimumStalled at lastOffset into atEnd, and drops the
// MinimumResumed that ends it (an Add lowered the minimum, which then rose
// again): it would end a stall that was never reported. It holds the
// pchannels whose minimum is at the end; only the feed's goroutine uses it.
type endMarker map[string]bool

func (m endMarker) mark(ev messages.Event) messages.Event {
	switch e := ev.(type) {
	case *messages.MinimumStalled:
		if sameID(e.Checkpoint, lastOffset) {
			m[e.PChannel] = true
			return &atEnd{e}
		}
	case *messages.MinimumResumed:
		if m[e.PChannel] {
			delete(m, e.PChannel)
			return nil
		}
	case *messages.Stopped:
		delete(m, e.PChannel)
	}
	return ev
}

// stop is a clean shutdown: stop every actor
// gracefully (Poison flushes the pending checkpoint) and wait for it, then
// unsubscribe, drain the feed, and only then shut the system down, which
// stops no actor by itself.
func (n *node) stop() error {
	futures := make(map[string]*actor.Future, len(n.pids))
	for name, pid := range n.pids {
		futures[name] = n.system.Root.PoisonFuture(pid)
	}
	var errs []error
	for _, name := range n.names {
		if f := futures[name]; f != nil {
			if err := f.Wait(); err != nil {
				errs = append(errs, fmt.Errorf("stop pchannel %s: %w", name, err))
			}
		}
	}
	n.feed.Close()
	if n.metrics != nil {
		n.metrics.Close()
	}
	n.system.Shutdown()
	return errors.Join(errs...)
}
