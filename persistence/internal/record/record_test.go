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

// NameCheck reads the check of a whole version 2 record only: of one that
// fails its checksum the check may be damaged too, and version 1 has none.
func TestNameCheck(t *testing.T) {
	whole := Encode("orders-dml-0", wal.Kafka, wal.KafkaID(5).Marshal(), 7)
	check, ok := NameCheck(whole)
	if !ok || check != 0xff1ff471 || !Names(check, []byte("orders-dml-0")) || Names(check, []byte("nrders-dml-0")) {
		t.Fatalf("NameCheck(whole) = (%#x, %t), want orders-dml-0's, 0xff1ff471", check, ok)
	}
	damaged := append([]byte(nil), whole...)
	damaged[3] ^= 0x10
	v1 := []byte{1, 0, 0, 0, 0, 0, 0, 0, 7, 5, 'k', 'a', 'f', 'k', 'a', 0, 8, 0, 0, 0, 0, 0, 0, 0, 5, 0x15, 0x0a, 0x99, 0x22}
	for name, b := range map[string][]byte{"damaged": damaged, "version 1": v1, "empty": nil, "short": whole[:6]} {
		if check, ok := NameCheck(b); ok {
			t.Errorf("NameCheck(%s) = (%#x, true), want no check", name, check)
		}
	}
	if _, _, _, err := Decode("any", v1); err != nil {
		t.Fatalf("the version 1 record of this test does not decode: %v", err)
	}
}
