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

// A node owns a pchannel on etcd and runs its actor until told to stop:
// serve, below, is the README's. (An embedded etcd stands in for your
// cluster, and the first save for a SIGTERM.)
func Example_actors() {
	endpoints, stopEtcd := standInEtcd()
	defer stopEtcd()
	system := actor.NewActorSystem()
	defer system.Shutdown()
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	pchannel := actor.NewPID(system.Address(), "orders-dml-0") // as serve spawns it
	sub := system.EventStream.Subscribe(func(ev any) {
		switch ev := ev.(type) {
		case *messages.Recovered:
			fmt.Println("recovered, consuming from:", wal.String(ev.StartMessageID))
			system.Root.Send(pchannel, &messages.AddVChannel{VChannel: "orders", Checkpoint: wal.KafkaID(7)})
		case *messages.CheckpointPersisted:
			fmt.Println("persisted:", wal.String(ev.Value))
			sigterm()
		}
	})
	defer system.EventStream.Unsubscribe(sub)

	stopped, err := serve(ctx, system, endpoints, zap.NewNop(), "node-a")
	if err != nil {
		fmt.Println("serve:", err)
		return
	}
	fmt.Println("stopped; flushed:", stopped.Flushed, "persisted:", wal.String(stopped.LastPersisted))
	// Output:
	// recovered, consuming from: <none>
	// persisted: kafka:7
	// stopped; flushed: true persisted: kafka:7
}

// serve owns pchannel orders-dml-0 for podName and runs its actor until
// ctx ends (signal.NotifyContext(ctx, syscall.SIGTERM)) or another node
// takes the pchannel over. It stops the actor, lets the pchannel go and
// closes the catalog, in that order.
func serve(ctx context.Context, system *actor.ActorSystem, endpoints []string,
	logger *zap.Logger, podName string) (*messages.Stopped, error) {
	// etcd's client logs to logger; without one, to stderr, as JSON.
	catalog, err := etcdcatalog.Open(
		clientv3.Config{Endpoints: endpoints, Logger: logger},
		etcdcatalog.WithPrefix("lowwater"),
		etcdcatalog.WithHolder(podName)) // who owns what, for `lowwater get`
	if err != nil {
		return nil, err
	}
	// Last: it closes the client Open made, which the session uses.
	defer catalog.Close()
	// The TTL is how long a dead node's pchannels wait for a new owner.
	// Keep it at 25 s or more: Open takes 12 s to drop a member that
	// answers nothing, and the lease, renewed every third of the TTL, may
	// have only two thirds left when it stops answering. The lease is
	// granted under ctx; the session outlives it.
	session, err := catalog.NewSession(ctx, 30)
	if err != nil {
		return nil, err
	}
	// Revokes the lease, within its own deadline: whatever the session
	// owns is free at once (session.Close, etcd's, waits up to the TTL on
	// a member that answers nothing).
	defer func() {
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = catalog.CloseSession(stop, session)
	}()
	// Waits while another node owns it; an owner key put by hand, with
	// no lease, never goes: that is an error at once.
	owned, err := catalog.Own(ctx, "orders-dml-0", session)
	if err != nil {
		return nil, err
	}
	// Releases it, once the actor has stopped: an Owned closed under a
	// running actor fences it, and it stops without its last save. A
	// release that fails (etcd out of reach) leaves the owner key on the
	// live session: owned.Release(ctx) tries it again.
	defer owned.Close()
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, owned,
		actors.WithOwnership(owned.Context())) // lost: the actor stops
	if err != nil {
		return nil, err
	}
	pid, err := system.Root.SpawnNamed(props, "orders-dml-0")
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
	case <-owned.Done():
		// Another node's now: the actor stops itself, saving nothing
		// more. Waited for, so that the defers close nothing under it,
		// and a serve after this one can spawn the name again.
		_ = system.Root.StopFuture(pid).Wait()
		return nil, owned.Err()
	}
	// Flushes the last minimum: within WithStopFlushTimeout (3 s) and
	// 100 ms, whatever etcd does.
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return actors.Poison(stop, system, pid)
}
