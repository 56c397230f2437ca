package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
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
// (etcdcatalog.WithMaxConcurrentCalls, default) and without one; through
// an etcdcatalog.Batcher over the bounded one (catalog=batcher); and each
// through an Owned of one session, of the bounded Catalog (catalog=owned)
// or of the Batcher (catalog=batcher-owned). It reports the seconds until
// every pchannel has persisted its rise, and the PersistFailed events
// meanwhile (saves that timed out, waiting for a slot or inside etcd, and
// were retried). The owning comes before the timer starts, but the
// Owneds' watches may still be being created, and their keys read, while
// it runs.
//
// It takes minutes a run and is not in `make bench`; run it with
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
				benchEtcdFleet(b, endpoints, bound, "", 100_000)
			}
		})
	}
	for _, catalog := range []string{"owned", "batcher", "batcher-owned"} {
		b.Run("catalog="+catalog+"/pchannels=100000", func(b *testing.B) {
			for range b.N {
				benchEtcdFleet(b, endpoints, etcdcatalog.DefaultMaxConcurrentCalls, catalog, 100_000)
			}
		})
	}
}

// benchEtcdFleet runs n pchannels on a Catalog of the given bound, saving
// through it (catalog ""), each through an Owned of it, all of one
// session ("owned"), through a Batcher over it ("batcher"), or each
// through an Owned of that Batcher ("batcher-owned").
func benchEtcdFleet(b *testing.B, endpoints []string, bound int, catalog string, n int) {
	b.StopTimer()
	c, err := etcdcatalog.Open(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		etcdcatalog.WithPrefix(fmt.Sprintf("fleet-%d", etcdRuns.Add(1))), etcdcatalog.WithMaxConcurrentCalls(bound))
	if err != nil {
		b.Fatal(err)
	}
	var cat persistence.Catalog = c
	var batcher *etcdcatalog.Batcher
	if strings.HasPrefix(catalog, "batcher") {
		if batcher, err = etcdcatalog.NewBatcher(c); err != nil {
			b.Fatal(err)
		}
		cat = batcher
	}
	defer cat.Close()
	catalogs := make([]persistence.Catalog, n)
	for i := range catalogs {
		catalogs[i] = cat
	}
	if strings.HasSuffix(catalog, "owned") {
		own := c.TryOwn
		if batcher != nil {
			own = batcher.TryOwn
		}
		owned := ownAll(b, c.Client(), own, n)
		defer func() {
			for _, o := range owned {
				_ = o.Close()
			}
		}()
		for i, o := range owned {
			catalogs[i] = o
		}
	}
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
		props, err := actors.NewProps(fmt.Sprintf("p%d", i), wal.Kafka, catalogs[i],
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

// ownAll owns pchannels p0 to p<n-1> with own, with one session of cli, a
// few at a time.
func ownAll(b *testing.B, cli *clientv3.Client, own func(context.Context, string, *concurrency.Session) (*etcdcatalog.Owned, error), n int) []*etcdcatalog.Owned {
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = session.Close() })
	owned := make([]*etcdcatalog.Owned, n)
	errs := make(chan error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range next {
				o, err := own(context.Background(), fmt.Sprintf("p%d", i), session)
				if err != nil {
					errs <- err
					continue
				}
				owned[i] = o
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return owned
}
