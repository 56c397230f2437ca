package kafka

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/persistence"
)

func openTestSink(t *testing.T) (*Sink, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sink.db")
	s, err := OpenSink(path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

// TestWorkerCheckpoint pins what a worker reports: the next offset it
// needs, after the records below it are in the sink; marks advance an
// idle vchannel without writing anything.
func TestWorkerCheckpoint(t *testing.T) {
	sink, path := openTestSink(t)
	var reports []int64
	w := newWorker(2, 10, time.Hour, sink, func(cp int64) { reports = append(reports, cp) })

	steps := []struct {
		items []item
		want  []int64 // reports after the flush that follows the items
	}{
		{nil, nil}, // nothing received: the start stands, nothing reported
		{[]item{{offset: 10}, {offset: 12}}, []int64{13}},
		{[]item{{offset: 15, mark: true}}, []int64{13, 15}}, // idle: the mark alone
		{[]item{{offset: 14, mark: true}}, []int64{13, 15}}, // an older mark changes nothing
		{[]item{{offset: 20}, {offset: 30, mark: true}}, []int64{13, 15, 30}},
	}
	for i, s := range steps {
		for _, it := range s.items {
			w.receive(it)
		}
		if err := w.flush(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !slices.Equal(reports, s.want) {
			t.Fatalf("step %d: reports %v, want %v", i, reports, s.want)
		}
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	counts, err := ReadSink(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[RecordID]uint32{{2, 10}: 1, {2, 12}: 1, {2, 20}: 1}
	if len(counts) != len(want) {
		t.Fatalf("sink %v, want %v", counts, want)
	}
	for id, n := range want {
		if counts[id] != n {
			t.Errorf("sink %v, want %v", counts, want)
		}
	}
}

// TestWorkerFailedFlushReportsNothing: when the sink refuses a write, the
// worker stops with the error and its checkpoint stays where the sink was
// known to be.
func TestWorkerFailedFlushReportsNothing(t *testing.T) {
	sink, _ := openTestSink(t)
	var reports []int64
	w := newWorker(0, 0, time.Millisecond, sink, func(cp int64) { reports = append(reports, cp) })
	w.in <- item{offset: 0}
	w.in <- item{offset: 1, mark: true}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	close(w.in)
	err := w.run()
	if !errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		t.Fatalf("run: %v, want %v", err, bolterrors.ErrDatabaseNotOpen)
	}
	if len(reports) != 0 {
		t.Errorf("reported %v after a failed flush", reports)
	}
}

func TestVChannelOfSpreadsKeys(t *testing.T) {
	seen := make(map[int]int)
	for i := range 1000 {
		v := VChannelOf([]byte("user-"+string(rune('a'+i%26))+string(rune('a'+i/26))), 16)
		if v < 0 || v >= 16 {
			t.Fatalf("vchannel %d out of range", v)
		}
		seen[v]++
	}
	if len(seen) != 16 {
		t.Errorf("1000 keys reached %d of 16 vchannels", len(seen))
	}
}

// Once the reader's context has ended, nothing more is handed out, even
// to a worker with room: a record dropped at the stop and a later record
// or mark handed out after it would carry the worker's checkpoint past the
// dropped one. With both ready, select picked either at random, and a
// graceful stop lost records.
func TestNothingHandedOutOnceStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pl := &pipeline{workers: [][]*worker{{{in: make(chan item, 1)}, {in: make(chan item, 1)}}}}
	for range 100 {
		if pl.send(ctx, pl.workers[0][0], item{offset: 1}) {
			t.Fatal("send after the stop handed a record out")
		}
		if pl.mark(ctx, 0, 2) {
			t.Fatal("mark after the stop handed a mark out")
		}
	}
	for _, w := range pl.workers[0] {
		if n := len(w.in); n != 0 {
			t.Fatalf("a worker got %d items after the stop", n)
		}
	}
}

// TestPipelineStopReportsTheLastFlush: a sink write that fails in the
// workers' last flush, once the node was told to end, is the run's error:
// Run returned nil, promising every worker flushed.
func TestPipelineStopReportsTheLastFlush(t *testing.T) {
	sink, _ := openTestSink(t)
	cfg := Config{Partitions: 1, VChannels: 1, Pace: func(int32, int) time.Duration { return time.Hour }, Logger: zap.NewNop()}
	ctx, fail := context.WithCancelCause(context.Background())
	defer fail(nil)
	pl := startPipeline(&cfg, sink, []int64{0}, fail, func(int32, int, int64) {})
	pl.workers[0][0].in <- item{offset: 0}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	err := pl.stop()
	if !errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		t.Fatalf("stop = %v, want %v", err, bolterrors.ErrDatabaseNotOpen)
	}
	if !errors.Is(context.Cause(ctx), bolterrors.ErrDatabaseNotOpen) {
		t.Fatalf("the node was not told: %v", context.Cause(ctx))
	}
	if again := pl.stop(); again != err {
		t.Fatalf("second stop = %v, want %v", again, err)
	}
}

// TestRunEndedBeforeItBegan: Run returns nil when ctx ends, even before
// it read the catalog.
func TestRunEndedBeforeItBegan(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, Topic: testTopic, Partitions: 1,
		SinkPath: filepath.Join(dir, "sink.db"), Catalog: persistence.NewMemory()}
	if err := Run(ctx, cfg); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
}
