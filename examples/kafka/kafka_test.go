package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// cluster starts an in-process Kafka (kfake) with one topic, and opts.
func cluster(t testing.TB, partitions int32, opts ...kfake.Opt) []string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic)}, opts...)...)
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
	cl := client(t, brokers, kgo.DefaultProduceTopic(testTopic))
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
		// A worker flushes on a ticker, whose NewTicker panicked on it.
		"no pace": func(c *Config) { c.Pace = func(int32, int) time.Duration { return 0 } },
		"negative pace": func(c *Config) {
			c.Pace = func(p int32, _ int) time.Duration { return time.Duration(1-p) * time.Second }
		},
		"pace panics": func(c *Config) { c.Pace = func(int32, int) time.Duration { panic("Pace bug") } },
		"pace exits":  func(c *Config) { c.Pace = func(int32, int) time.Duration { runtime.Goexit(); return 0 } },
	} {
		c := good
		mutate(&c)
		if err := Run(t.Context(), c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
		if strings.Contains(name, "pace") {
			if err := RunNaive(t.Context(), c); !errors.Is(err, ErrConfig) {
				t.Errorf("%s: RunNaive = %v, want ErrConfig", name, err)
			}
		}
	}
	c := good
	c.Pace = func(p int32, _ int) time.Duration { return time.Duration(1-p) * time.Second }
	if err := Run(t.Context(), c); err == nil || err.Error() != "kafka: invalid config: Pace(1, 0) is 0s: a worker flushes every Pace, which must be positive" {
		t.Errorf("Run = %v, naming the partition and vchannel", err)
	}
}

// A Pace that gives a partition added while the node reads no period
// ends the node with ErrConfig, as it is refused at the start: a
// worker's ticker panicked on it, and the process with it; a Goexit
// in it ended the growth check for good, and no partition added later
// was read.
func TestAnAddedPartitionWithNoPaceEndsTheNode(t *testing.T) {
	for name, c := range map[string]struct {
		pace func() time.Duration
		want string
	}{
		"zero":  {func() time.Duration { return 0 }, "Pace(1, 0) is 0s"},
		"exits": {func() time.Duration { runtime.Goexit(); return 0 }, "Pace(1, 0) ended its goroutine (runtime.Goexit)"},
	} {
		t.Run(name, func(t *testing.T) {
			brokers := cluster(t, 1)
			dir := t.TempDir()
			cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
				SinkPath: filepath.Join(dir, "sink.db"), Catalog: persistence.NewMemory(), PartitionCheck: 20 * time.Millisecond,
				Pace: func(p int32, _ int) time.Duration {
					if p > 0 {
						return c.pace()
					}
					return time.Millisecond
				}}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			done := runReady(t, ctx, cfg)
			addPartitions(t, brokers, 2)
			err := ended(t, done, 20*time.Second)
			if !errors.Is(err, ErrConfig) || ctx.Err() != nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v, want ErrConfig saying %s", err, c.want)
			}
		})
	}
}

// The node's own read of every checkpoint at its start ends with its
// context, whatever the catalog does: one that ignored it held Run for as
// long as it hung, and one that panicked there ended the process.
func TestTheStartsReadOfACatalogEndsWithTheContext(t *testing.T) {
	brokers := cluster(t, 1)
	dir := t.TempDir()
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for name, c := range map[string]struct {
		do   func()
		want string
	}{
		// Stopped once the read has begun, while the catalog hangs on:
		// a stop, which Run ends without an error.
		"hangs":  {func() { cancel(); <-release }, ""},
		"panics": {func() { panic("LoadAll bug") }, `kafka: the catalog panicked loading its checkpoints: "LoadAll bug"`},
		// A panic's text, the catalog's, is cut and kept to one line.
		"panics at length": {func() { panic(strings.Repeat("line\n", 100)) },
			`kafka: the catalog panicked loading its checkpoints: "` + strings.Repeat(`line\n`, 25) + `lin"`},
		"exits": {runtime.Goexit, "kafka: the catalog ended its goroutine loading its checkpoints (runtime.Goexit)"},
	} {
		cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
			SinkPath: filepath.Join(dir, name+".db"), Catalog: loadAllDoing{Catalog: persistence.NewMemory(), do: c.do}}
		runCtx := t.Context()
		if name == "hangs" {
			runCtx = ctx
		}
		done := make(chan error, 1)
		go func() { done <- Run(runCtx, cfg) }()
		if err := ended(t, done, 10*time.Second); fmt.Sprint(err) != cmp.Or(c.want, "<nil>") {
			t.Errorf("%s: Run = %v, want %s", name, err, cmp.Or(c.want, "nil"))
		}
	}
}

