package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/bench/baseline"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// The two implementations every benchmark runs, in this order.
const (
	implBaseline = "baseline"
	implLowwater = "lowwater"
)

var impls = []string{implBaseline, implLowwater}

// fleet is a set of pchannels of one implementation, numbered from 0.
type fleet interface {
	// update moves one vchannel of pchannel i: a method call on the
	// baseline, a Root.Send of a new UpdateCheckpoint on lowwater.
	update(i int, vchannel string, id wal.MessageID)
	// updateBatch applies u to pchannel i: one UpdateBatch message on
	// lowwater, one Update call per entry on the baseline.
	updateBatch(i int, u []messages.VChannelCheckpoint)
	// barrier returns once every update sent so far has been applied.
	barrier(tb testing.TB)
	// close stops every pchannel and waits for it.
	close(tb testing.TB)
}

// spec describes the pchannels of a fleet.
type spec struct {
	pchannels []string
	// vchannels are the checkpoints every pchannel starts with.
	vchannels map[string]wal.MessageID
	catalog   persistence.Catalog
	// preload recovers lowwater from one LoadAll (actors.WithPreloaded)
	// instead of one Load per pchannel. The baseline has no bulk read: it
	// always loads pchannel by pchannel, as the reference does.
	preload bool
}

func newFleet(tb testing.TB, impl string, s spec) fleet {
	tb.Helper()
	switch impl {
	case implBaseline:
		return newBaselineFleet(tb, s)
	case implLowwater:
		return newActorFleet(tb, s)
	case implFloor:
		return newFloorFleet(s)
	case implMutex:
		return newMutexFleet(s)
	case implSender:
		return newSenderFleet(tb, s)
	}
	tb.Fatalf("unknown impl %q", impl)
	return nil
}

type baselineFleet []*baseline.Manager

func newBaselineFleet(tb testing.TB, s spec) baselineFleet {
	f := make(baselineFleet, len(s.pchannels))
	for i, name := range s.pchannels {
		m, err := baseline.Recover(context.Background(), s.catalog, wal.Kafka, name, s.vchannels)
		if err != nil {
			f[:i].close(tb)
			tb.Fatalf("recover %s: %v", name, err)
		}
		f[i] = m
	}
	return f
}

func (f baselineFleet) update(i int, vchannel string, id wal.MessageID) { f[i].Update(vchannel, id) }

func (f baselineFleet) updateBatch(i int, u []messages.VChannelCheckpoint) {
	m := f[i]
	for _, c := range u {
		m.Update(c.VChannel, c.Checkpoint)
	}
}

func (f baselineFleet) barrier(testing.TB) {}

func (f baselineFleet) close(testing.TB) {
	for _, m := range f {
		m.Close()
	}
}

type actorFleet struct {
	sys  *actor.ActorSystem
	pids []*actor.PID
}

func newActorFleet(tb testing.TB, s spec) *actorFleet {
	sys := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	f := &actorFleet{sys: sys, pids: make([]*actor.PID, 0, len(s.pchannels))}
	var preloaded map[string]wal.MessageID
	if s.preload {
		var err error
		if preloaded, err = s.catalog.LoadAll(context.Background()); err != nil {
			tb.Fatalf("LoadAll: %v", err)
		}
	}
	var recovered atomic.Int64
	all := make(chan struct{})
	n := int64(len(s.pchannels))
	sub := sys.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Recovered); ok && recovered.Add(1) == n {
			close(all)
		}
	})
	defer sys.EventStream.Unsubscribe(sub)
	for _, name := range s.pchannels {
		opts := []actors.Option{actors.WithVChannels(s.vchannels)}
		if s.preload {
			opts = append(opts, actors.WithPreloaded(preloaded[name]))
		}
		props, err := actors.NewProps(name, wal.Kafka, s.catalog, opts...)
		if err != nil {
			f.close(tb)
			tb.Fatal(err)
		}
		f.pids = append(f.pids, sys.Root.Spawn(props))
	}
	if n == 0 {
		close(all)
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		f.close(tb)
		tb.Fatalf("%d of %d pchannels recovered within a minute", recovered.Load(), n)
	}
	return f
}

func (f *actorFleet) update(i int, vchannel string, id wal.MessageID) {
	f.sys.Root.Send(f.pids[i], &messages.UpdateCheckpoint{VChannel: vchannel, Checkpoint: id})
}

func (f *actorFleet) updateBatch(i int, u []messages.VChannelCheckpoint) {
	f.sys.Root.Send(f.pids[i], &messages.UpdateBatch{Updates: u})
}

// barrier asks every pchannel for its state: a mailbox is FIFO, so each
// answer comes after the updates sent to it before.
func (f *actorFleet) barrier(tb testing.TB) {
	futures := make([]*actor.Future, len(f.pids))
	for i, pid := range f.pids {
		futures[i] = f.sys.Root.RequestFuture(pid, &messages.GetState{}, time.Minute)
	}
	for i, fu := range futures {
		if _, err := fu.Result(); err != nil {
			tb.Fatalf("GetState of pchannel %d: %v", i, err)
		}
	}
}

func (f *actorFleet) close(tb testing.TB) {
	futures := make([]*actor.Future, len(f.pids))
	for i, pid := range f.pids {
		futures[i] = f.sys.Root.PoisonFuture(pid)
	}
	for i, fu := range futures {
		if err := fu.Wait(); err != nil {
			tb.Errorf("stop pchannel %d: %v", i, err)
		}
	}
	f.sys.Shutdown()
}

// names returns n names with the prefix, numbered from 0.
func names(prefix string, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return s
}

// ids returns KafkaIDs 0..n-1, boxed once: an ID reaches either
// implementation as an interface value read off the WAL, so building it is
// not part of an update's cost.
func ids(n int) []wal.MessageID {
	s := make([]wal.MessageID, n)
	for i := range s {
		s[i] = wal.KafkaID(i)
	}
	return s
}

// at returns the checkpoints of vchannels, all at id.
func at(vchannels []string, id wal.MessageID) map[string]wal.MessageID {
	m := make(map[string]wal.MessageID, len(vchannels))
	for _, v := range vchannels {
		m[v] = id
	}
	return m
}
