package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lowwater/lowwater/examples/kafka"
	"github.com/lowwater/lowwater/persistence"
)

// A node reads a topic to its end, then a second node, started on the same
// files after more records came, picks up where the first one stopped.
func ExampleRun() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	dir, err := os.MkdirTemp("", "lowwater-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	ends := []int64{0, 0}
	produce := func(first, n int) {
		for i := first; i < first+n; i++ {
			r := &kgo.Record{Key: fmt.Appendf(nil, "customer-%d", i), Value: []byte("order")}
			if err := producer.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				panic(err)
			}
			ends[r.Partition] = r.Offset + 1
		}
	}

	cfg := kafka.Config{
		Brokers:     cluster.ListenAddrs(),
		Topic:       "orders",
		Partitions:  2,
		SinkPath:    filepath.Join(dir, "sink.db"),
		CatalogPath: filepath.Join(dir, "catalog.db"),
	}
	for _, n := range []int{60, 40} {
		produce(int(ends[0]+ends[1]), n)
		cfg.Until = ends // stop at the end of the topic
		if err := kafka.Run(context.Background(), cfg); err != nil {
			panic(err)
		}
		cat, err := persistence.OpenBolt(cfg.CatalogPath)
		if err != nil {
			panic(err)
		}
		stored, err := cat.LoadAll(context.Background())
		cat.Close()
		if err != nil {
			panic(err)
		}
		counts, err := kafka.ReadSink(cfg.SinkPath)
		if err != nil {
			panic(err)
		}
		once := 0
		for _, c := range counts {
			if c == 1 {
				once++
			}
		}
		fmt.Printf("stored %s %s; %d records in the sink, %d of them once\n",
			stored["orders-0"], stored["orders-1"], len(counts), once)
	}
	// Output:
	// stored kafka:29 kafka:31; 60 records in the sink, 60 of them once
	// stored kafka:49 kafka:51; 100 records in the sink, 100 of them once
}