// loadAllDoing is a catalog whose LoadAll does do, and ignores its
// context.
type loadAllDoing struct {
	persistence.Catalog
	do func()
}

func (c loadAllDoing) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	c.do()
	return c.Catalog.LoadAll(ctx)
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
// a fresh cluster) ends Run before any record is read, with ErrPastEnd
// naming the pchannel: read from the start, the new topic's records were
// processed under a checkpoint that covered them already, and skipped at
// the next start once the log had grown past it. The checkpoint is kept.
func TestACheckpointPastThePartitionsEndIsRefused(t *testing.T) {
	brokers := cluster(t, 2)
	produce(t, brokers, make([]int64, 2), 0, 20)
	dir := t.TempDir()
	catalogPath := filepath.Join(dir, "catalog.db")
	cat, err := persistence.OpenBolt(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Save(t.Context(), PChannelName(testTopic, 1), wal.KafkaID(1000)); err != nil {
		t.Fatal(err)
	}
	if err := cat.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 2, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), CatalogPath: catalogPath, Ready: func() { t.Error("the node read the topic") }}
	err = Run(ctx, cfg)
	if !errors.Is(err, ErrPastEnd) {
		t.Fatalf("Run = %v, want ErrPastEnd", err)
	}
	if want := PChannelName(testTopic, 1) + ": checkpoint 1000, end "; !strings.Contains(err.Error(), want) ||
		strings.Contains(err.Error(), PChannelName(testTopic, 0)+":") {
		t.Fatalf("Run = %v, want it to name %s alone", err, PChannelName(testTopic, 1))
	}
	cat, err = persistence.OpenBolt(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	stored, err := cat.LoadAll(t.Context())
	if err != nil || len(stored) != 1 || stored[PChannelName(testTopic, 1)] != wal.KafkaID(1000) {
		t.Fatalf("the catalog holds %v (%v), want the checkpoint of partition 1 alone, as it was", stored, err)
	}
	if _, err := os.Stat(cfg.SinkPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the sink: %v, want none made: nothing processed", err)
	}
}

// A topic deleted and made again while the node reads it ends Run with
// ErrTopicReplaced: its checkpoints describe a log that is gone. The node
// used to log fetch errors for good and read nothing more, or, had the
// client reset to the new topic's start, process records that its
// checkpoint already covered.
func TestATopicMadeAgainWhileReadEndsTheNode(t *testing.T) {
	brokers := cluster(t, 1)
	produce(t, brokers, make([]int64, 1), 0, 100)
	saved := make(chan struct{})
	var once sync.Once
	catalog := faultinject.Wrap(persistence.NewMemory(), faultinject.WithOnSave(func(_ string, id wal.MessageID, err error) {
		if err == nil && id == wal.KafkaID(100) {
			once.Do(func() { close(saved) })
		}
	}))
	dir := t.TempDir()
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: catalog,
		PartitionCheck: time.Hour, // the fetches alone tell it here
		Pace:           func(int32, int) time.Duration { return time.Millisecond }}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	select {
	case <-saved:
	case <-time.After(20 * time.Second):
		t.Fatal("the node never saved kafka:100")
	}
	remakeTopic(t, brokers)
	produce(t, brokers, make([]int64, 1), 1000, 20) // the new topic's offsets 0..19
	err := ended(t, done, 30*time.Second)           // the client reports the unknown topic ID after 10 s
	if !errors.Is(err, ErrTopicReplaced) {
		t.Fatalf("Run = %v, want ErrTopicReplaced", err)
	}
	got, err := catalog.Load(context.Background(), PChannelName(testTopic, 0))
	if err != nil || got != wal.KafkaID(100) {
		t.Fatalf("stored %v (%v), want kafka:100: what the node read of the old topic", got, err)
	}
}

