package kafka

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testTopic = "events"

// cluster starts an in-process Kafka (kfake) with one topic.
func cluster(t testing.TB, partitions int32) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// produce writes n keyed records, keys numbered from first, and raises
// ends to the end offset of each partition.
func produce(t testing.TB, brokers []string, ends []int64, first, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(testTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", first+i), Value: []byte("v")}
	}
	res := cl.ProduceSync(context.Background(), recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		ends[r.Record.Partition] = max(ends[r.Record.Partition], r.Record.Offset+1)
	}
}

// TestResumeAtCheckpoint runs the node to the end of a topic, then again
// after more records: the second run starts at the first one's stored
// checkpoint, neither before it (a record written twice) nor after it (a
// record lost), and its workers flush each new record once.
func TestResumeAtCheckpoint(t *testing.T) {
	const partitions = 3
	brokers := cluster(t, partitions)
	dir := t.TempDir()
	cfg := Config{
		Brokers: brokers, Topic: testTopic, Partitions: partitions, VChannels: 4,
		SinkPath: filepath.Join(dir, "sink.db"), CatalogPath: filepath.Join(dir, "catalog.db"),
		Pace: func(_ int32, v int) time.Duration { return time.Duration(5+20*v) * time.Millisecond },
	}
	ends := make([]int64, partitions)
	for round, n := range []int{300, 200} {
		produce(t, brokers, ends, round*1000, n)
		cfg.Until = append([]int64(nil), ends...)
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := Run(ctx, cfg)
		timedOut := ctx.Err()
		cancel()
		if err != nil || timedOut != nil {
			t.Fatalf("round %d: %v %v", round, err, timedOut)
		}
		assertStored(t, cfg, ends)
		assertSinkOnce(t, cfg.SinkPath, ends)
	}
}

