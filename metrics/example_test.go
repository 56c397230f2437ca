package metrics_test

import (
	"context"

	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Wire a collector to a node: register it, feed it the node's events, and
// give each pchannel its counters. Serve the registry with promhttp.
func Example() {
	collector, err := metrics.New() // metrics.WithPChannelLabel() for few, fixed pchannels
	if err != nil {
		panic(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collector)
	// http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))

	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	sub, err := collector.Subscribe(system.EventStream)
	if err != nil {
		panic(err)
	}
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, persistence.NewMemory(),
		actors.WithCounters(collector.Counters("orders-dml-0")),
		actors.WithVChannels(map[string]wal.MessageID{"shard-a": wal.KafkaID(100), "shard-b": wal.KafkaID(120)}))
	if err != nil {
		panic(err)
	}
	pchannel := system.Root.Spawn(props)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = actors.Request(ctx, system.Root, pchannel, &messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(130)})
	_ = actors.Request(ctx, system.Root, pchannel, &messages.UpdateCheckpoint{VChannel: "shard-b", Checkpoint: wal.KafkaID(1)})
	_ = system.Root.PoisonFuture(pchannel).Wait()
	sub.Close() // the collector has now seen every event
	system.Shutdown()

	families, err := registry.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "lowwater_updates_total", "lowwater_pchannels", "lowwater_saves_in_flight":
				fmt.Println(f.GetName(), value(m.GetCounter().GetValue(), m.GetGauge().GetValue()))
			case "lowwater_commands_rejected_total":
				if v := m.GetCounter().GetValue(); v > 0 {
					fmt.Printf("%s{reason=%q} %v\n", f.GetName(), m.GetLabel()[0].GetValue(), v)
				}
			case "lowwater_saves_total":
				fmt.Println(f.GetName(), "> 0:", m.GetCounter().GetValue() > 0)
			}
		}
	}
	// Output:
	// lowwater_commands_rejected_total{reason="rollback"} 1
	// lowwater_pchannels 0
	// lowwater_saves_in_flight 0
	// lowwater_saves_total > 0: true
	// lowwater_updates_total 1
}

func value(counter, gauge float64) float64 { return counter + gauge }
