package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

func ExampleOpenBolt() {
	dir, err := os.MkdirTemp("", "lowwater-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	catalog, err := persistence.OpenBolt(filepath.Join(dir, "checkpoints.db"))
	if err != nil {
		panic(err)
	}
	defer catalog.Close()

	ctx := context.Background()
	fmt.Println(catalog.Save(ctx, "by-dev-dml_0", wal.KafkaID(42)))
	fmt.Println(catalog.Save(ctx, "by-dev-dml_0", wal.KafkaID(42))) // a retry
	err = catalog.Save(ctx, "by-dev-dml_0", wal.KafkaID(41))
	fmt.Println(errors.Is(err, persistence.ErrStoredAhead))
	id, err := catalog.Load(ctx, "by-dev-dml_0")
	fmt.Println(id, err)
	// Output:
	// <nil>
	// <nil>
	// true
	// kafka:42 <nil>
}
