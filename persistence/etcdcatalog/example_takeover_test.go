package etcdcatalog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// Two nodes share a pchannel through ownership on etcd. Node A owns it and
// saves; when its session ends, its actor publishes OwnershipLost and stops.
// Node B, waiting in Own, takes over from the checkpoint A stored. (An
// embedded etcd stands in for your cluster.)
func Example_takeover() {
	endpoints, stopEtcd := standInEtcd() // your cluster's endpoints
	defer stopEtcd()

	catalog, err := etcdcatalog.Open(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		panic(err)
	}
	defer catalog.Close()
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	events := make(chan messages.Event, 256)
	sub := system.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(messages.Event); ok {
			events <- e // a quick handler: it runs on the actor's goroutine
		}
	})
	defer system.EventStream.Unsubscribe(sub)

	// node spawns a pchannel actor on what the node owns.
	ctx := context.Background()
	node := func(vchannels map[string]wal.MessageID) (*concurrency.Session, *actor.PID) {
		session, err := concurrency.NewSession(catalog.Client(), concurrency.WithTTL(5))
		if err != nil {
			panic(err)
		}
		owned, err := catalog.Own(ctx, "dml_0", session) // waits while another node owns it
		if err != nil {
			panic(err)
		}
		props, err := actors.NewProps("dml_0", wal.Kafka, owned,
			actors.WithVChannels(vchannels), actors.WithOwnership(owned.Context()))
		if err != nil {
			panic(err)
		}
		return session, system.Root.Spawn(props)
	}

	sessionA, a := node(map[string]wal.MessageID{
		"shard-0": wal.KafkaID(10), "shard-1": wal.KafkaID(20)})
	system.Root.Send(a, &messages.UpdateCheckpoint{VChannel: "shard-0", Checkpoint: wal.KafkaID(30)})
	for ev := range events {
		if p, ok := ev.(*messages.CheckpointPersisted); ok && p.Value.EQ(wal.KafkaID(20)) {
			fmt.Println("node A persisted", p.Value)
			break
		}
	}

	_ = sessionA.Close() // node A's lease ends, as when the node dies
	for ev := range events {
		if _, ok := ev.(*messages.OwnershipLost); ok {
			fmt.Println("node A lost the pchannel")
			break
		}
	}

	sessionB, b := node(nil)
	defer sessionB.Close()
	for ev := range events {
		if r, ok := ev.(*messages.Recovered); ok {
			fmt.Println("node B starts at", r.StartMessageID, "from the catalog:", r.FromCatalog)
			break
		}
	}
	_ = system.Root.PoisonFuture(b).Wait()
	// Output:
	// node A persisted kafka:20
	// node A lost the pchannel
	// node B starts at kafka:20 from the catalog: true
}
