package bench

import (
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// BenchmarkEtcdFleet is 100,000 pchannels of one node, each persisting its
// first rise at once on a one-member etcd in this process, through a plain
// etcdcatalog.Catalog: with its bound on calls in flight
// (etcdcatalog.WithMaxConcurrentCalls, default) and without one; and
// through an etcdcatalog.Batcher over the bounded one (catalog=batcher). It
// reports the seconds until every pchannel has persisted its rise, and
// the PersistFailed events meanwhile (saves that timed out, waiting for a
// slot or inside etcd, and were retried).
//
// It takes tens of seconds a run and is not in `make bench`; run it with
//
//	go test -run '^$' -bench EtcdFleet -benchtime 1x ./bench
func BenchmarkEtcdFleet(b *testing.B) {
	endpoints := etcdtest.Start(b)
	for _, bound := range []int{etcdcatalog.DefaultMaxConcurrentCalls, math.MaxInt32} {
		name := fmt.Sprint(bound)
		if bound == math.MaxInt32 {
			name = "none"
		}
		b.Run("bound="+name+"/pchannels=100000", func(b *testing.B) {
			for range b.N {
				benchEtcdFleet(b, endpoints, bound, false, 100_000)
			}
		})
	}
	b.Run("catalog=batcher/pchannels=100000", func(b *testing.B) {
		for range b.N {
			benchEtcdFleet(b, endpoints, etcdcatalog.DefaultMaxConcurrentCalls, true, 100_000)
		}
	})
}

func benchEtcdFleet(b *testing.B, endpoints []string, bound int, batch bool, n int) {
	b.StopTimer()
	c, err := etcdcatalog.Open(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		etcdcatalog.WithPrefix(fmt.Sprintf("fleet-%d", etcdRuns.Add(1))), etcdcatalog.WithMaxConcurrentCalls(bound))
	if err != nil {
		b.Fatal(err)
	}
	var cat persistence.Catalog = c
	if batch {
		if cat, err = etcdcatalog.NewBatcher(c); err != nil {
			b.Fatal(err)
		}
	}
	defer cat.Close()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	defer sys.Shutdown() // deferred first: it runs after the pchannels' stops
	risen := wal.KafkaID(1)
	var persisted, failed atomic.Int64
	all := make(chan struct{})
	sub := sys.EventStream.Subscribe(func(ev any) {
		switch e := ev.(type) {
		case *messages.CheckpointPersisted:
			if e.Value.EQ(risen) && persisted.Add(1) == int64(n) {
				close(all)
			}
		case *messages.PersistFailed:
			failed.Add(1)
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	pids := make([]*actor.PID, n)
	for i := range pids {
		// Preloaded as if 0 were stored: no pchannel reads or saves before
		// the rise, whose save creates its record; the figure is the
		// rises' alone.
		props, err := actors.NewProps(fmt.Sprintf("p%d", i), wal.Kafka, cat,
			actors.WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(0)}), actors.WithPreloaded(wal.KafkaID(0)))
		if err != nil {
			b.Fatal(err)
		}
		pids[i] = sys.Root.Spawn(props)
	}
	defer func() {
		for _, pid := range pids {
			_ = sys.Root.StopFuture(pid).Wait()
		}
	}()
	b.StartTimer()
	t0 := time.Now()
	for _, pid := range pids {
		sys.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: risen})
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d pchannels persisted within 5 minutes", persisted.Load(), n)
	}
	took := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(took.Seconds(), "s-to-persist-all")
	b.ReportMetric(float64(failed.Load()), "persist-failed")
}
