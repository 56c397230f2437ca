package wal_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/lowwater/lowwater/wal"
)

// seqID is a WAL of the tests' own: a sequence number.
type seqID uint32

func (seqID) WALName() wal.Name { return "test-seq" }
func (id seqID) LT(o wal.MessageID) bool {
	v, ok := o.(seqID)
	return ok && id < v
}
func (id seqID) LTE(o wal.MessageID) bool {
	v, ok := o.(seqID)
	return ok && id <= v
}
func (id seqID) EQ(o wal.MessageID) bool {
	v, ok := o.(seqID)
	return ok && id == v
}
func (id seqID) Marshal() []byte { return binary.BigEndian.AppendUint32(nil, uint32(id)) }
func (id seqID) String() string  { return "test-seq:" + strconv.FormatUint(uint64(id), 10) }

var seqCodec = wal.Codec[seqID]{
	Unmarshal: func(b []byte) (seqID, error) {
		if len(b) != 4 {
			return 0, fmt.Errorf("%d bytes, want 4", len(b))
		}
		return seqID(binary.BigEndian.Uint32(b)), nil
	},
	Parse: func(text string) (seqID, error) {
		v, err := strconv.ParseUint(text, 10, 32)
		return seqID(v), err
	},
}

// registerSeq registers the test WAL once for the whole package.
var registerSeq = sync.OnceValue(func() error { return wal.Register("test-seq", seqCodec) })

func TestRegisteredWALWorksLikeABuiltIn(t *testing.T) {
	if err := registerSeq(); err != nil {
		t.Fatalf("Register = %v", err)
	}
	if !wal.Known("test-seq") {
		t.Fatal("Known(test-seq) = false after Register")
	}
	id, err := wal.Unmarshal("test-seq", seqID(7).Marshal())
	if err != nil || id != seqID(7) {
		t.Fatalf("Unmarshal = (%#v, %v), want 7", id, err)
	}
	if _, err := wal.Unmarshal("test-seq", []byte{1}); !errors.Is(err, wal.ErrCorruptID) {
		t.Fatalf("Unmarshal(1 byte) = %v, want ErrCorruptID (the codec's own error wrapped)", err)
	}
	for _, text := range []string{"test-seq:9", "9"} {
		if id, err := wal.Parse("test-seq", text); err != nil || id != seqID(9) {
			t.Fatalf("Parse(%q) = (%#v, %v), want 9", text, id, err)
		}
	}
	if err := wal.Check("test-seq", seqID(1)); err != nil {
		t.Fatalf("Check = %v", err)
	}
	if err := wal.Check("test-seq", wal.KafkaID(1)); !errors.Is(err, wal.ErrWALMismatch) {
		t.Fatalf("Check(kafka ID) = %v, want ErrWALMismatch", err)
	}
	if name, err := wal.NameOf(seqID(1)); err != nil || name != "test-seq" {
		t.Fatalf("NameOf = (%q, %v)", name, err)
	}
}

// wrongNameID says it belongs to another WAL than it is registered for.
type wrongNameID struct{ seqID }

func (wrongNameID) WALName() wal.Name { return "elsewhere" }

type ptrID struct{ seqID }

// panicID panics in WALName, as a careless implementation might.
type panicID struct{ seqID }

func (panicID) WALName() wal.Name { panic("boom") }

// boxID holds a pointer: whoever shares it could change the position.
type boxID struct {
	seqID
	at *uint64
}

// deepBoxID holds an interface, in an array in a field.
type deepBoxID struct {
	seqID
	parts [2]struct{ v any }
}

// sliceID holds a slice, so == on it would panic.
type sliceID struct {
	seqID
	_ []byte
}