// The node's check for partitions added tells a topic made again too, at
// its pace rather than the client's (about 10 s).
func TestATopicMadeAgainEndsTheNodeAtTheNextCheck(t *testing.T) {
	brokers := cluster(t, 1)
	dir := t.TempDir()
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: persistence.NewMemory(),
		PartitionCheck: 20 * time.Millisecond}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	done := runReady(t, ctx, cfg)
	remakeTopic(t, brokers)
	err := ended(t, done, 5*time.Second) // the client's own report comes after about 10 s
	if !errors.Is(err, ErrTopicReplaced) || !strings.Contains(err.Error(), "another topic ID") {
		t.Fatalf("Run = %v, want ErrTopicReplaced, told by the topic's ID", err)
	}
}

// remakeTopic deletes the test topic and makes it again, empty, with one
// partition.
func remakeTopic(t *testing.T, brokers []string) {
	t.Helper()
	cl := client(t, brokers)
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(testTopic)
	del.Topics, del.TopicNames = append(del.Topics, dt), []string{testTopic}
	dr, err := del.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range dr.Topics {
		if err := kerr.ErrorForCode(x.ErrorCode); err != nil {
			t.Fatal("delete:", err)
		}
	}
	cr := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = testTopic, 1, 1
	cr.Topics = append(cr.Topics, ct)
	cresp, err := cr.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range cresp.Topics {
		if err := kerr.ErrorForCode(x.ErrorCode); err != nil {
			t.Fatal("create:", err)
		}
	}
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
	cfg := Config{
		Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: catalog,
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runReady(t, ctx, cfg)
	catalog.SetDown(true)
	produce(t, brokers, make([]int64, 1), 0, 50)
	select {
	case <-failed:
	case <-time.After(20 * time.Second):
		t.Fatal("no save was attempted after the records came")
	}
	cancel()
	err := ended(t, done, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "unsaved") {
		t.Fatalf("Run = %v, want the unsaved checkpoint", err)
	}
	if !errors.Is(err, messages.ErrFlushTimeout) {
		t.Fatalf("Run = %v, want it to wrap ErrFlushTimeout", err)
	}
}

// Partitions added to the topic while the node reads are read too, each
// by a pchannel of its own, from the start: before, their records were
// never read, and nothing said so.
func TestPartitionsAddedWhileReadAreRead(t *testing.T) {
	brokers := cluster(t, 2)
	produce(t, brokers, make([]int64, 2), 0, 100)
	dir := t.TempDir()
	// saved closes once partition 2's checkpoint reached its last record.
	saved := make(chan struct{})
	var once sync.Once
	catalog := faultinject.Wrap(persistence.NewMemory(), faultinject.WithOnSave(func(pchannel string, id wal.MessageID, err error) {
		if err == nil && pchannel == PChannelName(testTopic, 2) && id == wal.KafkaID(40) {
			once.Do(func() { close(saved) })
		}
	}))
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 2, VChannels: 3,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: catalog, PartitionCheck: 20 * time.Millisecond,
		Pace: func(int32, int) time.Duration { return time.Millisecond }}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runReady(t, ctx, cfg)
	addPartitions(t, brokers, 3)
	produceTo(t, brokers, 2, 40)
	awaitBefore(t, saved, done, "partition 2 was read", "partition 2's records were never saved as read")
	cancel()
	if err := ended(t, done, 30*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	got, err := catalog.Load(context.Background(), PChannelName(testTopic, 2))
	if err != nil || got != wal.KafkaID(40) {
		t.Fatalf("partition 2 stored %v (%v), want kafka:40", got, err)
	}
	counts, err := ReadSink(cfg.SinkPath)
	if err != nil {
		t.Fatal(err)
	}
	for off := range int64(40) {
		if n := counts[RecordID{2, off}]; n != 1 {
			t.Errorf("record 2@%d written %d times, want 1", off, n)
		}
	}
}

// A partition added while the node reads, with a checkpoint stored for
// it, ends the node (ErrStaleCheckpoint), whatever the partition holds by
// then: the checkpoint was stored for a partition this topic did not
// have when the node started, so for an earlier topic of the name. Read,
// its records below the checkpoint would be skipped; the node said so at
// its start.
func TestAnAddedPartitionWithAStoredCheckpointEndsTheNode(t *testing.T) {
	brokers := cluster(t, 1)
	catalog := persistence.NewMemory()
	if err := catalog.Save(t.Context(), PChannelName(testTopic, 1), wal.KafkaID(5)); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	dir := t.TempDir()
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: catalog, PartitionCheck: 20 * time.Millisecond,
		Logger: zap.New(core)}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := runReady(t, ctx, cfg)
	warned := logs.FilterFieldKey("pchannel").All()
	if len(warned) != 1 || warned[0].ContextMap()["pchannel"] != "events-1" || warned[0].ContextMap()["checkpoint"] != "kafka:5" {
		t.Fatalf("warnings at the start: %v, want one naming events-1 at kafka:5", warned)
	}
	addPartitions(t, brokers, 2)
	produceTo(t, brokers, 1, 20) // past the checkpoint: offsets alone cannot tell
	err := ended(t, done, 20*time.Second)
	want := "kafka: checkpoint stored for a partition the topic did not have: events-1, added while the node read the topic, " +
		"has kafka:5 stored: 'lowwater delete events-1' reads it from its start"
	if !errors.Is(err, ErrStaleCheckpoint) || ctx.Err() != nil || err.Error() != want {
		t.Fatalf("Run = %v, want %s", err, want)
	}
	got, err := catalog.Load(context.Background(), PChannelName(testTopic, 1))
	if err != nil || got != wal.KafkaID(5) {
		t.Fatalf("partition 1 stored %v (%v), want kafka:5 untouched", got, err)
	}
}

