package persistence_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
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
			b, err := persistence.EncodeRecord(r)
			if err != nil {
				t.Fatalf("EncodeRecord: %v", err)
			}
			got, err := persistence.DecodeRecord(b)
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if got != r {
				t.Fatalf("DecodeRecord = %+v, want %+v", got, r)
			}
		})
	}
}

// TestRecordGolden pins the version 1 layout: a change here breaks every
// record already on disk.
func TestRecordGolden(t *testing.T) {
	const golden = "01" + "0000000000000007" + "05" + "6b61666b61" + "0008" + "0000000000000005" + "150a9922"
	b, err := persistence.EncodeRecord(persistence.Record{Checkpoint: wal.KafkaID(5), Term: 7})
	if err != nil {
		t.Fatalf("EncodeRecord: %v", err)
	}
	if got := hex.EncodeToString(b); got != golden {
		t.Fatalf("EncodeRecord = %s, want %s", got, golden)
	}
}

func TestEncodeRecordRejectsBadCheckpoint(t *testing.T) {
	for _, cp := range []wal.MessageID{nil, otherID{}, (*wal.KafkaID)(nil), new(wal.PulsarID)} {
		_, err := persistence.EncodeRecord(persistence.Record{Checkpoint: cp})
		if !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Errorf("EncodeRecord(%T) = %v, want ErrInvalidArgument", cp, err)
		}
	}
}

func TestDecodeRecordRejectsEveryByteFlip(t *testing.T) {
	for _, r := range validRecords() {
		valid, err := persistence.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		for i := range valid {
			for x := 1; x <= 0xff; x++ {
				b := bytes.Clone(valid)
				b[i] ^= byte(x)
				if _, err := persistence.DecodeRecord(b); !errors.Is(err, persistence.ErrCorruptRecord) {
					t.Fatalf("%s: byte %d xor %#x: DecodeRecord = %v, want ErrCorruptRecord", r.Checkpoint, i, x, err)
				}
			}
		}
	}
}

func TestDecodeRecordRejectsTruncationAndExtension(t *testing.T) {
	for _, r := range validRecords() {
		valid, err := persistence.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		for n := range len(valid) {
			if _, err := persistence.DecodeRecord(valid[:n]); !errors.Is(err, persistence.ErrCorruptRecord) {
				t.Fatalf("%s: first %d bytes: DecodeRecord = %v, want ErrCorruptRecord", r.Checkpoint, n, err)
			}
			if _, err := persistence.DecodeRecord(valid[n:]); n > 0 && !errors.Is(err, persistence.ErrCorruptRecord) {
				t.Fatalf("%s: without first %d bytes: DecodeRecord = %v, want ErrCorruptRecord", r.Checkpoint, n, err)
			}
		}
		if _, err := persistence.DecodeRecord(append(bytes.Clone(valid), 0)); !errors.Is(err, persistence.ErrCorruptRecord) {
			t.Fatalf("%s: trailing byte: DecodeRecord = %v, want ErrCorruptRecord", r.Checkpoint, err)
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := persistence.DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, persistence.ErrCorruptRecord) {
				t.Fatalf("DecodeRecord(%x) = %v, want ErrCorruptRecord", b, err)
			}
			return
		}
		// The encoding is canonical: anything accepted is what EncodeRecord
		// writes for the decoded value.
		again, err := persistence.EncodeRecord(r)
		if err != nil {
			t.Fatalf("EncodeRecord(DecodeRecord(%x)): %v", b, err)
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