func TestRegisterRefusesWithoutPanicking(t *testing.T) {
	if err := registerSeq(); err != nil {
		t.Fatalf("Register = %v", err)
	}
	before := wal.Names()
	unmarshalPtr := func([]byte) (*ptrID, error) { return nil, nil }
	parsePtr := func(string) (*ptrID, error) { return nil, nil }
	tests := []struct {
		name string
		err  error
	}{
		{"twice", wal.Register("test-seq", seqCodec)},
		{"built-in name", wal.Register(wal.Kafka, seqCodec)},
		{"empty name", wal.Register("", seqCodec)},
		{"colon in name", wal.Register("a:b", seqCodec)},
		{"space in name", wal.Register("a b", seqCodec)},
		{"type registered under another name", wal.Register("seq-again", seqCodec)},
		{"no Unmarshal", wal.Register("test-nounmarshal", wal.Codec[seqID]{Parse: seqCodec.Parse})},
		{"no Parse", wal.Register("test-noparse", wal.Codec[seqID]{Unmarshal: seqCodec.Unmarshal})},
		{"pointer ID type", wal.Register("test-ptr", wal.Codec[*ptrID]{Unmarshal: unmarshalPtr, Parse: parsePtr})},
		{"interface ID type", wal.Register("test-iface", wal.Codec[wal.MessageID]{
			Unmarshal: func([]byte) (wal.MessageID, error) { return nil, nil },
			Parse:     func(string) (wal.MessageID, error) { return nil, nil }})},
		{"not comparable", wal.Register("test-slice", wal.Codec[sliceID]{
			Unmarshal: func([]byte) (sliceID, error) { return sliceID{}, nil },
			Parse:     func(string) (sliceID, error) { return sliceID{}, nil }})},
		{"holds a pointer", wal.Register("test-box", wal.Codec[boxID]{
			Unmarshal: func([]byte) (boxID, error) { return boxID{at: new(uint64)}, nil },
			Parse:     func(string) (boxID, error) { return boxID{}, nil }})},
		{"holds an interface deep down", wal.Register("test-deepbox", wal.Codec[deepBoxID]{
			Unmarshal: func([]byte) (deepBoxID, error) { return deepBoxID{parts: [2]struct{ v any }{{v: 1}}}, nil },
			Parse:     func(string) (deepBoxID, error) { return deepBoxID{}, nil }})},
		{"WALName differs", wal.Register("test-wrong", wal.Codec[wrongNameID]{
			Unmarshal: func([]byte) (wrongNameID, error) { return wrongNameID{}, nil },
			Parse:     func(string) (wrongNameID, error) { return wrongNameID{}, nil }})},
		{"WALName panics", wal.Register("test-panic", wal.Codec[panicID]{
			Unmarshal: func([]byte) (panicID, error) { return panicID{}, nil },
			Parse:     func(string) (panicID, error) { return panicID{}, nil }})},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, wal.ErrInvalidCodec) {
			t.Errorf("%s: Register = %v, want ErrInvalidCodec", tt.name, tt.err)
		}
	}
	said := map[string]string{
		"holds a pointer":              "holds a pointer (wal_test.boxID.at)",
		"holds an interface deep down": "holds an interface (wal_test.deepBoxID.parts[].v)",
	}
	for _, tt := range tests {
		if want, ok := said[tt.name]; ok && !strings.Contains(fmt.Sprint(tt.err), want) {
			t.Errorf("%s: Register = %v, want it to say %q", tt.name, tt.err, want)
		}
	}
	if after := wal.Names(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused registrations changed Names from %v to %v", before, after)
	}
}

// panicky is a WAL whose codec panics on every input.
type panicky int64

func (panicky) WALName() wal.Name              { return "test-panicky" }
func (panicky) LT(wal.MessageID) bool          { return false }
func (panicky) LTE(wal.MessageID) bool         { return false }
func (panicky) EQ(wal.MessageID) bool          { return false }
func (panicky) Marshal() []byte                { return nil }
func (id panicky) String() string              { return "test-panicky:" + strconv.FormatInt(int64(id), 10) }
func panickyUnmarshal([]byte) (panicky, error) { panic("codec bug") }
func panickyParse(string) (panicky, error)     { panic("codec bug") }

var registerPanicky = sync.OnceValue(func() error {
	return wal.Register("test-panicky", wal.Codec[panicky]{Unmarshal: panickyUnmarshal, Parse: panickyParse})
})

func TestCodecPanicsAreErrors(t *testing.T) {
	if err := registerPanicky(); err != nil {
		t.Fatalf("Register = %v", err)
	}
	if id, err := wal.Unmarshal("test-panicky", []byte{1}); !errors.Is(err, wal.ErrCorruptID) || id != nil {
		t.Errorf("Unmarshal = (%v, %v), want ErrCorruptID", id, err)
	}
	if id, err := wal.Parse("test-panicky", "1"); !errors.Is(err, wal.ErrSyntax) || id != nil {
		t.Errorf("Parse = (%v, %v), want ErrSyntax", id, err)
	}
}

// cyclic is a WAL whose codec fails with errors a third party's code
// makes: Unmarshal's wraps itself, so that errors.Is on it, or on what
// wraps it, never returned (an update holding such an ID wedged its
// pchannel), and Parse's panics in Error.
type cyclic int64

