package actors_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Many producers update vchannels one at a time through a Sender; it ships
// only the latest checkpoint of each, in batches, and Flush reports what
// the pchannel rejected.
func ExampleSender() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	catalog := persistence.NewMemory()
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, catalog, actors.WithVChannels(map[string]wal.MessageID{
		"orders-shard-a": wal.KafkaID(100),
		"orders-shard-b": wal.KafkaID(120),
	}))
	if err != nil {
		panic(err)
	}
	pchannel := system.Root.Spawn(props)
	sender, err := actors.NewSender(system, pchannel)
	if err != nil {
		panic(err)
	}

	for id := 101; id <= 200; id++ {
		_ = sender.Update("orders-shard-a", wal.KafkaID(id)) // no error: buffered or shipped
	}
	_ = sender.Update("orders-shard-c", wal.KafkaID(1)) // unknown: the pchannel rejects it

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = sender.Flush(ctx)
	var rejected *messages.BatchError
	if errors.As(err, &rejected) {
		fmt.Println(rejected.Rejected[0].VChannel, errors.Is(err, messages.ErrVChannelNotFound))
	}
	state, _ := actors.GetState(ctx, system.Root, pchannel, actors.IncludeCheckpoints())
	fmt.Println(state.Checkpoints["orders-shard-a"])

	_ = sender.Close(ctx)
	_ = system.Root.PoisonFuture(pchannel).Wait()
	system.Shutdown()
	// Output:
	// orders-shard-c true
	// kafka:200
}
