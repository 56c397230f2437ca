// Quickstart keeps the checkpoint of one pchannel on a bbolt file: two
// vchannels, one update, a graceful stop that saves the new minimum.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	logger, err := zap.NewDevelopment() // to stderr
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "lowwater-quickstart")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "checkpoints.db")
	catalog, err := persistence.OpenBolt(path)
	if err != nil {
		return err
	}
	defer catalog.Close()
	// A file whose newest meta page is damaged opens, with no error, as of
	// the commit before: say so (persistence.WithIntactMeta refuses it).
	if d, err := catalog.DamagedMeta(); err == nil && d != nil {
		logger.Warn("checkpoint file has a damaged meta page",
			zap.Stringer("damage", d))
	}

	system := actor.NewActorSystem(
		actor.WithLoggerFactory(actors.LoggerFactory(logger)))
	// Once (twice panics); it stops no actor: stop them first.
	defer system.Shutdown()

	props, err := actors.NewProps("orders-dml-0", wal.Kafka, catalog,
		actors.WithLogger(logger),
		actors.WithVChannels(map[string]wal.MessageID{
			"shard-a": wal.KafkaID(100),
			"shard-b": wal.KafkaID(120),
		}))
	if err != nil {
		return err
	}
	pchannel := system.Root.Spawn(props)
	poisoned := false
	defer func() { // early returns stop it too, before the catalog closes
		if !poisoned {
			_ = system.Root.StopFuture(pchannel).Wait()
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Where consumption starts: the stored checkpoint, or, with none
	// stored, the vchannels' minimum (nil with neither: the WAL's
	// beginning). The actor reads it after the spawn.
	start, err := actors.StartMessageID(ctx, system, pchannel)
	if err != nil {
		return err
	}
	fmt.Println("start at", start)

	// shard-a moves past shard-b: the minimum rises from 100 to 120.
	update := &messages.UpdateCheckpoint{
		VChannel:   "shard-a",
		Checkpoint: wal.KafkaID(130),
	}
	// A typed error: errors.Is(err, messages.ErrCheckpointRollback), ...
	err = actors.Request(ctx, system.Root, pchannel, update)
	if err != nil {
		return err
	}

	// A graceful stop saves the pending minimum before it ends, and says
	// whether it could (Flushed, Dropped): one that never read its stored
	// checkpoint (damaged, say) saves nothing.
	stopped, err := actors.Poison(ctx, system, pchannel)
	if err != nil {
		return err
	}
	poisoned = true
	fmt.Println("stopped; persisted:", stopped.LastPersisted,
		"flushed:", stopped.Flushed)

	// What a restart would start from.
	durable, err := catalog.Load(ctx, "orders-dml-0")
	if err != nil {
		return err
	}
	fmt.Println("durable:", durable)
	return nil
}
