package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Config is a consumer node's: the topic it reads, how its workers behave,
// and where it keeps its output and its position.
type Config struct {
	Brokers []string
	Topic   string
	// Partitions is the topic's partition count when the node starts,
	// which Run checks (ErrConfig). Partitions added while Run reads are
	// read too, each by a pchannel of its own, found within
	// PartitionCheck. RunNaive reads only these: the group's autocommit
	// passes over the records of any other, one more way it loses them.
	Partitions int32
	// PartitionCheck is how often Run asks the brokers for partitions
	// added to the topic, and whether it was made again; default 10 s.
	PartitionCheck time.Duration
	// VChannels is the number of vchannels (and workers) per partition;
	// default 16.
	VChannels int
	// SinkPath is the workers' output, a bbolt file (see Sink).
	SinkPath string
	// CatalogPath is lowwater's catalog, a bbolt file (Run only)...
	CatalogPath string
	// ... unless Catalog is set: any catalog, such as an etcdcatalog that
	// nodes on many machines share. The node does not close it.
	Catalog persistence.Catalog
	// Pace is how often the worker of a vchannel flushes; default 50 ms.
	Pace func(partition int32, vchannel int) time.Duration
	// Until, indexed by partition, ends the node once its position reached
	// these offsets (a finite topic); nil runs until the context ends.
	// Partitions added while it reads have none.
	Until []int64
	// Ready, if set, is called once the node reads the topic.
	Ready func()
	// Logger defaults to zap.NewNop.
	Logger *zap.Logger

	// Group and AutoCommitInterval are RunNaive's consumer group and how
	// often it commits; defaults "naive" and 1 s.
	Group              string
	AutoCommitInterval time.Duration
}

// ErrConfig is returned for a Config that cannot work.
var ErrConfig = errors.New("kafka: invalid config")

// ErrPastEnd is returned by Run, before any record is read, when a
// partition's stored checkpoint is past the partition's end: the topic was
// deleted and made again, or the brokers are another cluster's. Read from
// the checkpoint once the log reaches it, the new topic's records below it
// would be skipped; read from the start, they would be processed under a
// checkpoint that already covers them, and skipped at the next start. An
// operator who knows the topic was made again moves the checkpoint back
// ('lowwater set --force PCHANNEL kafka:0') or deletes it ('lowwater
// delete PCHANNEL'). A topic made again and already past the checkpoint
// cannot be told from offsets: delete its checkpoints before the nodes
// start again.
var ErrPastEnd = errors.New("kafka: stored checkpoint past the partition's end")

// ErrStaleCheckpoint ends Run when a partition added to the topic while
// the node reads it has a stored checkpoint: a node stored it for a
// partition this topic did not have when the node started, so for an
// earlier topic of the name, deleted since and made again with fewer
// partitions. Read from it, the new partition's records below it would be
// skipped. An operator deletes it ('lowwater delete PCHANNEL'), and the
// node reads the partition from its start.
var ErrStaleCheckpoint = errors.New("kafka: checkpoint stored for a partition the topic did not have")

// ErrTopicReplaced ends Run when the topic is deleted, or deleted and made
// again, while the node reads it, or the brokers lost records the node had
// read: its checkpoints describe a log that is gone, so it reads nothing
// more. Its checkpoints stay where its workers had flushed.
var ErrTopicReplaced = errors.New("kafka: topic deleted or made again while the node read it")

