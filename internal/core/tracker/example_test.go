package tracker_test

import (
	"errors"
	"fmt"

	"github.com/lowwater/lowwater/internal/core/tracker"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

func ExampleTracker() {
	tr, err := tracker.New(wal.Kafka)
	if err != nil {
		panic(err)
	}
	show := func(op string, advanced bool, err error) {
		fmt.Printf("%-22s advanced=%-5v minimum=%s err=%v\n", op, advanced, wal.String(tr.Minimum()), err)
	}

	advanced, err := tr.Add("v0", wal.KafkaID(100))
	show("Add v0 100", advanced, err)
	advanced, err = tr.Add("v1", wal.KafkaID(90)) // an Add may lower the minimum
	show("Add v1 90", advanced, err)
	advanced, err = tr.Update("v1", wal.KafkaID(120))
	show("Update v1 120", advanced, err)
	advanced, err = tr.Update("v1", wal.KafkaID(110))
	show("Update v1 110", advanced, err)
	fmt.Println("rollback:", errors.Is(err, messages.ErrCheckpointRollback))
	advanced, err = tr.Update("v0", wal.KafkaID(100)) // equal: accepted, no-op
	show("Update v0 100", advanced, err)
	advanced, err = tr.Drop("v0")
	show("Drop v0", advanced, err)
	advanced, err = tr.Drop("v1") // no minimum is not a rise
	show("Drop v1", advanced, err)
	fmt.Println("len:", tr.Len())

	// Output:
	// Add v0 100             advanced=true  minimum=kafka:100 err=<nil>
	// Add v1 90              advanced=false minimum=kafka:90 err=<nil>
	// Update v1 120          advanced=true  minimum=kafka:100 err=<nil>
	// Update v1 110          advanced=false minimum=kafka:100 err=lowwater: checkpoint rollback: vchannel "v1" from kafka:120 to kafka:110
	// rollback: true
	// Update v0 100          advanced=false minimum=kafka:100 err=<nil>
	// Drop v0                advanced=true  minimum=kafka:120 err=<nil>
	// Drop v1                advanced=false minimum=<none> err=<nil>
	// len: 0
}
