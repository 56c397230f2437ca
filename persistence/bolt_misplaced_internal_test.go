package persistence

import (
	"slices"
	"testing"

	"github.com/lowwater/lowwater/wal"
)

// misplaced takes a record for another pchannel's, or not, by what the
// damage a key and its record can take leaves of them.
func TestMisplaced(t *testing.T) {
	rec := func(pchannel string, id wal.MessageID) []byte {
		b, err := EncodeRecord(pchannel, Record{Checkpoint: id})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	small := rec("pch-000", wal.KafkaID(1000))
	flipped := slices.Clone(small)
	flipped[len(flipped)-1] ^= 0x01
	for _, c := range []struct {
		name string
		k    string
		v    []byte
		want bool
	}{
		{"whole", "pch-000", small, false},
		{"its own bytes damaged", "pch-000", flipped, false},
		{"another's, whole", "pch-001", small, true},
		// The key's size damaged to 0: the record reads from where the key
		// began, and its check's place holds the high bytes of a small
		// Kafka offset, 0, as the empty name's check is.
		{"the key shrunk to nothing", "", slices.Concat([]byte("pch-000"), small[:len(small)-len("pch-000")]), true},
		{"the key shifted", "ch-000\x02", slices.Concat(small[1:], []byte("p")), true},
		{"the key lost its tail", "pch-0", slices.Concat([]byte("00"), small[:len(small)-2]), true},
		{"not a record", "pch-000", []byte("not a record at all"), true},
	} {
		if got := misplaced([]byte(c.k), c.v); got != c.want {
			t.Errorf("%s: misplaced(%q) = %t, want %t", c.name, c.k, got, c.want)
		}
	}
}
