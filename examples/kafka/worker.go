package kafka

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// VChannelOf maps a record key to one of n vchannels. It is not Kafka's
// partitioner (murmur2): a partition's keys must spread over its n
// vchannels, not land on those that agree with the partition number.
func VChannelOf(key []byte, n int) int {
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(n))
}

// PChannelName names the pchannel of a partition: "topic-3".
func PChannelName(topic string, partition int32) string {
	return fmt.Sprintf("%s-%d", topic, partition)
}

// VChannelName names vchannel v of a partition: "topic-3/v07".
func VChannelName(topic string, partition int32, v int) string {
	return fmt.Sprintf("%s/v%02d", PChannelName(topic, partition), v)
}

// item is what a partition's reader hands a worker: a record of the
// worker's vchannel at offset, or (mark) word that every record of the
// partition below offset has been handed out.
type item struct {
	offset int64
	mark   bool
}

// worker processes one vchannel: it gathers the vchannel's records and
// writes them to the sink every pace, and after each flush reports its
// checkpoint: the next offset it needs, every record of its vchannel below
// it being in the sink.
type worker struct {
	partition int32
	pace      time.Duration
	sink      *Sink
	in        chan item
	// flushed is called with the checkpoint each time a flush raised it.
	flushed func(checkpoint int64)

	pending []int64
	// through: every record of the vchannel below it has been received
	// (the reader hands records out in offset order).
	through int64
	// checkpoint: every record of the vchannel below it is in the sink.
	// Invariant: checkpoint <= through.
	checkpoint int64
}

func newWorker(partition int32, start int64, pace time.Duration, sink *Sink, flushed func(int64)) *worker {
	return &worker{
		partition:  partition,
		pace:       pace,
		sink:       sink,
		in:         make(chan item, 1024),
		flushed:    flushed,
		through:    start,
		checkpoint: start,
	}
}