func (c *Config) setDefaults(needCatalog bool) error {
	if c.VChannels == 0 {
		c.VChannels = 16
	}
	if c.Pace == nil {
		c.Pace = func(int32, int) time.Duration { return 50 * time.Millisecond }
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Group == "" {
		c.Group = "naive"
	}
	if c.AutoCommitInterval == 0 {
		c.AutoCommitInterval = time.Second
	}
	if c.PartitionCheck == 0 {
		c.PartitionCheck = 10 * time.Second
	}
	switch {
	case len(c.Brokers) == 0 || c.Topic == "" || c.Partitions < 1 || c.VChannels < 1:
		return fmt.Errorf("%w: need brokers, a topic, partitions and vchannels", ErrConfig)
	case c.PartitionCheck < 0:
		return fmt.Errorf("%w: PartitionCheck %v is negative", ErrConfig, c.PartitionCheck)
	case c.SinkPath == "" || needCatalog && c.CatalogPath == "" && c.Catalog == nil:
		return fmt.Errorf("%w: need a sink path and a catalog path", ErrConfig)
	case c.Until != nil && len(c.Until) != int(c.Partitions):
		return fmt.Errorf("%w: %d offsets in Until for %d partitions", ErrConfig, len(c.Until), c.Partitions)
	}
	for p := range c.Partitions {
		for v := range c.VChannels {
			if _, err := paceOf(c.Pace, p, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// paceOf is pace(p, v), checked: a worker flushes on a ticker, which
// needs a positive period (time.NewTicker panics on any other), and a
// panic of the function, or its runtime.Goexit, is an ErrConfig too: it
// runs on a goroutine of its own, since a Goexit would end the caller's,
// the growth check's, for good. Checked for the configured partitions
// before the node starts, and for one added while it reads as its
// workers start, which ends the node.
func paceOf(pace func(int32, int) time.Duration, p int32, v int) (time.Duration, error) {
	type result struct {
		d   time.Duration
		err error
	}
	ch := make(chan result, 1)
	go func() {
		returned := false
		defer func() {
			switch r := recover(); {
			case r != nil:
				// %.128q: the panic's text is the caller's, cut and
				// quoted to one line.
				ch <- result{err: fmt.Errorf("%w: Pace(%d, %d) panicked: %.128q", ErrConfig, p, v, fmt.Sprint(r))}
			case !returned:
				ch <- result{err: fmt.Errorf("%w: Pace(%d, %d) ended its goroutine (runtime.Goexit)", ErrConfig, p, v)}
			}
		}()
		d := pace(p, v)
		returned = true
		ch <- result{d: d}
	}()
	r := <-ch
	if r.err == nil && r.d <= 0 {
		r.err = fmt.Errorf("%w: Pace(%d, %d) is %v: a worker flushes every Pace, which must be positive", ErrConfig, p, v, r.d)
	}
	return r.d, r.err
}

// Run is the consumer node that keeps its position with lowwater. It
// returns nil when ctx ends or Until is reached, after a graceful stop:
// every worker flushed, every checkpoint saved. A pchannel that could not
// save its minimum at the stop (the catalog down) is an error, naming it;
// the next start replays from the checkpoint saved before.
//
// Each partition is a pchannel actor whose vchannels are the partition's
// workers. A worker reports its checkpoint after each flush; the actor
// saves the minimum over its workers to the catalog. On start, the node
// seeks each partition to the saved minimum: below it, every worker has
// flushed every record.
func Run(ctx context.Context, cfg Config) (err error) {
	if err := cfg.setDefaults(true); err != nil {
		return err
	}
	catalog := cfg.Catalog
	if catalog == nil {
		bolt, err := persistence.OpenBolt(cfg.CatalogPath)
		if err != nil {
			return err
		}
		defer bolt.Close()
		catalog = bolt
	}
	topicID, stored, err := preflight(ctx, &cfg, catalog)
	if err != nil {
		if ctx.Err() != nil {
			return nil // ended before it began
		}
		return err
	}
	sink, err := OpenSink(cfg.SinkPath)
	if err != nil {
		return err
	}
	defer sink.Close()

	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(cfg.Logger)))
	defer system.Shutdown()
	fl := &fleet{partitionOf: make(map[string]int32, cfg.Partitions)}
	defer func() {
		// Graceful: the actors apply the workers' last reports, then
		// save the minimum (bounded by the stop flush timeout). One that
		// could not (the catalog down) makes the run fail: the next
		// start replays from the last saved checkpoint.
		if unsaved := stopAll(system, fl.all()); err == nil {
			err = unsaved
		}
	}()

	// Spawn one pchannel per partition; its start is where to seek.
	starts := make([]int64, cfg.Partitions)
	for p := range cfg.Partitions {
		name := PChannelName(cfg.Topic, p)
		pid, start, err := spawnPChannel(system, catalog, &cfg, p, stored[name])
		if pid != nil {
			fl.add(name, pid)
		}
		if err != nil {
			return err
		}
		starts[p] = start
		cfg.Logger.Info("seek", zap.Int32("partition", p), zap.Int64("offset", start))
	}

	// Done once every partition's saved checkpoint reached Until.
	done := newGoal(cfg.Until, starts)
	sub := system.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(*messages.CheckpointPersisted); ok {
			if id, ok := e.Value.(wal.KafkaID); ok {
				if p, ok := fl.partition(e.PChannel); ok {
					done.set(int(p), int64(id))
				}
			}
		}
	})
	defer system.EventStream.Unsubscribe(sub)

	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	pl := startPipeline(&cfg, sink, starts, fail, func(p int32, v int, cp int64) {
		system.Root.Send(fl.pid(p), &messages.UpdateCheckpoint{
			VChannel:   VChannelName(cfg.Topic, p, v),
			Checkpoint: wal.KafkaID(cp),
		})
	})
	defer pl.stop() // for an early return; the last line reports its error

	offsets := make(map[int32]kgo.Offset, cfg.Partitions)
	for p, start := range starts {
		offsets[int32(p)] = kgo.NewOffset().At(start)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: offsets}),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return err
	}
	// grow reads the partitions added to the topic since the node
	// started, or since the last call, each from its start (a checkpoint
	// stored for one when it is added is an earlier topic's:
	// ErrStaleCheckpoint). Kafka
	// only adds partitions, never removes one. A
	// topic ID other than the one the node started with is a topic made
	// again: the node ends (the fetches tell it too, about 10 s after).
	// A topic the brokers do not know may be one a broker has yet to
	// learn; the fetches tell whether it is gone (replaced).
	grow := func(ctx context.Context) error {
		t, err := topicMetadata(ctx, cl, cfg.Topic)
		switch {
		case err != nil:
			return nil // asked again at the next check
		case t.TopicID != topicID && t.TopicID != [16]byte{}: // a broker before Kafka 2.8 gives none
			return fmt.Errorf("%w: topic %s has another topic ID than when the node started", ErrTopicReplaced, cfg.Topic)
		}
		for p := fl.len(); p < int32(len(t.Partitions)); p++ {
			// Read now, not at the start: an operator may have deleted
			// it since, as the warning at the start advised.
			name := PChannelName(cfg.Topic, p)
			switch id, err := loadWithin(ctx, catalog, name); {
			case err != nil:
				cfg.Logger.Warn("partition added: its checkpoint cannot be read yet", zap.Int32("partition", p), zap.Error(err))
				return nil // asked again at the next check
			case id != nil:
				return fmt.Errorf("%w: %s, added while the node read the topic, has %s stored: "+
					"'lowwater delete %s' reads it from its start", ErrStaleCheckpoint, name, wal.String(id), name)
			}
			pid, start, err := spawnPChannel(system, catalog, &cfg, p, nil)
			if pid != nil {
				fl.add(name, pid)
			}
			if err != nil {
				return err
			}
			if !pl.add(p, start) {
				return nil // stopping
			}
			cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {p: kgo.NewOffset().At(start)}})
			cfg.Logger.Info("partition added", zap.Int32("partition", p), zap.Int64("offset", start))
		}
		return nil
	}
	serve(runCtx, cl, pl, done, cfg.Ready, func(topic string, p int32, err error) error {
		return replaced(runCtx, cl, &cfg, topicID, p, err)
	}, every(cfg.PartitionCheck, grow, pl.abort))
	return pl.stop()
}