func assertStored(t *testing.T, cfg Config, ends []int64) {
	t.Helper()
	cat, err := persistence.OpenBolt(cfg.CatalogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	stored, err := cat.LoadAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range ends {
		if got := stored[PChannelName(cfg.Topic, int32(p))]; !wal.KafkaID(end).EQ(got) {
			t.Errorf("partition %d: stored %s, want kafka:%d", p, wal.String(got), end)
		}
	}
}

func assertSinkOnce(t *testing.T, path string, ends []int64) {
	t.Helper()
	counts, err := ReadSink(path)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for p, end := range ends {
		for off := range end {
			want++
			if n := counts[RecordID{int32(p), off}]; n != 1 {
				t.Errorf("record %d@%d written %d times, want 1", p, off, n)
			}
		}
	}
	if len(counts) != want {
		t.Errorf("%d records in the sink, want %d", len(counts), want)
	}
}

// TestRunNaiveReadsToEnd: the naive node, undisturbed, writes every record
// (its losses need a crash, which cmd/kafkademo brings).
func TestRunNaiveReadsToEnd(t *testing.T) {
	const partitions = 2
	brokers := cluster(t, partitions)
	ends := make([]int64, partitions)
	produce(t, brokers, ends, 0, 400)
	cfg := Config{
		Brokers: brokers, Topic: testTopic, Partitions: partitions, VChannels: 4,
		SinkPath: filepath.Join(t.TempDir(), "sink.db"), Until: ends,
		AutoCommitInterval: 100 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := RunNaive(ctx, cfg); err != nil || ctx.Err() != nil {
		t.Fatalf("RunNaive: %v %v", err, ctx.Err())
	}
	assertSinkOnce(t, cfg.SinkPath, ends)
}

func TestConfigRejected(t *testing.T) {
	good := Config{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Partitions: 2, SinkPath: "s", CatalogPath: "c"}
	for name, mutate := range map[string]func(*Config){
		"no brokers":    func(c *Config) { c.Brokers = nil },
		"no topic":      func(c *Config) { c.Topic = "" },
		"no partitions": func(c *Config) { c.Partitions = 0 },
		"no sink":       func(c *Config) { c.SinkPath = "" },
		"no catalog":    func(c *Config) { c.CatalogPath = "" },
		"short until":   func(c *Config) { c.Until = []int64{1} },
	} {
		c := good
		mutate(&c)
		if err := Run(t.Context(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// A Config whose partitions are not the topic's is refused before any
// actor is spawned, and so with nothing saved: with fewer, the partitions
// past them were never read, and Run returned nil; with more, it stored
// checkpoints of partitions that do not exist.
func TestPartitionsOtherThanTheTopicsAreRefused(t *testing.T) {
	brokers := cluster(t, 3)
	for _, n := range []int32{2, 4} {
		dir := t.TempDir()
		cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: n, VChannels: 2,
			SinkPath: filepath.Join(dir, "sink.db"), CatalogPath: filepath.Join(dir, "catalog.db")}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err := Run(ctx, cfg)
		cancel()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), fmt.Sprintf("topic events has 3 partitions, Config.Partitions says %d", n)) {
			t.Errorf("%d partitions of 3: Run = %v, want ErrConfig naming both", n, err)
		}
		cat, err := persistence.OpenBolt(cfg.CatalogPath)
		if err != nil {
			t.Fatal(err)
		}
		stored, err := cat.LoadAll(t.Context())
		_ = cat.Close()
		if err != nil || len(stored) != 0 {
			t.Errorf("%d partitions of 3: the catalog holds %v (%v), want nothing saved", n, stored, err)
		}
	}
}

// A stored checkpoint past a partition's end (the topic made again, here
// a fresh cluster) is warned of, and kept: the node does not lower it.
func TestACheckpointPastThePartitionsEndIsWarnedOf(t *testing.T) {
	brokers := cluster(t, 1)
	dir := t.TempDir()
	catalogPath := filepath.Join(dir, "catalog.db")
	cat, err := persistence.OpenBolt(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Save(t.Context(), PChannelName(testTopic, 0), wal.KafkaID(1000)); err != nil {
		t.Fatal(err)
	}
	if err := cat.Close(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2, Logger: zap.New(core),
		SinkPath: filepath.Join(dir, "sink.db"), CatalogPath: catalogPath, Ready: cancel}
	if err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	warned := logs.FilterMessageSnippet("past the partition's end").All()
	if len(warned) != 1 || warned[0].ContextMap()["checkpoint"] != int64(1000) || warned[0].ContextMap()["end"] != int64(0) {
		t.Fatalf("warnings: %v, want one naming checkpoint 1000 and end 0", logs.All())
	}
	assertStored(t, cfg, []int64{1000})
}

// A graceful stop that cannot save (the catalog down) is the run's error:
// Run promises every checkpoint saved when it returns nil, and returned nil
// all the same, the stored checkpoint behind what the sink held.
func TestStopWithTheCatalogDownFails(t *testing.T) {
	brokers := cluster(t, 1)
	dir := t.TempDir()
	// failed closes on the first save the catalog, down, refuses: a rise
	// of the minimum that the stop will find unsaved.
	failed := make(chan struct{})
	var once sync.Once
	catalog := faultinject.Wrap(persistence.NewMemory(), faultinject.WithOnSave(func(_ string, _ wal.MessageID, err error) {
		if errors.Is(err, faultinject.ErrInjected) {
			once.Do(func() { close(failed) })
		}
	}))
	ready := make(chan struct{})
	cfg := Config{
		Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: catalog,
		Ready: func() { close(ready) },
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("the node never got ready")
	}
	catalog.SetDown(true)
	produce(t, brokers, make([]int64, 1), 0, 50)
	select {
	case <-failed:
	case <-time.After(20 * time.Second):
		t.Fatal("no save was attempted after the records came")
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unsaved") {
			t.Fatalf("Run = %v, want the unsaved checkpoint", err)
		}
		if !errors.Is(err, messages.ErrFlushTimeout) {
			t.Fatalf("Run = %v, want it to wrap ErrFlushTimeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
}