func (cyclic) WALName() wal.Name             { return "test-cyclic" }
func (a cyclic) LT(o wal.MessageID) bool     { return a < o.(cyclic) }
func (a cyclic) LTE(o wal.MessageID) bool    { return a <= o.(cyclic) }
func (a cyclic) EQ(o wal.MessageID) bool     { return a == o.(cyclic) }
func (cyclic) Marshal() []byte               { return []byte{1} }
func (a cyclic) String() string              { return "test-cyclic:" + strconv.FormatInt(int64(a), 10) }
func cyclicUnmarshal([]byte) (cyclic, error) { return 0, &selfWrapped{} }
func cyclicParse(string) (cyclic, error)     { return 0, &brokenError{} }

type selfWrapped struct{}

func (e *selfWrapped) Error() string { return "a codec's own error" }
func (e *selfWrapped) Unwrap() error { return e }

type brokenError struct{}

func (e *brokenError) Error() string { panic("Error") }

func TestCodecErrorsAreKeptAsText(t *testing.T) {
	if err := wal.Register("test-cyclic", wal.Codec[cyclic]{Unmarshal: cyclicUnmarshal, Parse: cyclicParse}); err != nil {
		t.Fatalf("Register = %v", err)
	}
	_, err := wal.Unmarshal("test-cyclic", []byte{1})
	if !errors.Is(err, wal.ErrCorruptID) || errors.Is(err, wal.ErrSyntax) || err.Error() != "wal: corrupt message ID: test-cyclic: a codec's own error" {
		t.Errorf("Unmarshal = %v, want ErrCorruptID with the codec's text", err)
	}
	_, err = wal.Marshal(cyclic(7))
	if !errors.Is(err, wal.ErrCorruptID) || errors.Is(err, context.Canceled) {
		t.Errorf("Marshal = %v, want ErrCorruptID", err)
	}
	_, err = wal.Parse("test-cyclic", "7")
	if !errors.Is(err, wal.ErrSyntax) || errors.Is(err, wal.ErrCorruptID) || !strings.HasSuffix(err.Error(), ": %!v(PANIC=Error method: Error)") {
		t.Errorf("Parse = %v, want ErrSyntax, the codec's error named by its type", err)
	}
}

// verbose is a WAL whose codec fails with a megabyte of text.
type verbose struct{ cyclic }

func (verbose) WALName() wal.Name { return "test-verbose" }

// A codec's error goes into errors and logs cut, as an ID's text does.
func TestCodecErrorsAreCut(t *testing.T) {
	fail := func(string) (verbose, error) { return verbose{}, errors.New("\x1b[2J" + strings.Repeat("e", 1<<20)) }
	codec := wal.Codec[verbose]{Unmarshal: func([]byte) (verbose, error) { return fail("") }, Parse: fail}
	if err := wal.Register("test-verbose", codec); err != nil {
		t.Fatalf("Register = %v", err)
	}
	_, err := wal.Unmarshal("test-verbose", []byte{1})
	want := "wal: corrupt message ID: test-verbose: " + strconv.Quote("\x1b[2J"+strings.Repeat("e", 119)) + "… (1048580 bytes)"
	if !errors.Is(err, wal.ErrCorruptID) || err.Error() != want {
		t.Errorf("Unmarshal = %.300v, want %s", err, want)
	}
}

type concID struct{ seqID }

func (concID) WALName() wal.Name { return "test-concurrent" }

// racedOnce keeps TestRegisterConcurrentlyWithLookups to one run per
// process (go test -count): the registry is process-wide, and once the
// name is won no later run can win it.
var racedOnce atomic.Bool

func TestRegisterConcurrentlyWithLookups(t *testing.T) {
	if racedOnce.Swap(true) {
		t.Skip("the name was won by an earlier run in this process")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			// Only one of the eight may win the name.
			errs <- wal.Register("test-concurrent", wal.Codec[concID]{
				Unmarshal: func([]byte) (concID, error) { return concID{}, nil },
				Parse:     func(string) (concID, error) { return concID{}, nil },
			})
		})
		wg.Go(func() {
			for range 100 {
				if err := wal.Check(wal.Kafka, wal.KafkaID(1)); err != nil {
					t.Errorf("Check during Register = %v", err)
				}
				_ = wal.Names()
			}
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, wal.ErrInvalidCodec):
			t.Errorf("Register = %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent registrations of one name succeeded, want 1", won)
	}
}