// loadWithin is catalog.Load, given up when ctx ends even if the catalog
// does not: one that ignores its context would hold the node's stop,
// which waits for the growth check. A panic is an error: the check tries
// again at its next turn.
func loadWithin(ctx context.Context, catalog persistence.Catalog, name string) (wal.MessageID, error) {
	return within(ctx, "loading "+name, func() (wal.MessageID, error) { return catalog.Load(ctx, name) })
}

// within is call, a catalog's, given up when ctx ends even if the
// catalog does not, and left to finish on its own; a panic in it is an
// error saying what it was doing. The node calls a catalog on its own
// goroutine only so: the actors bound and guard their calls themselves.
func within[T any](ctx context.Context, doing string, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		returned := false
		defer func() {
			switch r := recover(); {
			case r != nil:
				ch <- result{err: fmt.Errorf("kafka: the catalog panicked %s: %.128q", doing, fmt.Sprint(r))}
			case !returned:
				ch <- result{err: fmt.Errorf("kafka: the catalog ended its goroutine %s (runtime.Goexit)", doing)}
			}
		}()
		v, err := call()
		returned = true
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// fleet is the node's pchannels, by partition. It grows while the node
// reads, as workers send to it and events are matched against it.
type fleet struct {
	mu          sync.Mutex
	pids        []*actor.PID
	partitionOf map[string]int32
}

// add adds the pchannel of the partition after the last.
func (f *fleet) add(name string, pid *actor.PID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partitionOf[name] = int32(len(f.pids))
	f.pids = append(f.pids, pid)
}

func (f *fleet) pid(p int32) *actor.PID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pids[p]
}

