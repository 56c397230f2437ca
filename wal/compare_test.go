package wal_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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

// brokenMarshal is an ID whose Marshal panics, of no registered WAL.
type brokenMarshal struct{ fragile }

func (brokenMarshal) Marshal() []byte { panic("Marshal bug") }

// choosyID is a registered WAL's ID whose codec fails in every way Marshal
// checks for: its Marshal panics for 13, keeps the low byte alone (so 300
// reads back as 44), and writes nothing for 0, which Unmarshal refuses.
type choosyID int64

func (choosyID) WALName() wal.Name          { return "test-choosy" }
func (a choosyID) LT(o wal.MessageID) bool  { b, ok := o.(choosyID); return ok && a < b }
func (a choosyID) LTE(o wal.MessageID) bool { b, ok := o.(choosyID); return ok && a <= b }
func (a choosyID) EQ(o wal.MessageID) bool  { b, ok := o.(choosyID); return ok && a == b }
func (a choosyID) String() string           { return "test-choosy:" + strconv.FormatInt(int64(a), 10) }
func (a choosyID) Marshal() []byte {
	switch {
	case a == 13:
		panic("Marshal bug")
	case a == 0:
		return nil
	}
	return []byte{byte(a)}
}

var registerChoosy = sync.OnceValue(func() error {
	return wal.Register("test-choosy", wal.Codec[choosyID]{
		Unmarshal: func(b []byte) (choosyID, error) {
			if len(b) != 1 {
				return 0, fmt.Errorf("%d bytes, want 1", len(b))
			}
			return choosyID(b[0]), nil
		},
		Parse: func(s string) (choosyID, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			return choosyID(n), err
		},
	})
})

// taggedID carries a note its codec does not keep: it reads back as
// another value at the same position, which is all a checkpoint needs.
type taggedID struct {
	pos  int64
	note string
}

func (taggedID) WALName() wal.Name          { return "test-tagged" }
func (a taggedID) LT(o wal.MessageID) bool  { b, ok := o.(taggedID); return ok && a.pos < b.pos }
func (a taggedID) LTE(o wal.MessageID) bool { b, ok := o.(taggedID); return ok && a.pos <= b.pos }
func (a taggedID) EQ(o wal.MessageID) bool  { b, ok := o.(taggedID); return ok && a.pos == b.pos }
func (a taggedID) Marshal() []byte          { return []byte{byte(a.pos)} }
func (a taggedID) String() string           { return "test-tagged:" + strconv.FormatInt(a.pos, 10) }

var registerTagged = sync.OnceValue(func() error {
	return wal.Register("test-tagged", wal.Codec[taggedID]{
		Unmarshal: func(b []byte) (taggedID, error) {
			if len(b) != 1 {
				return taggedID{}, fmt.Errorf("%d bytes, want 1", len(b))
			}
			return taggedID{pos: int64(b[0])}, nil
		},
		Parse: func(string) (taggedID, error) { return taggedID{}, nil },
	})
})

// Marshal never panics, and gives only bytes that read back as the same
// position: a checkpoint stored otherwise would be read at the next
// recovery as another, lower maybe, or not at all.
func TestMarshalGivesOnlyBytesThatReadBack(t *testing.T) {
	if err := registerChoosy(); err != nil {
		t.Fatal(err)
	}
	if b, err := wal.Marshal(wal.KafkaID(7)); err != nil || string(b) != string(wal.KafkaID(7).Marshal()) {
		t.Errorf("Marshal(kafka:7) = (%x, %v)", b, err)
	}
	if b, err := wal.Marshal(choosyID(7)); err != nil || string(b) != "\x07" {
		t.Errorf("Marshal(test-choosy:7) = (%x, %v), want (07, nil)", b, err)
	}
	if err := registerTagged(); err != nil {
		t.Fatal(err)
	}
	if b, err := wal.Marshal(taggedID{pos: 5, note: "kept in memory only"}); err != nil || string(b) != "\x05" {
		t.Errorf("Marshal(test-tagged:5) = (%x, %v), want (05, nil): the same position", b, err)
	}
	for _, c := range []struct {
		id   wal.MessageID
		want error
		text string
	}{
		{choosyID(13), wal.ErrCorruptID, "choosyID.Marshal panicked: Marshal bug"},
		{choosyID(300), wal.ErrCorruptID, "test-choosy:300 reads back as test-choosy:44"},
		{choosyID(0), wal.ErrCorruptID, "test-choosy:0 does not read back as marshalled: wal: corrupt message ID: test-choosy: 0 bytes, want 1"},
		{brokenMarshal{}, wal.ErrWALMismatch, "brokenMarshal is not a registered message ID type"},
	} {
		b, err := wal.Marshal(c.id)
		if !errors.Is(err, c.want) || b != nil || !strings.Contains(err.Error(), c.text) {
			t.Errorf("Marshal(%s) = (%x, %v), want (nil, %v containing %q)", wal.String(c.id), b, err, c.want, c.text)
		}
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

// wordy is an ID of a third party whose text is its own value: any length,
// any bytes.
type wordy struct {
	fragile
	text string
}

func (w wordy) String() string { return w.text }

// An ID's text in an error or a log line is cut, and quoted when a
// terminal would act on it; Text gives it whole. A rollback error once
// held 1.2 MB of an ID's text, escape sequences included.
func TestStringIsBriefTextWhole(t *testing.T) {
	long := "test-wordy:" + strings.Repeat("7", 200)
	for _, c := range []struct{ text, want string }{
		{"test-wordy:1 2", "test-wordy:1 2"},
		{long, long[:128] + "… (211 bytes)"},
		{"test-wordy:\x1b[2J\n", `"test-wordy:\x1b[2J\n"`},
	} {
		id := wordy{text: c.text}
		if got := wal.String(id); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.text, got, c.want)
		}
		if got := wal.Text(id); got != c.text {
			t.Errorf("Text(%q) = %q, want it whole", c.text, got)
		}
	}
	if got, want := wal.Text(brokenString{}), "<wal_test.brokenString: String panicked: String bug>"; got != want {
		t.Errorf("Text of a panicking ID = %q, want %q", got, want)
	}
	if got := wal.String(wal.PulsarID{LedgerID: -1 << 63, EntryID: -1 << 63, BatchIndex: -1 << 31, Partition: -1 << 31}); strings.Contains(got, "…") {
		t.Errorf("a built-in ID's text was cut: %q", got)
	}
}

func TestCompareRefusesIDsOfTwoWALs(t *testing.T) {
	for _, pair := range [][2]wal.MessageID{{wal.KafkaID(1), wal.RocksMQID(1)}, {wal.KafkaID(1), nil}, {nil, fragile(1)}, {nil, nil}, {fragile(1), wal.KafkaID(1)}} {
		if got, err := wal.Compare(pair[0], pair[1]); !errors.Is(err, wal.ErrWALMismatch) || got != 0 {
			t.Errorf("Compare(%#v, %#v) = (%d, %v), want (0, ErrWALMismatch)", pair[0], pair[1], got, err)
		}
	}
}
