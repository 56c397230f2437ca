package etcdcatalog_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// serve, the README's, returns on a take-over only once its actor is
// gone: the catalog it closes is closed under no actor, and a serve after
// it, as a node that tries again does, spawns the pchannel anew. A slow
// subscriber holds the actor's stop back, which serve returned before
// when it did not wait for it.
func TestServeReturnsOnATakeOverWithItsActorGone(t *testing.T) {
	endpoints, stopEtcd := standInEtcd()
	defer stopEtcd()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	name := actor.NewPID(system.Address(), "orders-dml-0")

	// The first serve's first save: then the owner key goes, as when
	// another node takes the pchannel over. The second's: a SIGTERM.
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	var served atomic.Int64 // serves returned
	sub := system.EventStream.Subscribe(func(ev any) {
		switch ev.(type) {
		case *messages.Recovered: // kafka:7, then kafka:8: a save each
			at := wal.KafkaID(7 + served.Load())
			system.Root.Send(name, &messages.AddVChannel{VChannel: "orders", Checkpoint: at})
		case *messages.OwnershipLost:
			// A subscriber that takes its time (a fault on purpose): the
			// actor's stop waits for it, and serve must wait for the stop.
			time.Sleep(200 * time.Millisecond)
		case *messages.CheckpointPersisted:
			if served.Load() == 0 {
				if _, err := cli.Delete(context.Background(), etcdcatalog.DefaultPrefix+"/wal/orders-dml-0/owner"); err != nil {
					t.Errorf("delete the owner key: %v", err)
				}
			} else {
				sigterm()
			}
		}
	})
	defer system.EventStream.Unsubscribe(sub)

	first := make(chan error, 1)
	go func() {
		_, err := serve(ctx, system, endpoints, zap.NewNop(), "node-a")
		first <- err
	}()
	select {
	case err := <-first:
		require.ErrorIs(t, err, etcdcatalog.ErrOwnerChanged)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not return within 30 s of the take-over")
	}
	_, alive := system.ProcessRegistry.Get(name)
	require.False(t, alive, "serve returned with its actor still there")

	served.Add(1)
	stopped, err := serve(ctx, system, endpoints, zap.NewNop(), "node-a")
	require.NoError(t, err)
	require.True(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(8), stopped.LastPersisted)
}