func TestNameOf(t *testing.T) {
	tests := []struct {
		id   wal.MessageID
		want wal.Name
	}{
		{wal.KafkaID(1), wal.Kafka},
		{wal.RocksMQID(1), wal.RocksMQ},
		{wal.PulsarID{}, wal.Pulsar},
		{wal.WoodpeckerID{}, wal.Woodpecker},
	}
	for _, tt := range tests {
		if got, err := wal.NameOf(tt.id); err != nil || got != tt.want {
			t.Errorf("NameOf(%#v) = (%q, %v), want %q", tt.id, got, err, tt.want)
		}
	}
	for _, bad := range []wal.MessageID{nil, (*wal.KafkaID)(nil), new(wal.KafkaID), foreignID{}} {
		if got, err := wal.NameOf(bad); !errors.Is(err, wal.ErrWALMismatch) || got != "" {
			t.Errorf("NameOf(%T) = (%q, %v), want ErrWALMismatch", bad, got, err)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		wal  wal.Name
		text string
		want wal.MessageID
	}{
		{wal.Kafka, "kafka:123", wal.KafkaID(123)},
		{wal.Kafka, "123", wal.KafkaID(123)},
		{wal.Kafka, "kafka:-3", wal.KafkaID(-3)},
		{wal.RocksMQ, "rocksmq:9223372036854775807", wal.RocksMQID(math64)},
		{wal.Pulsar, "pulsar:1:2:3", wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3}},
		{wal.Pulsar, "pulsar:1:2:-1@4", wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: -1, Partition: 4}},
		{wal.Pulsar, "7:0:0@0", wal.PulsarID{LedgerID: 7}},
		{wal.Woodpecker, "woodpecker:5:6", wal.WoodpeckerID{SegmentID: 5, EntryID: 6}},
	}
	for _, tt := range tests {
		got, err := wal.Parse(tt.wal, tt.text)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q, %q) = (%#v, %v), want %#v", tt.wal, tt.text, got, err, tt.want)
		}
	}
	bad := []struct {
		wal  wal.Name
		text string
		want error
	}{
		{wal.Kafka, "", wal.ErrSyntax},
		{wal.Kafka, "kafka:", wal.ErrSyntax},
		{wal.Kafka, "kafka:12x", wal.ErrSyntax},
		{wal.Kafka, " 12", wal.ErrSyntax},
		{wal.Kafka, "kafka:99999999999999999999", wal.ErrSyntax},
		{wal.Kafka, "pulsar:1:2:3", wal.ErrWALMismatch},
		{wal.Pulsar, "pulsar:1:2", wal.ErrSyntax},
		{wal.Pulsar, "pulsar:1:2:3:4", wal.ErrSyntax},
		{wal.Pulsar, "pulsar:1:2:3@", wal.ErrSyntax},
		{wal.Pulsar, "pulsar:1:2:2147483648", wal.ErrSyntax},
		{wal.Woodpecker, "woodpecker:1", wal.ErrSyntax},
		{"nats", "nats:1", wal.ErrUnknownWAL},
		{"", "1", wal.ErrUnknownWAL},
	}
	for _, tt := range bad {
		if got, err := wal.Parse(tt.wal, tt.text); !errors.Is(err, tt.want) || got != nil {
			t.Errorf("Parse(%q, %q) = (%v, %v), want %v", tt.wal, tt.text, got, err, tt.want)
		}
	}
	if got, err := wal.ParseAny("woodpecker:1:2"); err != nil || got != (wal.WoodpeckerID{SegmentID: 1, EntryID: 2}) {
		t.Errorf("ParseAny = (%v, %v)", got, err)
	}
	if _, err := wal.ParseAny("42"); !errors.Is(err, wal.ErrSyntax) {
		t.Errorf("ParseAny(no WAL) = %v, want ErrSyntax", err)
	}
	if _, err := wal.ParseAny("nats:42"); !errors.Is(err, wal.ErrUnknownWAL) {
		t.Errorf("ParseAny(unknown WAL) = %v, want ErrUnknownWAL", err)
	}
}

const math64 = 1<<63 - 1

