package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// etcdPChannels is how many pchannels save in BenchmarkEtcdSaves.
const etcdPChannels = 1000

// BenchmarkEtcdSaves (goal 5) is 1,000 pchannels saving their checkpoints
// on a 3-member embedded etcd cluster (fsync on, one process), b.N saves
// each:
//
//	impl=serial      one Catalog.Save at a time, one transaction each: the
//	                 reference
//	impl=concurrent  the 1,000 saving at once through one Catalog: one
//	                 transaction per save, pipelined over the shared client
//	impl=lowwater    the 1,000 saving at once through an
//	                 etcdcatalog.Batcher: many pchannels per transaction
//
// saves/s counts successful saves; lat-p99-ms is the 99th percentile of one
// Save call. The first save of every pchannel is set-up. The cluster runs
// in this process, so its CPU competes with the writers': the figures are
// for comparing the three, not for sizing a cluster.
func BenchmarkEtcdSaves(b *testing.B) {
	cluster := etcdtest.StartCluster(b, 3)
	for _, impl := range []string{"serial", "concurrent", implLowwater} {
		b.Run("impl="+impl+"/pchannels=1000/members=3", func(b *testing.B) {
			benchEtcdSaves(b, cluster.Endpoints(), impl)
		})
	}
}

// etcdRuns numbers the runs, so that each one saves under its own prefix.
var etcdRuns atomic.Int64

func benchEtcdSaves(b *testing.B, endpoints []string, impl string) {
	c, err := etcdcatalog.Open(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		etcdcatalog.WithPrefix(fmt.Sprintf("bench-%s-%d", impl, etcdRuns.Add(1))))
	if err != nil {
		b.Fatal(err)
	}
	var cat persistence.Catalog = c
	if impl == implLowwater {
		if cat, err = etcdcatalog.NewBatcher(c); err != nil {
			b.Fatal(err)
		}
	}
	defer cat.Close()
	pchannels := names("pchannel-", etcdPChannels)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	saveAll := func(id wal.MessageID) {
		var wg sync.WaitGroup
		for _, p := range pchannels {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.Save(ctx, p, id); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	saveAll(wal.KafkaID(0))

	lats := make([][]time.Duration, etcdPChannels)
	b.ResetTimer()
	t0 := time.Now()
	if impl == "serial" {
		for r := 1; r <= b.N; r++ {
			for i, p := range pchannels {
				s := time.Now()
				if err := cat.Save(ctx, p, wal.KafkaID(r)); err != nil {
					b.Fatal(err)
				}
				lats[i] = append(lats[i], time.Since(s))
			}
		}
	} else {
		var wg sync.WaitGroup
		for i, p := range pchannels {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 1; r <= b.N; r++ {
					s := time.Now()
					if err := cat.Save(ctx, p, wal.KafkaID(r)); err != nil {
						b.Error(err)
						return
					}
					lats[i] = append(lats[i], time.Since(s))
				}
			}()
		}
		wg.Wait()
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	all := slices.Concat(lats...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "saves/s")
	b.ReportMetric(ms(quantile(all, 0.99)), "lat-p99-ms")
}
