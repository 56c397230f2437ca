package wal_test

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		wal   wal.Name
		id    wal.MessageID
		bytes []byte
	}{
		{"kafka zero", wal.Kafka, wal.KafkaID(0), []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{"kafka 5", wal.Kafka, wal.KafkaID(5), []byte{0, 0, 0, 0, 0, 0, 0, 5}},
		{"kafka -1", wal.Kafka, wal.KafkaID(-1), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"kafka max", wal.Kafka, wal.KafkaID(math.MaxInt64), []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"rocksmq 258", wal.RocksMQ, wal.RocksMQID(258), []byte{0, 0, 0, 0, 0, 0, 1, 2}},
		{"rocksmq min", wal.RocksMQ, wal.RocksMQID(math.MinInt64), []byte{0x80, 0, 0, 0, 0, 0, 0, 0}},
		{"pulsar", wal.Pulsar, wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 4},
			concat([]byte{0, 0, 0, 0, 0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 0, 0, 2}, []byte{0, 0, 0, 3}, []byte{0, 0, 0, 4})},
		{"pulsar negative batch", wal.Pulsar, wal.PulsarID{LedgerID: 7, EntryID: 0, BatchIndex: -1, Partition: 0},
			concat([]byte{0, 0, 0, 0, 0, 0, 0, 7}, []byte{0, 0, 0, 0, 0, 0, 0, 0}, []byte{0xff, 0xff, 0xff, 0xff}, []byte{0, 0, 0, 0})},
		{"woodpecker", wal.Woodpecker, wal.WoodpeckerID{SegmentID: 9, EntryID: 65536},
			concat([]byte{0, 0, 0, 0, 0, 0, 0, 9}, []byte{0, 0, 0, 0, 0, 1, 0, 0})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.WALName(); got != tt.wal {
				t.Fatalf("WALName() = %q, want %q", got, tt.wal)
			}
			if got := tt.id.Marshal(); !bytes.Equal(got, tt.bytes) {
				t.Fatalf("Marshal() = %x, want %x", got, tt.bytes)
			}
			got, err := wal.Unmarshal(tt.wal, tt.bytes)
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			// == on the interfaces compares every field, the Pulsar partition
			// included: the round trip must not lose it.
			if got != tt.id {
				t.Fatalf("Unmarshal() = %#v, want %#v", got, tt.id)
			}
			err = wal.Check(tt.wal, got)
			if k, ok := got.(wal.KafkaID); ok && k < 0 {
				// It round-trips, as a record someone stored must read
				// back, but it is no checkpoint.
				if !errors.Is(err, wal.ErrSentinel) {
					t.Fatalf("Check = %v, want ErrSentinel", err)
				}
			} else if err != nil {
				t.Fatalf("Check: %v", err)
			}
		})
	}
}