// run receives until in is closed, flushing every pace, then flushes one
// last time. A failed flush ends it with the error: what reached the sink
// is then unknown, so no checkpoint may be reported past it.
func (w *worker) run() error {
	t := time.NewTicker(w.pace)
	defer t.Stop()
	for {
		select {
		case it, ok := <-w.in:
			if !ok {
				return w.flush()
			}
			w.receive(it)
		case <-t.C:
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
}

func (w *worker) receive(it item) {
	if !it.mark {
		w.pending = append(w.pending, it.offset)
		it.offset++
	}
	w.through = max(w.through, it.offset)
}

// flush writes the pending records, then reports the checkpoint. A
// vchannel with nothing pending still advances to where the reader got:
// an idle vchannel must not hold its pchannel's checkpoint back.
func (w *worker) flush() error {
	if len(w.pending) > 0 {
		if err := w.sink.Write(w.partition, w.pending); err != nil {
			return fmt.Errorf("kafka: flush of partition %d: %w", w.partition, err)
		}
		w.pending = w.pending[:0]
	}
	if w.through > w.checkpoint {
		w.checkpoint = w.through
		w.flushed(w.checkpoint)
	}
	return nil
}

// pipeline is every worker of a node and the reader's side of them; the
// lowwater node and the naive one share it, so they differ only in how
// they keep their position.
type pipeline struct {
	logger    *zap.Logger
	vchannels int
	sink      *Sink
	pace      func(partition int32, vchannel int) time.Duration
	flushed   func(partition int32, v int, checkpoint int64)
	fail      context.CancelCauseFunc
	wg        sync.WaitGroup
	stopOnce  sync.Once

	mu      sync.Mutex
	workers [][]*worker // by partition, then vchannel; grows while the node reads
	stopped bool        // no worker may start once stop closed their input
	err     error       // the first failure, a worker's or the reader's
}

// startPipeline starts a worker per vchannel, each from the start offset
// of its partition; the first worker to fail ends the node through fail.
func startPipeline(cfg *Config, sink *Sink, starts []int64, fail context.CancelCauseFunc,
	flushed func(partition int32, v int, checkpoint int64)) *pipeline {
	pl := &pipeline{logger: cfg.Logger, vchannels: cfg.VChannels, sink: sink, pace: cfg.Pace, flushed: flushed, fail: fail}
	for p, start := range starts {
		pl.add(int32(p), start)
	}
	return pl
}

// add starts the workers of partition p, the one after the last, from
// start. It reports false, starting none, once the pipeline is stopping.
func (pl *pipeline) add(p int32, start int64) bool {
	// Asked outside the lock: Pace is the caller's code.
	paces := make([]time.Duration, pl.vchannels)
	for v := range paces {
		var err error
		if paces[v], err = paceOf(pl.pace, p, v); err != nil {
			pl.abort(err)
			return false
		}
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.stopped || int(p) != len(pl.workers) {
		return false
	}
	ws := make([]*worker, pl.vchannels)
	for v := range ws {
		w := newWorker(p, start, paces[v], pl.sink, func(cp int64) { pl.flushed(p, v, cp) })
		ws[v] = w
		pl.wg.Go(func() {
			if err := w.run(); err != nil {
				pl.abort(err)
			}
		})
	}
	pl.workers = append(pl.workers, ws)
	return true
}

// workersOf returns partition p's workers, nil for a partition the node
// does not read (yet).
func (pl *pipeline) workersOf(p int32) []*worker {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if p < 0 || int(p) >= len(pl.workers) {
		return nil
	}
	return pl.workers[p]
}

// consume hands every polled record to its vchannel's worker until ctx
// ends, each partition's records in offset order, each fetch followed by
// a mark to every worker of the partition.
//
// fatal, if set, judges each error the client reports: one it returns
// ends the node with that error, before any record of the fetch is handed
// out. The others are worth a line, not the node: the client retries what
// can be retried (say, a partition moving).
func (pl *pipeline) consume(ctx context.Context, cl *kgo.Client, fatal func(topic string, partition int32, err error) error) {
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		var ended error
		fetches.EachError(func(topic string, p int32, err error) {
			if fatal != nil && ended == nil {
				ended = fatal(topic, p, err)
			}
			pl.logger.Warn("fetch", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
		})
		if ended != nil {
			pl.abort(ended)
			return
		}
		stopped := false
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			ws := pl.workersOf(fp.Partition)
			if stopped || len(fp.Records) == 0 || ws == nil {
				return
			}
			for _, r := range fp.Records {
				if !pl.send(ctx, ws[VChannelOf(r.Key, pl.vchannels)], item{offset: r.Offset}) {
					stopped = true
					return
				}
			}
			stopped = !pl.mark(ctx, fp.Partition, fp.Records[len(fp.Records)-1].Offset+1)
		})
		if stopped {
			return
		}
	}
}

// mark tells every worker of partition p that the records below offset
// have been handed out. It reports false if ctx ended first.
func (pl *pipeline) mark(ctx context.Context, p int32, offset int64) bool {
	for _, w := range pl.workersOf(p) {
		if !pl.send(ctx, w, item{offset: offset, mark: true}) {
			return false
		}
	}
	return true
}

// send hands it to w, unless ctx ends first, and reports whether it did.
// Once a send fails nothing more may be handed out: a later record or mark
// would carry the worker's checkpoint past the record dropped here, which
// the node would then never consume again. (With ctx done and w.in ready,
// select picks either at random: a graceful stop lost records this way.)
func (pl *pipeline) send(ctx context.Context, w *worker, it item) bool {
	if ctx.Err() != nil {
		return false
	}
	select {
	case w.in <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// abort ends the node with err, unless it failed already.
func (pl *pipeline) abort(err error) {
	pl.mu.Lock()
	if pl.err == nil {
		pl.err = err
	}
	pl.mu.Unlock()
	pl.fail(err)
}

// stop closes the workers' input, once the reader is done, and waits for
// their last flush.
//
// It returns the first worker's failure, the last flushes' included: one
// that fails after the node was told to end is still the run's error.
// Calls after the first wait for nothing and return the same.
func (pl *pipeline) stop() error {
	pl.stopOnce.Do(func() {
		pl.mu.Lock()
		pl.stopped = true
		for _, ws := range pl.workers {
			for _, w := range ws {
				close(w.in)
			}
		}
		pl.mu.Unlock()
		pl.wg.Wait()
	})
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.err
}

// goal closes reached once every slot got to its target: the node's way
// to know it is done with a finite topic (Config.Until). With no targets
// it is never reached.
type goal struct {
	mu      sync.Mutex
	targets []int64
	done    []bool
	left    int
	reached chan struct{}
}

// newGoal starts each slot i at from[i].
func newGoal(targets, from []int64) *goal {
	g := &goal{targets: targets, done: make([]bool, len(targets)), left: len(targets), reached: make(chan struct{})}
	if targets == nil {
		return g
	}
	for i := range targets {
		g.set(i, from[i])
	}
	return g
}

// set records that slot i got to v.
func (g *goal) set(i int, v int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i < 0 || i >= len(g.targets) || g.done[i] || v < g.targets[i] {
		return
	}
	g.done[i] = true
	if g.left--; g.left == 0 {
		close(g.reached)
	}
}
