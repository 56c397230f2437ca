package etcdcatalog_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// A node that owns many pchannels owns them through a Batcher: their saves
// share transactions, each still fenced by its owner. (An embedded etcd
// stands in for your cluster.)
func ExampleBatcher_Own() {
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
	batcher, err := etcdcatalog.NewBatcher(catalog)
	if err != nil {
		panic(err)
	}
	defer batcher.Close() // closes the catalog too, last
	// How long to wait for etcd; the session outlives it.
	grant, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	session, err := catalog.NewSession(grant, 30)
	cancel()
	if err != nil {
		panic(err)
	}
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = catalog.CloseSession(stop, session) // revokes its lease
	}()
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	defer system.Shutdown()

	ctx := context.Background()
	names := []string{"dml_0", "dml_1", "dml_2", "dml_3"}
	pids := make([]*actor.PID, len(names))
	for i, name := range names {
		owned, err := batcher.Own(ctx, name, session)
		if err != nil {
			panic(err)
		}
		defer owned.Close() // after its actor stopped: deferred calls run last first
		props, err := actors.NewProps(name, wal.Kafka, owned,
			actors.WithVChannels(map[string]wal.MessageID{"shard-0": wal.KafkaID(0)}),
			actors.WithOwnership(owned.Context()))
		if err != nil {
			panic(err)
		}
		pids[i] = system.Root.Spawn(props)
		system.Root.Send(pids[i], &messages.UpdateCheckpoint{
			VChannel: "shard-0", Checkpoint: wal.KafkaID(100 + i)})
	}
	for i, pid := range pids {
		stopped, err := actors.Poison(ctx, system, pid) // saves what is pending first
		if err != nil {
			panic(err)
		}
		fmt.Println(names[i], "stopped, flushed:", stopped.Flushed, "at", stopped.LastPersisted)
	}
	stored, err := batcher.LoadAll(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("stored:", stored["dml_0"], stored["dml_1"], stored["dml_2"], stored["dml_3"])
	// Output:
	// dml_0 stopped, flushed: true at kafka:100
	// dml_1 stopped, flushed: true at kafka:101
	// dml_2 stopped, flushed: true at kafka:102
	// dml_3 stopped, flushed: true at kafka:103
	// stored: kafka:100 kafka:101 kafka:102 kafka:103
}