// Kafka's clients read a negative offset as a place (-1 the end, -2 the
// start), not a position: Check refuses every one, and passes 0 and up.
func TestCheckRefusesKafkaSentinels(t *testing.T) {
	for _, k := range []wal.KafkaID{-1, -2, -3, math.MinInt64} {
		if err := wal.Check(wal.Kafka, k); !errors.Is(err, wal.ErrSentinel) {
			t.Errorf("Check(%v) = %v, want ErrSentinel", k, err)
		}
	}
	for _, k := range []wal.KafkaID{0, 1, math.MaxInt64} {
		if err := wal.Check(wal.Kafka, k); err != nil {
			t.Errorf("Check(%v) = %v, want nil", k, err)
		}
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		id   wal.MessageID
		want string
	}{
		{wal.KafkaID(42), "kafka:42"},
		{wal.KafkaID(-3), "kafka:-3"},
		{wal.RocksMQID(7), "rocksmq:7"},
		{wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 4}, "pulsar:1:2:3@4"},
		{wal.WoodpeckerID{SegmentID: 5, EntryID: 6}, "woodpecker:5:6"},
		{nil, "<none>"},
	}
	for _, tt := range tests {
		if got := wal.String(tt.id); got != tt.want {
			t.Errorf("String(%#v) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestOrder(t *testing.T) {
	p := func(ledger, entry int64, batch, partition int32) wal.PulsarID {
		return wal.PulsarID{LedgerID: ledger, EntryID: entry, BatchIndex: batch, Partition: partition}
	}
	w := func(seg, entry int64) wal.WoodpeckerID { return wal.WoodpeckerID{SegmentID: seg, EntryID: entry} }
	tests := []struct {
		name          string
		a, b          wal.MessageID
		lt, lte, eq   bool
		reverseLT     bool // b.LT(a)
		reverseLTE    bool // b.LTE(a)
		reverseEQ     bool // b.EQ(a)
		describeOrder string
	}{
		{"kafka less", wal.KafkaID(1), wal.KafkaID(2), true, true, false, false, false, false, "1 < 2"},
		{"kafka equal", wal.KafkaID(2), wal.KafkaID(2), false, true, true, false, true, true, "2 == 2"},
		{"kafka negative", wal.KafkaID(-1), wal.KafkaID(0), true, true, false, false, false, false, "-1 < 0"},
		{"kafka extremes", wal.KafkaID(math.MinInt64), wal.KafkaID(math.MaxInt64), true, true, false, false, false, false, "min < max"},
		{"rocksmq less", wal.RocksMQID(10), wal.RocksMQID(11), true, true, false, false, false, false, "10 < 11"},
		{"rocksmq equal", wal.RocksMQID(0), wal.RocksMQID(0), false, true, true, false, true, true, "0 == 0"},
		{"pulsar ledger first", p(1, 100, 100, 0), p(2, 0, 0, 0), true, true, false, false, false, false, "ledger decides"},
		{"pulsar entry second", p(1, 1, 100, 0), p(1, 2, 0, 0), true, true, false, false, false, false, "entry decides"},
		{"pulsar batch third", p(1, 1, -1, 0), p(1, 1, 0, 0), true, true, false, false, false, false, "batch decides"},
		{"pulsar equal", p(3, 4, 5, 0), p(3, 4, 5, 0), false, true, true, false, true, true, "same position"},
		{"pulsar partition ignored for EQ", p(3, 4, 5, 0), p(3, 4, 5, 9), false, true, true, false, true, true, "partition is not position"},
		{"pulsar partition ignored for LT", p(3, 4, 5, 9), p(3, 4, 6, 0), true, true, false, false, false, false, "higher partition, lower position"},
		{"woodpecker segment first", w(1, 99), w(2, 0), true, true, false, false, false, false, "segment decides"},
		{"woodpecker entry second", w(2, 0), w(2, 1), true, true, false, false, false, false, "entry decides"},
		{"woodpecker equal", w(2, 1), w(2, 1), false, true, true, false, true, true, "same position"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(what string, got, want bool) {
				t.Helper()
				if got != want {
					t.Errorf("%s = %v, want %v (%s; a=%s b=%s)", what, got, want, tt.describeOrder, tt.a, tt.b)
				}
			}
			check("a.LT(b)", tt.a.LT(tt.b), tt.lt)
			check("a.LTE(b)", tt.a.LTE(tt.b), tt.lte)
			check("a.EQ(b)", tt.a.EQ(tt.b), tt.eq)
			check("b.LT(a)", tt.b.LT(tt.a), tt.reverseLT)
			check("b.LTE(a)", tt.b.LTE(tt.a), tt.reverseLTE)
			check("b.EQ(a)", tt.b.EQ(tt.a), tt.reverseEQ)
			check("wal.Less(a, b)", wal.Less(tt.a, tt.b), tt.lt)
		})
	}
}

// foreignID claims to be a Kafka ID without being one, as a caller's own
// type might.
type foreignID struct{}

func (foreignID) WALName() wal.Name      { return wal.Kafka }
func (foreignID) LT(wal.MessageID) bool  { return false }
func (foreignID) LTE(wal.MessageID) bool { return false }
func (foreignID) EQ(wal.MessageID) bool  { return false }
func (foreignID) Marshal() []byte        { return make([]byte, 8) }
func (foreignID) String() string         { return "foreign" }

func TestCrossTypeComparisonsAreFalse(t *testing.T) {
	ids := []wal.MessageID{
		wal.KafkaID(0),
		wal.RocksMQID(0),
		wal.PulsarID{},
		wal.WoodpeckerID{},
		foreignID{},
	}
	for i, a := range ids {
		for j, b := range ids {
			if i == j {
				continue
			}
			if a.LT(b) || a.LTE(b) || a.EQ(b) {
				t.Errorf("%T vs %T: LT=%v LTE=%v EQ=%v, want all false", a, b, a.LT(b), a.LTE(b), a.EQ(b))
			}
		}
		if a.LT(nil) || a.LTE(nil) || a.EQ(nil) {
			t.Errorf("%T vs nil: want all false", a)
		}
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		wal  wal.Name
		id   wal.MessageID
		want error
	}{
		{"kafka ok", wal.Kafka, wal.KafkaID(1), nil},
		{"rocksmq ok", wal.RocksMQ, wal.RocksMQID(1), nil},
		{"pulsar ok", wal.Pulsar, wal.PulsarID{LedgerID: 1}, nil},
		{"woodpecker ok", wal.Woodpecker, wal.WoodpeckerID{SegmentID: 1}, nil},
		{"kafka id for pulsar", wal.Pulsar, wal.KafkaID(1), wal.ErrWALMismatch},
		{"rocksmq id for kafka", wal.Kafka, wal.RocksMQID(1), wal.ErrWALMismatch},
		{"nil id", wal.Kafka, nil, wal.ErrWALMismatch},
		{"foreign type named kafka", wal.Kafka, foreignID{}, wal.ErrWALMismatch},
		{"unknown wal", "nats", wal.KafkaID(1), wal.ErrUnknownWAL},
		{"empty wal name", "", wal.KafkaID(1), wal.ErrUnknownWAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := wal.Check(tt.wal, tt.id)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Check = %v, want errors.Is %v", err, tt.want)
			}
		})
	}
}