func (f *fleet) partition(name string) (int32, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.partitionOf[name]
	return p, ok
}

func (f *fleet) len() int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int32(len(f.pids))
}

func (f *fleet) all() []*actor.PID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pids)
}

// every calls f every d until ctx ends; an error from f ends the node
// through fail.
func every(d time.Duration, f func(context.Context) error, fail func(error)) func(context.Context) {
	return func(ctx context.Context) {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := f(ctx); err != nil {
				if ctx.Err() == nil {
					fail(err)
				}
				return
			}
		}
	}
}

// replaced judges an error a fetch of partition p reported: the topic gone
// or made again (its ID no longer the one the node started with), or
// records lost under what the node had read, is ErrTopicReplaced. An
// unknown topic the brokers still know by its ID is a moment of theirs.
func replaced(ctx context.Context, cl *kgo.Client, cfg *Config, topicID [16]byte, p int32, err error) error {
	var loss *kgo.ErrDataLoss
	if errors.As(err, &loss) {
		return fmt.Errorf("%w: topic %s, partition %d: %w", ErrTopicReplaced, cfg.Topic, p, err)
	}
	if !errors.Is(err, kerr.UnknownTopicID) && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil
	}
	t, metaErr := topicMetadata(ctx, cl, cfg.Topic)
	switch {
	case errors.Is(metaErr, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("%w: topic %s is gone (%w)", ErrTopicReplaced, cfg.Topic, err)
	case metaErr == nil && t.TopicID != topicID:
		return fmt.Errorf("%w: topic %s has another topic ID than when the node started (%w)", ErrTopicReplaced, cfg.Topic, err)
	}
	return nil
}

// preflight checks the topic against the Config and the stored
// checkpoints against the topic, through one client, before any actor is
// spawned (and so saves) or any record is read. It returns the topic's ID
// and the checkpoints, read in one call, handed to the actors
// (WithPreloaded).
func preflight(ctx context.Context, cfg *Config, catalog persistence.Catalog) ([16]byte, map[string]wal.MessageID, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return [16]byte{}, nil, err
	}
	defer cl.Close()
	topicID, err := checkPartitions(ctx, cl, cfg)
	if err != nil {
		return [16]byte{}, nil, err
	}
	stored, err := within(ctx, "loading its checkpoints", func() (map[string]wal.MessageID, error) { return catalog.LoadAll(ctx) })
	if err != nil {
		return [16]byte{}, nil, err
	}
	if err := checkRange(ctx, cl, cfg, stored); err != nil {
		return [16]byte{}, nil, err
	}
	for name, id := range stored {
		rest, ok := strings.CutPrefix(name, cfg.Topic+"-")
		p, err := strconv.ParseInt(rest, 10, 32)
		if ok && err == nil && p >= int64(cfg.Partitions) && PChannelName(cfg.Topic, int32(p)) == name {
			cfg.Logger.Warn("checkpoint stored for a partition the topic does not have, from an earlier topic of the name: "+
				"the node refuses it if the partition is added (ErrStaleCheckpoint)", zap.String("pchannel", name), zap.String("checkpoint", wal.String(id)))
		}
	}
	return topicID, stored, nil
}

