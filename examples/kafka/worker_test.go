package kafka

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"
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
