package record

import (
	"testing"

	"github.com/lowwater/lowwater/wal"
)

// A record is encoded on every save and decoded on every read, a save's
// check of what is stored included: its one allocation is its bytes.
func TestEncodeAllocatesItsBytesOnly(t *testing.T) {
	raw := wal.KafkaID(42).Marshal()
	if n := testing.AllocsPerRun(100, func() { Encode("by-dev-rootcoord-dml_0", wal.Kafka, raw, 7) }); n != 1 {
		t.Fatalf("Encode: %v allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { nameSum("by-dev-rootcoord-dml_0") }); n != 0 {
		t.Fatalf("nameSum: %v allocations, want 0", n)
	}
}