// checkPartitions asks the brokers for the topic's partitions:
// Config.Partitions other than their count is an ErrConfig, found before
// any actor is spawned. The partitions past it would never be read, or
// checkpoints of partitions that do not exist kept. It returns the topic's
// ID, by which a topic made again is told from the one the node read.
func checkPartitions(ctx context.Context, cl *kgo.Client, cfg *Config) ([16]byte, error) {
	t, err := topicMetadata(ctx, cl, cfg.Topic)
	if err != nil {
		return [16]byte{}, err
	}
	if n := len(t.Partitions); n != int(cfg.Partitions) {
		return [16]byte{}, fmt.Errorf("%w: topic %s has %d partitions, Config.Partitions says %d", ErrConfig, cfg.Topic, n, cfg.Partitions)
	}
	return t.TopicID, nil
}

// topicMetadata asks the brokers for topic; one they do not know is an
// error wrapping kerr.UnknownTopicOrPartition.
func topicMetadata(ctx context.Context, cl *kgo.Client, name string) (*kmsg.MetadataResponseTopic, error) {
	meta := kmsg.NewPtrMetadataRequest()
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr(name)
	meta.Topics = append(meta.Topics, topic)
	resp, err := meta.RequestWith(ctx, cl)
	switch {
	case err != nil:
		return nil, fmt.Errorf("kafka: metadata of topic %s: %w", name, err)
	case len(resp.Topics) != 1:
		return nil, fmt.Errorf("kafka: metadata of topic %s: %d topics in the answer", name, len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("kafka: topic %s: %w", name, err)
	}
	return &resp.Topics[0], nil
}

// checkRange asks the brokers where each partition starts and ends. A
// stored checkpoint past the end is ErrPastEnd, for every such partition.
// One below the start is a warning: records were deleted (retention)
// before the node processed them, and the client reads from the start.
func checkRange(ctx context.Context, cl *kgo.Client, cfg *Config, stored map[string]wal.MessageID) error {
	logStarts, err := listOffsets(ctx, cl, cfg, -2)
	if err != nil {
		return err
	}
	ends, err := listOffsets(ctx, cl, cfg, -1)
	if err != nil {
		return err
	}
	var past []error
	for p := range cfg.Partitions {
		name := PChannelName(cfg.Topic, p)
		start, ok := stored[name].(wal.KafkaID)
		if !ok {
			continue // nothing stored, the start; or not Kafka's, refused at the spawn
		}
		switch end, first := ends[p], logStarts[p]; {
		case int64(start) > end:
			past = append(past, fmt.Errorf("%w: %s: checkpoint %d, end %d: was the topic made again? "+
				"'lowwater set --force %s kafka:0' reads it from its start", ErrPastEnd, name, start, end, name))
		case int64(start) < first:
			cfg.Logger.Warn("records below the partition's start were deleted before the node processed them: it reads from the start",
				zap.String("pchannel", name), zap.Int64("checkpoint", int64(start)), zap.Int64("start", first))
		}
	}
	return errors.Join(past...)
}

// listOffsets returns, by partition, the offset at timestamp: -1 the end,
// -2 the start.
func listOffsets(ctx context.Context, cl *kgo.Client, cfg *Config, timestamp int64) (map[int32]int64, error) {
	list := kmsg.NewPtrListOffsetsRequest()
	list.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = cfg.Topic
	for p := range cfg.Partitions {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition, lp.Timestamp = p, timestamp
		lt.Partitions = append(lt.Partitions, lp)
	}
	list.Topics = append(list.Topics, lt)
	resp, err := list.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafka: offsets of topic %s: %w", cfg.Topic, err)
	}
	offsets := make(map[int32]int64, cfg.Partitions)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("kafka: offsets of topic %s, partition %d: %w", cfg.Topic, p.Partition, err)
			}
			offsets[p.Partition] = p.Offset
		}
	}
	for p := range cfg.Partitions {
		if _, ok := offsets[p]; !ok {
			return nil, fmt.Errorf("kafka: offsets of topic %s: no answer for partition %d", cfg.Topic, p)
		}
	}
	return offsets, nil
}

