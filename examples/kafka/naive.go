package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// RunNaive is the same node without lowwater, keeping its position the way
// most Kafka consumers do: in a consumer group, with the client committing
// on a timer (kgo's autocommit, every Config.AutoCommitInterval) the
// offsets of what it polled before the latest poll. The same workers, the
// same sink, the same pace.
//
// It is here to be measured, not copied: a poll hands records to workers
// that have not flushed them yet, and the commit covers them all the same.
// A crash after such a commit loses them, since the next run starts past
// them. A crash before it replays everything polled since the last one.
func RunNaive(ctx context.Context, cfg Config) error {
	if err := cfg.setDefaults(false); err != nil {
		return err
	}
	sink, err := OpenSink(cfg.SinkPath)
	if err != nil {
		return err
	}
	defer sink.Close()

	// The node learns where it resumes only once the group assigned it
	// partitions: workers start from offset 0 and are marked up to the
	// committed offsets then. (Their checkpoints only serve Until here.)
	starts := make([]int64, cfg.Partitions)
	slots := func(p int32, v int) int { return int(p)*cfg.VChannels + v }
	var targets []int64
	if cfg.Until != nil {
		targets = make([]int64, 0, int(cfg.Partitions)*cfg.VChannels)
		for p := range cfg.Partitions {
			for range cfg.VChannels {
				targets = append(targets, cfg.Until[p])
			}
		}
	}
	// Done once every worker flushed up to Until.
	done := newGoal(targets, make([]int64, len(targets)))

	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	pl := startPipeline(&cfg, sink, starts, fail, func(p int32, v int, cp int64) { done.set(slots(p, v), cp) })
	defer pl.stop() // for an early return; the last line reports its error

	ready := make(chan struct{})
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		// Static membership: a restarted node takes its place in the group
		// at once instead of waiting out the dead one's session.
		kgo.InstanceID(cfg.Group+"-node"),
		kgo.AutoCommitInterval(cfg.AutoCommitInterval),
		kgo.FetchMaxWait(250*time.Millisecond),
		kgo.AdjustFetchOffsetsFn(func(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			for p, o := range offsets[cfg.Topic] {
				if p >= 0 && p < cfg.Partitions {
					at := max(o.EpochOffset().Offset, 0) // no commit yet: the start
					cfg.Logger.Info("resume", zap.Int32("partition", p), zap.Int64("offset", at))
					pl.mark(ctx, p, at)
				}
			}
			select {
			case <-ready:
			default:
				close(ready)
			}
			return offsets, nil
		}),
	)
	if err != nil {
		return err
	}
	serve(runCtx, cl, pl, done, func() {
		if cfg.Ready == nil {
			return
		}
		select {
		case <-ready:
			cfg.Ready()
		case <-runCtx.Done():
		}
	}, nil, nil)
	return pl.stop()
}
