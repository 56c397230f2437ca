package watching_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/examples/watching"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The events snippet, run over a pchannel's life.
func ExampleWatch() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	err := watching.Watch(system, func() {
		props, _ := actors.NewProps("orders-dml-0", wal.Kafka, persistence.NewMemory(),
			actors.WithVChannels(map[string]wal.MessageID{"shard-a": wal.KafkaID(100)}))
		pid := system.Root.Spawn(props)
		_ = system.Root.PoisonFuture(pid).Wait()
	})
	fmt.Println(err)
	// Output:
	// *messages.Recovered
	// *messages.CheckpointPersisted
	// *messages.Stopped
	// dropped: 0
	// <nil>
}

// The metrics snippet, run over a pchannel's life and scraped once.
func ExampleExport() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	registry := prometheus.NewRegistry()
	var updates float64
	err := watching.Export(system, registry, persistence.NewMemory(), "orders-dml-0", func(pid *actor.PID) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = actors.Request(ctx, system.Root, pid, &messages.AddVChannel{VChannel: "shard-a", Checkpoint: wal.KafkaID(100)})
		_ = actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(130)})
		_ = system.Root.PoisonFuture(pid).Wait()
		families, _ := registry.Gather()
		for _, f := range families {
			if f.GetName() == "lowwater_updates_total" {
				updates = f.GetMetric()[0].GetCounter().GetValue()
			}
		}
	})
	fmt.Println(err, updates)
	// Output:
	// <nil> 1
}

// TestREADMEShowsTheSnippets checks that the README's snippets of its
// section on watching are the bodies of Watch and Export to the letter, so
// that what a reader pastes compiles.
func TestREADMEShowsTheSnippets(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("watching.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, fn := range []string{"Watch", "Export"} {
		body := regexp.MustCompile(`(?s)\nfunc ` + fn + `\([^\n]*\{\n(.*?)\treturn nil\n\}\n`).FindSubmatch(code)
		if body == nil {
			t.Fatalf("watching.go has no func %s ending in return nil", fn)
		}
		snippet := strings.ReplaceAll(string(body[1]), "\n\t", "\n")
		snippet = strings.TrimPrefix(snippet, "\t")
		if !strings.Contains(string(readme), "```go\n"+snippet+"```\n") {
			t.Errorf("README.md does not show the body of %s as it is: copy it under \"Watching it\":\n%s", fn, snippet)
		}
	}
}