// FuzzParseString checks that every ID's String parses back to the same ID,
// every field included, and that text Parse accepts prints as a fixed
// point: Parse(String(Parse(s))) == Parse(s).
func FuzzParseString(f *testing.F) {
	f.Add(int64(0), int64(0), int32(0), int32(0), "kafka:1")
	f.Add(int64(-1), int64(1<<62), int32(-7), int32(3), "pulsar:1:2:3@4")
	f.Add(int64(math64), int64(-math64-1), int32(1<<31-1), int32(-1<<31), "woodpecker:-1:-2")
	f.Fuzz(func(t *testing.T, a, b int64, c, d int32, text string) {
		for _, id := range []wal.MessageID{
			wal.KafkaID(a), wal.RocksMQID(b),
			wal.PulsarID{LedgerID: a, EntryID: b, BatchIndex: c, Partition: d},
			wal.WoodpeckerID{SegmentID: a, EntryID: b},
		} {
			got, err := wal.Parse(id.WALName(), id.String())
			if err != nil || got != id {
				t.Fatalf("Parse(%q) = (%#v, %v), want %#v", id.String(), got, err, id)
			}
		}
		for _, name := range []wal.Name{wal.Kafka, wal.RocksMQ, wal.Pulsar, wal.Woodpecker} {
			id, err := wal.Parse(name, text)
			if err != nil {
				if id != nil {
					t.Fatalf("Parse(%q, %q) = (%v, %v): an ID with an error", name, text, id, err)
				}
				continue
			}
			again, err := wal.Parse(name, id.String())
			if err != nil || again != id {
				t.Fatalf("Parse(%q, %q) = %#v prints %q, which parses to (%#v, %v)", name, text, id, id, again, err)
			}
		}
	})
}

// loudID is a WAL whose methods and codec panic with a megabyte of
// escape sequences.
type loudID int64

var loudPanic = "\x1b[2J" + strings.Repeat("\x1b", 1<<20)

func (loudID) WALName() wal.Name       { return "test-loud" }
func (loudID) LT(wal.MessageID) bool   { panic(loudPanic) }
func (loudID) LTE(wal.MessageID) bool  { panic(loudPanic) }
func (loudID) EQ(wal.MessageID) bool   { panic(loudPanic) }
func (loudID) Marshal() []byte         { panic(loudPanic) }
func (a loudID) String() string        { return "test-loud:" + strconv.FormatInt(int64(a), 10) }
func loudCodec([]byte) (loudID, error) { panic(loudPanic) }
func loudParse(string) (loudID, error) { panic(loudPanic) }

// What a third party panics with, and text given to Parse, reach errors
// cut and quoted: each was a megabyte, escape sequences included.
func TestThirdPartyTextInErrorsIsCut(t *testing.T) {
	if err := wal.Register("test-loud", wal.Codec[loudID]{Unmarshal: loudCodec, Parse: loudParse}); err != nil {
		t.Fatalf("Register = %v", err)
	}
	megabyte := strings.Repeat("9", 1<<20)
	_, unmarshal := wal.Unmarshal("test-loud", []byte{1})
	_, marshal := wal.Marshal(loudID(1))
	_, compare := wal.Compare(loudID(1), loudID(2))
	_, parsePanic := wal.Parse("test-loud", "1")
	_, parseKafka := wal.Parse(wal.Kafka, "kafka:"+megabyte)
	_, parsePulsar := wal.Parse(wal.Pulsar, "pulsar:1:"+megabyte+":0")
	_, parseAny := wal.ParseAny(megabyte)
	_, unknown := wal.Parse(wal.Name(megabyte), "1")
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"Unmarshal", unmarshal, wal.ErrCorruptID},
		{"Marshal", marshal, wal.ErrCorruptID},
		{"Compare", compare, wal.ErrCorruptID},
		{"Parse that panics", parsePanic, wal.ErrSyntax},
		{"Parse of a megabyte of kafka", parseKafka, wal.ErrSyntax},
		{"Parse of a megabyte of pulsar", parsePulsar, wal.ErrSyntax},
		{"ParseAny of a megabyte", parseAny, wal.ErrSyntax},
		{"Parse of an unknown WAL named by a megabyte", unknown, wal.ErrUnknownWAL},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s = %.200v, want %v", c.name, c.err, c.want)
			continue
		}
		if text := c.err.Error(); len(text) > 1200 || strings.ContainsRune(text, '\x1b') || !strings.Contains(text, " bytes)") {
			t.Errorf("%s: an error of %d bytes, cut: %t, raw escapes: %t", c.name, len(text), strings.Contains(text, " bytes)"), strings.ContainsRune(text, '\x1b'))
		}
	}
	if got, want := parseKafka.Error(), `wal: malformed message ID text: "kafka:`+megabyte[:120]+`"… (1048582 bytes) as a kafka ID: value out of range`; got != want {
		t.Errorf("Parse of a megabyte of kafka = %.300s, want %.300s", got, want)
	}
}
