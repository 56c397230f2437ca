package wal_test

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/lowwater/lowwater/wal"
)

// The oracles order raw ID bytes without going through the codecs, so that
// the fuzz targets check the codecs against an independent reading of the
// layout rather than against themselves.

func i64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }
func i32(b []byte) int32 { return int32(binary.BigEndian.Uint32(b)) }

func offsetOrder(a, b []byte) int { return cmp.Compare(i64(a), i64(b)) }

// pulsarOrder leaves out the partition (bytes 20..24): it is not a position.
func pulsarOrder(a, b []byte) int {
	if c := cmp.Compare(i64(a[0:8]), i64(b[0:8])); c != 0 {
		return c
	}
	if c := cmp.Compare(i64(a[8:16]), i64(b[8:16])); c != 0 {
		return c
	}
	return cmp.Compare(i32(a[16:20]), i32(b[16:20]))
}

func woodpeckerOrder(a, b []byte) int {
	if c := cmp.Compare(i64(a[0:8]), i64(b[0:8])); c != 0 {
		return c
	}
	return cmp.Compare(i64(a[8:16]), i64(b[8:16]))
}

func FuzzKafka(f *testing.F)   { fuzzCodec(f, wal.Kafka, 8, offsetOrder) }
func FuzzRocksMQ(f *testing.F) { fuzzCodec(f, wal.RocksMQ, 8, offsetOrder) }
func FuzzPulsar(f *testing.F)  { fuzzCodec(f, wal.Pulsar, 24, pulsarOrder) }
func FuzzWoodpecker(f *testing.F) {
	fuzzCodec(f, wal.Woodpecker, 16, woodpeckerOrder)
}

func fuzzCodec(f *testing.F, name wal.Name, size int, order func(a, b []byte) int) {
	f.Fuzz(func(t *testing.T, ra, rb []byte) {
		a, okA := decode(t, name, size, ra)
		b, okB := decode(t, name, size, rb)
		if okA {
			checkSelf(t, a)
			checkForeign(t, a, ra)
		}
		if !okA || !okB {
			return
		}
		want := order(ra, rb)
		if got := a.LT(b); got != (want < 0) {
			t.Errorf("%s.LT(%s) = %v, oracle says %d", a, b, got, want)
		}
		if got := a.LTE(b); got != (want <= 0) {
			t.Errorf("%s.LTE(%s) = %v, oracle says %d", a, b, got, want)
		}
		if got := a.EQ(b); got != (want == 0) {
			t.Errorf("%s.EQ(%s) = %v, oracle says %d", a, b, got, want)
		}
		if a.LT(b) != !b.LTE(a) {
			t.Errorf("a.LT(b) = %v but b.LTE(a) = %v (a=%s b=%s)", a.LT(b), b.LTE(a), a, b)
		}
		if a.EQ(b) != b.EQ(a) {
			t.Errorf("EQ not symmetric: a=%s b=%s", a, b)
		}
		if a.EQ(b) != (a.LTE(b) && b.LTE(a)) {
			t.Errorf("EQ disagrees with LTE both ways: a=%s b=%s", a, b)
		}
		if m := wal.Min(a, b); !m.LTE(a) || !m.LTE(b) || (m != a && m != b) {
			t.Errorf("Min(%s, %s) = %s", a, b, m)
		}
	})
}

// decode checks Unmarshal's contract on raw: an ID whose canonical bytes are
// raw, or ErrCorruptID for any other length.
func decode(t *testing.T, name wal.Name, size int, raw []byte) (wal.MessageID, bool) {
	t.Helper()
	id, err := wal.Unmarshal(name, raw)
	if err != nil {
		if !errors.Is(err, wal.ErrCorruptID) || id != nil || len(raw) == size {
			t.Fatalf("Unmarshal(%s, %x) = (%v, %v)", name, raw, id, err)
		}
		return nil, false
	}
	if len(raw) != size {
		t.Fatalf("Unmarshal(%s, %d bytes) accepted a wrong length", name, len(raw))
	}
	if got := id.Marshal(); !bytes.Equal(got, raw) {
		t.Fatalf("Marshal(Unmarshal(%x)) = %x", raw, got)
	}
	if k, ok := id.(wal.KafkaID); ok && k < 0 {
		if err := wal.Check(name, id); !errors.Is(err, wal.ErrSentinel) || id.WALName() != name {
			t.Fatalf("Check(%s) = %v, want ErrSentinel (WALName %q)", id, err, id.WALName())
		}
	} else if err := wal.Check(name, id); err != nil || id.WALName() != name {
		t.Fatalf("decoded %s ID fails Check: %v (WALName %q)", name, err, id.WALName())
	}
	return id, true
}

func checkSelf(t *testing.T, a wal.MessageID) {
	t.Helper()
	if a.LT(a) || !a.LTE(a) || !a.EQ(a) {
		t.Errorf("%s against itself: LT=%v LTE=%v EQ=%v", a, a.LT(a), a.LTE(a), a.EQ(a))
	}
}

// checkForeign decodes raw as every other WAL that accepts it and checks the
// two never compare.
func checkForeign(t *testing.T, a wal.MessageID, raw []byte) {
	t.Helper()
	for _, other := range wal.Names() {
		if other == a.WALName() {
			continue
		}
		o, err := wal.Unmarshal(other, raw)
		if err != nil {
			continue
		}
		if a.LT(o) || a.LTE(o) || a.EQ(o) || o.LT(a) || o.LTE(a) || o.EQ(a) {
			t.Errorf("%s and %s compare across WALs", a, o)
		}
		if wal.Check(a.WALName(), o) == nil {
			t.Errorf("Check(%s, %s) = nil, want ErrWALMismatch", a.WALName(), o)
		}
	}
}
