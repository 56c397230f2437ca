package persistence_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

func validRecords() []persistence.Record {
	return []persistence.Record{
		{Checkpoint: wal.KafkaID(5), Term: 0},
		{Checkpoint: wal.KafkaID(-1), Term: 7},
		{Checkpoint: wal.RocksMQID(1 << 40), Term: 1},
		{Checkpoint: wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 4}, Term: 42},
		{Checkpoint: wal.WoodpeckerID{SegmentID: 9, EntryID: 10}, Term: math.MaxUint64},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range validRecords() {
		t.Run(r.Checkpoint.String(), func(t *testing.T) {
			b, err := persistence.EncodeRecord("p", r)
			if err != nil {
				t.Fatalf("EncodeRecord: %v", err)
			}
			got, err := persistence.DecodeRecord("p", b)
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if got != r {
				t.Fatalf("DecodeRecord = %+v, want %+v", got, r)
			}
		})
	}
}

// TestRecordGolden pins the version 2 layout, which checks the pchannel's
// name (crc32c of "orders-dml-0" before the checksum), and the version 1
// layout before it, which every build still reads: a change here breaks
// every record already on disk.
func TestRecordGolden(t *testing.T) {
	const golden = "02" + "0000000000000007" + "05" + "6b61666b61" + "0008" + "0000000000000005" + "ff1ff471" + "592d86cc"
	b, err := persistence.EncodeRecord("orders-dml-0", persistence.Record{Checkpoint: wal.KafkaID(5), Term: 7})
	if err != nil {
		t.Fatalf("EncodeRecord: %v", err)
	}
	if got := hex.EncodeToString(b); got != golden {
		t.Fatalf("EncodeRecord = %s, want %s", got, golden)
	}
	// Version 1: the same record, its checksum over the bytes alone.
	v1, err := hex.DecodeString("01" + "0000000000000007" + "05" + "6b61666b61" + "0008" + "0000000000000005" + "150a9922")
	if err != nil {
		t.Fatal(err)
	}
	for _, pchannel := range []string{"orders-dml-0", "any other"} {
		if r, err := persistence.DecodeRecord(pchannel, v1); err != nil || r != (persistence.Record{Checkpoint: wal.KafkaID(5), Term: 7}) {
			t.Fatalf("DecodeRecord(%q, version 1) = (%+v, %v), want kafka:5, term 7", pchannel, r, err)
		}
	}
}

// A version 2 record read under another name than its own is refused as
// another pchannel's: a key damaged by one byte, or a record copied to
// another pchannel's key, never gives one pchannel another's checkpoint.
func TestDecodeRecordUnderAnotherName(t *testing.T) {
	b, err := persistence.EncodeRecord("orders-dml-0", persistence.Record{Checkpoint: wal.KafkaID(5)})
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"orders-dml-1", "orders-dml-", "", "orders-dml-0 "} {
		_, err := persistence.DecodeRecord(other, b)
		if !errors.Is(err, persistence.ErrCorruptRecord) ||
			err.Error() != "persistence: corrupt checkpoint record: another pchannel's record: its key was damaged, or it was copied under this name" {
			t.Fatalf("DecodeRecord(%q) = %v, want another pchannel's record", other, err)
		}
	}
}

// A bad checkpoint is refused, and the error names the pchannel (cut
// when long), as CheckSaveArgs's do.
func TestEncodeRecordRejectsBadCheckpoint(t *testing.T) {
	long := strings.Repeat("q", 1000)
	for _, cp := range []wal.MessageID{nil, otherID{}, (*wal.KafkaID)(nil), new(wal.PulsarID)} {
		_, err := persistence.EncodeRecord("orders-dml-0", persistence.Record{Checkpoint: cp})
		if !errors.Is(err, persistence.ErrInvalidArgument) || !strings.Contains(err.Error(), `"orders-dml-0"`) {
			t.Errorf("EncodeRecord(%T) = %v, want ErrInvalidArgument naming the pchannel", cp, err)
		}
		_, err = persistence.EncodeRecord(long, persistence.Record{Checkpoint: cp})
		if err == nil || len(err.Error()) > 300 {
			t.Errorf("EncodeRecord(%T) of a 1000-byte name: an error of %d bytes", cp, len(err.Error()))
		}
	}
}

func TestDecodeRecordRejectsEveryByteFlip(t *testing.T) {
	for _, r := range validRecords() {
		valid, err := persistence.EncodeRecord("p", r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range valid {
			for x := 1; x <= 0xff; x++ {
				b := bytes.Clone(valid)
				b[i] ^= byte(x)
				if _, err := persistence.DecodeRecord("p", b); !errors.Is(err, persistence.ErrCorruptRecord) {
					t.Fatalf("%s: byte %d xor %#x: DecodeRecord = %v, want ErrCorruptRecord", r.Checkpoint, i, x, err)
				}
			}
		}
	}
}

func TestDecodeRecordRejectsTruncationAndExtension(t *testing.T) {
	for _, r := range validRecords() {
		valid, err := persistence.EncodeRecord("p", r)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(valid) {
			if _, err := persistence.DecodeRecord("p", valid[:n]); !errors.Is(err, persistence.ErrCorruptRecord) {
				t.Fatalf("%s: first %d bytes: DecodeRecord = %v, want ErrCorruptRecord", r.Checkpoint, n, err)
			}
			if _, err := persistence.DecodeRecord("p", valid[n:]); n > 0 && !errors.Is(err, persistence.ErrCorruptRecord) {
				t.Fatalf("%s: without first %d bytes: DecodeRecord = %v, want ErrCorruptRecord", r.Checkpoint, n, err)
			}
		}
		if _, err := persistence.DecodeRecord("p", append(bytes.Clone(valid), 0)); !errors.Is(err, persistence.ErrCorruptRecord) {
			t.Fatalf("%s: trailing byte: DecodeRecord = %v, want ErrCorruptRecord", r.Checkpoint, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := persistence.DecodeRecord("p", b)
		// Inspect reads what DecodeRecord refuses, and never panics.
		if e := persistence.InspectRecord("p", b); (e.Err == nil) != (err == nil) || e.Err == nil && e.Checkpoint != r.Checkpoint {
			t.Fatalf("InspectRecord(%x) = %+v, DecodeRecord %v", b, e, err)
		}
		if err != nil {
			if !errors.Is(err, persistence.ErrCorruptRecord) {
				t.Fatalf("DecodeRecord(%x) = %v, want ErrCorruptRecord", b, err)
			}
			return
		}
		// The encoding is canonical: anything accepted is what EncodeRecord
		// writes for the decoded value, but for the version byte, the name
		// check and the checksum of a version 1 record.
		again, err := persistence.EncodeRecord("p", r)
		if err != nil {
			t.Fatalf("EncodeRecord(DecodeRecord(%x)): %v", b, err)
		}
		if b[0] == 1 {
			if !bytes.Equal(again[1:len(again)-8], b[1:len(b)-4]) {
				t.Fatalf("EncodeRecord(DecodeRecord(%x)) = %x, another body", b, again)
			}
			return
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("EncodeRecord(DecodeRecord(%x)) = %x", b, again)
		}
	})
}

// otherID is a message ID type this module has no codec for.
type otherID struct{}

func (otherID) WALName() wal.Name      { return "nats" }
func (otherID) LT(wal.MessageID) bool  { return false }
func (otherID) LTE(wal.MessageID) bool { return false }
func (otherID) EQ(wal.MessageID) bool  { return false }
func (otherID) Marshal() []byte        { return []byte{1} }
func (otherID) String() string         { return "nats:1" }
