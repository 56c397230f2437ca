package actors

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

type hangSave struct{ *persistence.Memory }

func (h hangSave) Save(ctx context.Context, p string, v wal.MessageID) error {
	if v.EQ(wal.KafkaID(1)) {
		return h.Memory.Save(ctx, p, v)
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestZZPoisonThenStop(t *testing.T) {
	for _, gap := range []time.Duration{0, 50 * time.Millisecond} {
		system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
		cat := hangSave{persistence.NewMemory()}
		props, _ := NewProps("p", wal.Kafka, cat, WithStopFlushTimeout(2*time.Second), WithSaveTimeout(time.Hour),
			WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(1)}))
		pid := system.Root.Spawn(props)
		GetState(context.Background(), system.Root, pid)
		time.Sleep(50 * time.Millisecond)
		Request(context.Background(), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: wal.KafkaID(5)})
		time.Sleep(20 * time.Millisecond)
		pf := system.Root.PoisonFuture(pid)
		time.Sleep(gap)
		began := time.Now()
		system.Root.StopFuture(pid).Wait()
		t.Logf("gap %v: StopFuture took %v", gap, time.Since(began))
		pf.Wait()
		system.Shutdown()
	}
}
