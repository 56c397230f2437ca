package wal_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lowwater/lowwater/wal"
)

// fragile is an ID whose comparisons panic when either side is 666, as a
// third party's may on an ID decoded from damaged bytes.
type fragile int64

func (fragile) WALName() wal.Name { return "test-fragile" }
func (a fragile) LT(o wal.MessageID) bool {
	b := o.(fragile)
	if a == 666 || b == 666 {
		panic("fragile LT")
	}
	return a < b
}
func (a fragile) LTE(o wal.MessageID) bool { return !o.(fragile).LT(a) }
func (a fragile) EQ(o wal.MessageID) bool  { return a == o.(fragile) }
func (fragile) Marshal() []byte            { return nil }
func (fragile) String() string             { return "test-fragile:?" }

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b wal.MessageID
		want int
	}{
		{wal.KafkaID(1), wal.KafkaID(2), -1},
		{wal.KafkaID(2), wal.KafkaID(2), 0},
		{wal.KafkaID(3), wal.KafkaID(2), 1},
		{wal.PulsarID{LedgerID: 1, EntryID: 9}, wal.PulsarID{LedgerID: 2}, -1},
		{fragile(1), fragile(2), -1},
		{fragile(2), fragile(2), 0},
		{fragile(5), fragile(2), 1},
	} {
		if got, err := wal.Compare(c.a, c.b); got != c.want || err != nil {
			t.Errorf("Compare(%v, %v) = (%d, %v), want (%d, nil)", c.a, c.b, got, err, c.want)
		}
	}
}

func TestCompareTurnsAPanicIntoErrCorruptID(t *testing.T) {
	for _, pair := range [][2]wal.MessageID{{fragile(666), fragile(1)}, {fragile(1), fragile(666)}} {
		got, err := wal.Compare(pair[0], pair[1])
		if !errors.Is(err, wal.ErrCorruptID) || got != 0 {
			t.Errorf("Compare(%v, %v) = (%d, %v), want (0, ErrCorruptID)", pair[0], pair[1], got, err)
		}
	}
	_, err := wal.Compare(fragile(666), fragile(1))
	if !strings.Contains(err.Error(), "fragile LT") {
		t.Errorf("the error %q does not name the panic", err)
	}
}

func TestBuiltIn(t *testing.T) {
	for _, id := range []wal.MessageID{wal.KafkaID(1), wal.RocksMQID(1), wal.PulsarID{}, wal.WoodpeckerID{}} {
		if !wal.BuiltIn(id) {
			t.Errorf("BuiltIn(%T) = false", id)
		}
	}
	for _, id := range []wal.MessageID{nil, fragile(1), (*wal.KafkaID)(nil)} {
		if wal.BuiltIn(id) {
			t.Errorf("BuiltIn(%#v) = true", id)
		}
	}
}

// brokenMarshal is an ID whose Marshal panics.
type brokenMarshal struct{ fragile }

func (brokenMarshal) Marshal() []byte { panic("Marshal bug") }

func TestMarshalTurnsAPanicIntoErrCorruptID(t *testing.T) {
	if b, err := wal.Marshal(wal.KafkaID(7)); err != nil || string(b) != string(wal.KafkaID(7).Marshal()) {
		t.Errorf("Marshal(kafka:7) = (%x, %v)", b, err)
	}
	b, err := wal.Marshal(brokenMarshal{})
	if !errors.Is(err, wal.ErrCorruptID) || b != nil || !strings.Contains(err.Error(), "Marshal bug") {
		t.Errorf("Marshal of a panicking ID = (%x, %v), want (nil, ErrCorruptID naming the panic)", b, err)
	}
}

// brokenString is an ID whose String panics.
type brokenString struct{ fragile }

func (brokenString) String() string { panic("String bug") }

func TestStringNeverPanics(t *testing.T) {
	if got := wal.String(nil); got != "<none>" {
		t.Errorf("String(nil) = %q", got)
	}
	if got := wal.String(wal.KafkaID(7)); got != "kafka:7" {
		t.Errorf("String(kafka:7) = %q", got)
	}
	if got, want := wal.String(brokenString{}), "<wal_test.brokenString: String panicked: String bug>"; got != want {
		t.Errorf("String of a panicking ID = %q, want %q", got, want)
	}
}

func TestCompareRefusesIDsOfTwoWALs(t *testing.T) {
	for _, pair := range [][2]wal.MessageID{{wal.KafkaID(1), wal.RocksMQID(1)}, {wal.KafkaID(1), nil}, {nil, fragile(1)}, {fragile(1), wal.KafkaID(1)}} {
		if got, err := wal.Compare(pair[0], pair[1]); !errors.Is(err, wal.ErrWALMismatch) || got != 0 {
			t.Errorf("Compare(%#v, %#v) = (%d, %v), want (0, ErrWALMismatch)", pair[0], pair[1], got, err)
		}
	}
}