func TestUnmarshalErrors(t *testing.T) {
	sizes := map[wal.Name]int{wal.Kafka: 8, wal.RocksMQ: 8, wal.Pulsar: 24, wal.Woodpecker: 16}
	for name, size := range sizes {
		if _, err := wal.Unmarshal(name, nil); !errors.Is(err, wal.ErrCorruptID) {
			t.Errorf("%s: Unmarshal(nil) = %v, want ErrCorruptID", name, err)
		}
		for n := 0; n <= size+8; n++ {
			id, err := wal.Unmarshal(name, make([]byte, n))
			if n == size {
				if err != nil {
					t.Errorf("%s: Unmarshal(%d bytes) = %v, want nil", name, n, err)
				}
				continue
			}
			if !errors.Is(err, wal.ErrCorruptID) || id != nil {
				t.Errorf("%s: Unmarshal(%d bytes) = (%v, %v), want (nil, ErrCorruptID)", name, n, id, err)
			}
		}
	}
	if _, err := wal.Unmarshal("nats", make([]byte, 8)); !errors.Is(err, wal.ErrUnknownWAL) {
		t.Errorf("Unmarshal(unknown WAL) = %v, want ErrUnknownWAL", err)
	}
}

func TestNamesAndKnown(t *testing.T) {
	got := wal.Names()
	if !slices.IsSorted(got) {
		t.Fatalf("Names() = %v, not sorted", got)
	}
	// Other tests of this package register WALs of their own: the built-ins
	// must be there, whatever else is.
	for _, name := range []wal.Name{"kafka", "pulsar", "rocksmq", "woodpecker"} {
		if !slices.Contains(got, name) {
			t.Fatalf("Names() = %v, missing %q", got, name)
		}
		if !wal.Known(name) {
			t.Errorf("Known(%q) = false", name)
		}
	}
	if wal.Known("nats") || wal.Known("") {
		t.Error("Known reports an unknown WAL")
	}
}

func TestMinAndLess(t *testing.T) {
	one, two := wal.KafkaID(1), wal.KafkaID(2)
	minTests := []struct {
		a, b, want wal.MessageID
	}{
		{nil, nil, nil},
		{nil, two, two},
		{two, nil, two},
		{one, two, one},
		{two, one, one},
		{two, two, two},
	}
	for _, tt := range minTests {
		if got := wal.Min(tt.a, tt.b); got != tt.want {
			t.Errorf("Min(%s, %s) = %s, want %s", wal.String(tt.a), wal.String(tt.b), wal.String(got), wal.String(tt.want))
		}
	}
	lessTests := []struct {
		a, b wal.MessageID
		want bool
	}{
		{nil, nil, false},
		{nil, one, true},
		{one, nil, false},
		{one, two, true},
		{two, one, false},
		{one, one, false},
	}
	for _, tt := range lessTests {
		if got := wal.Less(tt.a, tt.b); got != tt.want {
			t.Errorf("Less(%s, %s) = %v, want %v", wal.String(tt.a), wal.String(tt.b), got, tt.want)
		}
	}
}
