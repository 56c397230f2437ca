package etcdcatalog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// BenchmarkSaveCAS measures a save on a single embedded etcd member (fsync
// on): "OneWriter" is the usual case, one compare-and-swap transaction;
// "TwoWriters" alternates two catalogs on one pchannel, so that every save
// finds the record moved and pays a second transaction. Besides ns/op (the
// mean) it reports the median.
func BenchmarkSaveCAS(b *testing.B) {
	b.Run("OneWriter", func(b *testing.B) {
		eps := etcdtest.Start(b)
		benchSaves(b, openCatalog(b, eps, nil))
	})
	b.Run("TwoWriters", func(b *testing.B) {
		eps := etcdtest.Start(b)
		benchSaves(b, openCatalog(b, eps, nil), openCatalog(b, eps, nil))
	})
}

// BenchmarkLoadAll1000 measures LoadAll of 1,000 pchannels (one range read)
// on a single embedded member.
func BenchmarkLoadAll1000(b *testing.B) {
	eps := etcdtest.Start(b)
	c := openCatalog(b, eps, nil)
	want := make(map[string]wal.MessageID, 1000)
	for i := range 1000 {
		want[fmt.Sprintf("by-dev-rootcoord-dml_%04d", i)] = wal.KafkaID(i)
	}
	saveAll(b, c, want)
	ctx := context.Background()
	for b.Loop() {
		all, err := c.LoadAll(ctx)
		if err != nil || len(all) != len(want) {
			b.Fatalf("LoadAll = %d pchannels, %v", len(all), err)
		}
	}
}

func benchSaves(b *testing.B, writers ...*etcdcatalog.Catalog) {
	ctx := context.Background()
	took := make([]time.Duration, 0, 1024)
	next := wal.KafkaID(0)
	for b.Loop() {
		next++
		start := time.Now()
		if err := writers[int(next)%len(writers)].Save(ctx, "p", next); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "median-ns/op")
}