// stopAll stops the pchannels gracefully and reports those that stopped
// with their minimum unsaved (messages.Stopped, Flushed false).
func stopAll(system *actor.ActorSystem, pids []*actor.PID) error {
	var mu sync.Mutex
	var unsaved []error
	sub := system.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(*messages.Stopped); ok && !e.Flushed {
			mu.Lock()
			unsaved = append(unsaved, fmt.Errorf("kafka: pchannel %s stopped with its minimum (%s) unsaved: %w", e.PChannel, wal.String(e.Dropped), e.Reason))
			mu.Unlock()
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	// All at once: each waits up to the stop flush timeout when the
	// catalog is down, and one after another they would add up.
	stops := make([]*actor.Future, len(pids))
	for i, pid := range pids {
		stops[i] = system.Root.PoisonFuture(pid)
	}
	for _, f := range stops {
		_ = f.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(unsaved...)
}

// spawnPChannel spawns the actor of partition p, its vchannels at the
// stored checkpoint (or offset 0), and returns where consumption restarts:
// the actor's start message ID.
func spawnPChannel(system *actor.ActorSystem, catalog persistence.Catalog, cfg *Config, p int32, stored wal.MessageID) (*actor.PID, int64, error) {
	name := PChannelName(cfg.Topic, p)
	from, ok := stored.(wal.KafkaID)
	if stored != nil && !ok {
		return nil, 0, fmt.Errorf("kafka: pchannel %s: stored checkpoint %s is not a Kafka offset: %w", name, wal.String(stored), wal.ErrWALMismatch)
	}
	vchannels := make(map[string]wal.MessageID, cfg.VChannels)
	for v := range cfg.VChannels {
		vchannels[VChannelName(cfg.Topic, p, v)] = from
	}
	props, err := actors.NewProps(name, wal.Kafka, catalog,
		actors.WithPreloaded(stored),
		actors.WithVChannels(vchannels),
		actors.WithLogger(cfg.Logger),
	)
	if err != nil {
		return nil, 0, err
	}
	pid, err := system.Root.SpawnNamed(props, name)
	if err != nil {
		return nil, 0, err
	}
	// Preloaded, the actor is recovered as soon as it started.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := actors.GetState(ctx, system.Root, pid)
	if err != nil {
		return pid, 0, err
	}
	start, ok := st.StartMessageID.(wal.KafkaID)
	if !st.Recovered || !ok {
		return pid, 0, fmt.Errorf("kafka: pchannel %s did not recover (start %s)", name, wal.String(st.StartMessageID))
	}
	return pid, int64(start), nil
}

// serve reads until ctx ends or done is reached, then closes the client:
// the caller's deferred calls stop the workers (their last flush) and then
// the actors, in that order. watch, if set, runs beside the reader, and
// has returned when serve does.
func serve(ctx context.Context, cl *kgo.Client, pl *pipeline, done *goal, ready func(),
	fatal func(string, int32, error) error, watch func(context.Context)) {
	readCtx, stopReading := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { pl.consume(readCtx, cl, fatal) })
	if watch != nil {
		wg.Go(func() { watch(readCtx) })
	}
	if ready != nil {
		ready()
	}
	select {
	case <-ctx.Done():
	case <-done.reached:
	}
	stopReading()
	wg.Wait()
	cl.Close()
}
