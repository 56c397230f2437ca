package faultinject_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

func ExampleCatalog_Script() {
	catalog := faultinject.Wrap(persistence.NewMemory())
	defer catalog.Close()
	catalog.Script(faultinject.OpSave, faultinject.Error(), faultinject.LostReply())

	ctx := context.Background()
	for range 3 {
		err := catalog.Save(ctx, "p", wal.KafkaID(7))
		fmt.Println(errors.Is(err, faultinject.ErrInjected))
	}
	fmt.Println(catalog.Calls(faultinject.OpSave), catalog.Failures(faultinject.OpSave))
	// Output:
	// true
	// true
	// false
	// 3 2
}