// The checkpoint of an added partition is read when it is added: one the
// node warned of at its start, and an operator deleted since, as the
// warning advised, holds nothing against it.
func TestAnAddedPartitionWhoseCheckpointWasDeletedIsReadFromItsStart(t *testing.T) {
	brokers := cluster(t, 1)
	catalog := persistence.NewMemory()
	name := PChannelName(testTopic, 1)
	if err := catalog.Save(t.Context(), name, wal.KafkaID(5)); err != nil {
		t.Fatal(err)
	}
	saved := make(chan struct{})
	var once sync.Once
	watched := faultinject.Wrap(catalog, faultinject.WithOnSave(func(pchannel string, id wal.MessageID, err error) {
		if err == nil && pchannel == name && id == wal.KafkaID(20) {
			once.Do(func() { close(saved) })
		}
	}))
	dir := t.TempDir()
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: watched, PartitionCheck: 20 * time.Millisecond,
		Pace: func(int32, int) time.Duration { return time.Millisecond }}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runReady(t, ctx, cfg)
	if err := catalog.Delete(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	addPartitions(t, brokers, 2)
	produceTo(t, brokers, 1, 20)
	awaitBefore(t, saved, done, "partition 1 was read", "partition 1's records were never saved as read")
	cancel()
	if err := ended(t, done, 30*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	counts, err := ReadSink(cfg.SinkPath)
	if err != nil {
		t.Fatal(err)
	}
	for off := range int64(20) {
		if n := counts[RecordID{1, off}]; n != 1 {
			t.Errorf("record 1@%d written %d times, want 1", off, n)
		}
	}
}

// hangingLoads is a catalog whose Load of one name waits for release,
// ignoring its context, and of another panics while panicking is set: a
// fault on purpose.
type hangingLoads struct {
	persistence.Catalog
	hang, panics string
	panicking    atomic.Bool
	panicked     chan struct{}
	entered      chan struct{}
	release      chan struct{}
}

func (c *hangingLoads) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	switch {
	case pchannel == c.hang:
		c.entered <- struct{}{}
		<-c.release
	case pchannel == c.panics && c.panicking.Load():
		c.panicked <- struct{}{}
		panic("Load bug")
	}
	return c.Catalog.Load(ctx, pchannel)
}

