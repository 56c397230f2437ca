// Package watching is the README's section "Watching it: events and
// metrics" as code that compiles: the body of each function is a snippet
// the README shows to the letter (see the test), so that what a reader
// pastes into a function of their own, with the same names in scope,
// builds. Package events and package metrics each have an Example that
// runs the whole of it.
package watching

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Watch reads one pchannel's events from a channel until run returns.
func Watch(system *actor.ActorSystem, run func()) error {
	sub, err := events.Subscribe(system.EventStream,
		events.ForPChannels("orders-dml-0"))
	if err != nil {
		return err
	}
	read := make(chan struct{})
	// Or events.SubscribeFunc(system.EventStream, f): no loop, and a
	// panic in f ends the process.
	go func() {
		defer close(read)
		// The loop ends once sub.Close() has delivered the rest.
		for ev := range sub.C() {
			fmt.Printf("%T\n", ev)
		}
	}()
	run()       // the pchannel runs, and stops
	sub.Close() // unsubscribes, delivers what is buffered
	<-read
	fmt.Println("dropped:", sub.Dropped()) // events the consumer lost by lagging
	return nil
}

// Export spawns the pchannel name with the counters of a collector that
// registry exports, until run returns.
func Export(system *actor.ActorSystem, registry *prometheus.Registry, catalog persistence.Catalog, name string, run func(*actor.PID)) error {
	// metrics.WithPChannelLabel() for few, fixed pchannels
	collector, err := metrics.New()
	if err != nil {
		return err
	}
	registry.MustRegister(collector)
	sub, err := collector.Subscribe(system.EventStream)
	if err != nil {
		return err
	}
	defer sub.Close()
	props, err := actors.NewProps(name, wal.Kafka, catalog,
		actors.WithCounters(collector.Counters(name)))
	if err != nil {
		return err
	}
	run(system.Root.Spawn(props))
	collector.Forget(name) // the pchannel moved to another node: its series go
	return nil
}
