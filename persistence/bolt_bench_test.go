package persistence_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// BenchmarkLoadNothingStored is the Load of a pchannel never saved,
// beside 10,000 records, made by 100 Loads at once per core: a node
// starting new pchannels next to its old ones. A Load that finds nothing
// searches the file for a record under a damaged name, and Loads that
// find nothing together share one search.
func BenchmarkLoadNothingStored(b *testing.B) {
	ctx := context.Background()
	c, err := persistence.OpenBolt(filepath.Join(b.TempDir(), "c.db"), persistence.WithGroupCommit(true))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	errs := make(chan error, 10_000)
	for i := range cap(errs) {
		go func() { errs <- c.Save(ctx, fmt.Sprintf("old-%05d", i), wal.KafkaID(1)) }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism(100)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id, err := c.Load(ctx, fmt.Sprintf("new-%d", next.Add(1)))
			if err != nil || id != nil {
				b.Errorf("Load of a pchannel never saved = %v, %v; want nil, nil", id, err)
				return
			}
		}
	})
}