// A catalog that hangs, ignoring its context, as the node reads an added
// partition's checkpoint, or panics there, holds neither the node nor
// its stop: the check waited on it, and the stop on the check.
func TestAHangingCatalogHoldsNoStopWhilePartitionsAreAdded(t *testing.T) {
	brokers := cluster(t, 1)
	catalog := &hangingLoads{Catalog: persistence.NewMemory(), panics: PChannelName(testTopic, 1), hang: PChannelName(testTopic, 2),
		panicked: make(chan struct{}, 64), entered: make(chan struct{}, 64), release: make(chan struct{})}
	catalog.panicking.Store(true)
	t.Cleanup(func() { close(catalog.release) })
	core, logs := observer.New(zap.WarnLevel)
	dir := t.TempDir()
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: catalog, PartitionCheck: 20 * time.Millisecond, Logger: zap.New(core)}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runReady(t, ctx, cfg)
	addPartitions(t, brokers, 2)
	// Partition 1's Load panics, at every check: warned of, and tried
	// again; a catalog mended lets it be read. The second panic comes
	// after the first one's warning.
	for range 2 {
		select {
		case <-catalog.panicked:
		case err := <-done:
			t.Fatalf("Run = %v on a catalog that panicked", err)
		case <-time.After(20 * time.Second):
			t.Fatal("partition 1's checkpoint was not read twice within 20 s")
		}
	}
	warned := logs.FilterMessage("partition added: its checkpoint cannot be read yet").All()
	if want := `kafka: the catalog panicked loading events-1: "Load bug"`; len(warned) == 0 || warned[0].ContextMap()["error"] != want {
		t.Fatalf("warnings: %v, want the first saying %q", warned, want)
	}
	catalog.panicking.Store(false)
	addPartitions(t, brokers, 3)
	select {
	case <-catalog.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("partition 2's checkpoint was never read")
	}
	cancel()
	if err := ended(t, done, 10*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// addPartitions raises the test topic's partitions to count.
func addPartitions(t *testing.T, brokers []string, count int32) {
	t.Helper()
	cl := client(t, brokers)
	req := kmsg.NewPtrCreatePartitionsRequest()
	topic := kmsg.NewCreatePartitionsRequestTopic()
	topic.Topic, topic.Count = testTopic, count
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range resp.Topics {
		if err := kerr.ErrorForCode(x.ErrorCode); err != nil {
			t.Fatal("create partitions:", err)
		}
	}
}

// produceTo writes n keyed records to partition p.
func produceTo(t *testing.T, brokers []string, p int32, n int) {
	t.Helper()
	cl := client(t, brokers, kgo.DefaultProduceTopic(testTopic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: []byte("v"), Partition: p}
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// A checkpoint of another WAL under a partition's name is refused at the
// start, typed, before any record is read.
func TestAStoredCheckpointOfAnotherWALIsRefused(t *testing.T) {
	brokers := cluster(t, 1)
	catalog := persistence.NewMemory()
	if err := catalog.Save(t.Context(), PChannelName(testTopic, 0), wal.RocksMQID(7)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := Config{Brokers: brokers, Topic: testTopic, Partitions: 1, VChannels: 2,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: catalog}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := Run(ctx, cfg)
	if !errors.Is(err, wal.ErrWALMismatch) || ctx.Err() != nil {
		t.Fatalf("Run = %v, want ErrWALMismatch", err)
	}
	if want := "kafka: pchannel events-0: stored checkpoint rocksmq:7 is not a Kafka offset: wal: message ID of another WAL"; err.Error() != want {
		t.Fatalf("Run = %q, want %q", err, want)
	}
}

// runReady runs the node on cfg in a goroutine and waits, 20 s at most,
// until it reads the topic; Run's result comes on the channel.
func runReady(t *testing.T, ctx context.Context, cfg Config) <-chan error {
	t.Helper()
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run = %v before it read the topic", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the node never got ready")
	}
	return done
}

// client is a client of the test cluster, closed with the test.
func client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ended is Run's result, which must come within d.
func ended(t *testing.T, done <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("Run did not end within %v", d)
		return nil
	}
}

// awaitBefore waits 20 s at most for saved to close, and fails, saying
// what did not happen, if Run ends first or nothing comes.
func awaitBefore(t *testing.T, saved <-chan struct{}, done <-chan error, what, never string) {
	t.Helper()
	select {
	case <-saved:
	case err := <-done:
		t.Fatalf("Run = %v before %s", err, what)
	case <-time.After(20 * time.Second):
		t.Fatal(never)
	}
}
