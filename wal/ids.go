package wal

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// KafkaID is a Kafka partition offset. A negative one is no checkpoint:
// Kafka clients' -1 (the end) and -2 (the start) are sentinels, not
// positions, and -1 ordered as a number is below every offset, so a
// vchannel held at it would hold the minimum there, and a consumer seeking
// to the stored -1 would skip to the end. Check refuses them (ErrSentinel),
// so no pchannel takes one; they still encode and decode, so that a record
// someone stored reads back and can be named. Give real offsets: 0 for a
// partition's start.
//
// As in Kafka's own offset commits, a vchannel reports the offset of the
// next record to read, the last one processed plus one: the checkpoint
// recovered is where consumption starts again.
type KafkaID int64

// RocksMQID is a RocksMQ message offset.
type RocksMQID int64

// PulsarID is a Pulsar message position. The partition is carried so that a
// consumer can seek with it, but it is not part of the order: one pchannel is
// one partition, and Pulsar orders a partition by (ledger, entry, batch).
type PulsarID struct {
	LedgerID   int64
	EntryID    int64
	BatchIndex int32
	Partition  int32
}

// WoodpeckerID is a Woodpecker log position: a segment and an entry in it.
type WoodpeckerID struct {
	SegmentID int64
	EntryID   int64
}

var (
	_ MessageID = KafkaID(0)
	_ MessageID = RocksMQID(0)
	_ MessageID = PulsarID{}
	_ MessageID = WoodpeckerID{}
)

func (KafkaID) WALName() Name { return Kafka }
func (id KafkaID) LT(o MessageID) bool {
	v, ok := o.(KafkaID)
	return ok && id < v
}
func (id KafkaID) LTE(o MessageID) bool {
	v, ok := o.(KafkaID)
	return ok && id <= v
}
func (id KafkaID) EQ(o MessageID) bool {
	v, ok := o.(KafkaID)
	return ok && id == v
}
func (id KafkaID) Marshal() []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }
func (id KafkaID) String() string  { return "kafka:" + strconv.FormatInt(int64(id), 10) }

func (RocksMQID) WALName() Name { return RocksMQ }
func (id RocksMQID) LT(o MessageID) bool {
	v, ok := o.(RocksMQID)
	return ok && id < v
}
func (id RocksMQID) LTE(o MessageID) bool {
	v, ok := o.(RocksMQID)
	return ok && id <= v
}
func (id RocksMQID) EQ(o MessageID) bool {
	v, ok := o.(RocksMQID)
	return ok && id == v
}
func (id RocksMQID) Marshal() []byte { return binary.BigEndian.AppendUint64(nil, uint64(id)) }
func (id RocksMQID) String() string  { return "rocksmq:" + strconv.FormatInt(int64(id), 10) }

func (PulsarID) WALName() Name { return Pulsar }

// cmp orders by (ledger, entry, batch index); the partition is ignored.
func (id PulsarID) cmp(v PulsarID) int {
	switch {
	case id.LedgerID != v.LedgerID:
		return cmpInt(id.LedgerID, v.LedgerID)
	case id.EntryID != v.EntryID:
		return cmpInt(id.EntryID, v.EntryID)
	default:
		return cmpInt(int64(id.BatchIndex), int64(v.BatchIndex))
	}
}
func (id PulsarID) LT(o MessageID) bool {
	v, ok := o.(PulsarID)
	return ok && id.cmp(v) < 0
}
func (id PulsarID) LTE(o MessageID) bool {
	v, ok := o.(PulsarID)
	return ok && id.cmp(v) <= 0
}
func (id PulsarID) EQ(o MessageID) bool {
	v, ok := o.(PulsarID)
	return ok && id.cmp(v) == 0
}
func (id PulsarID) Marshal() []byte {
	b := make([]byte, 0, pulsarSize)
	b = binary.BigEndian.AppendUint64(b, uint64(id.LedgerID))
	b = binary.BigEndian.AppendUint64(b, uint64(id.EntryID))
	b = binary.BigEndian.AppendUint32(b, uint32(id.BatchIndex))
	return binary.BigEndian.AppendUint32(b, uint32(id.Partition))
}

// String prints the partition after '@' even when it is zero, so that
// Parse gives back every field.
func (id PulsarID) String() string {
	return fmt.Sprintf("pulsar:%d:%d:%d@%d", id.LedgerID, id.EntryID, id.BatchIndex, id.Partition)
}

func (WoodpeckerID) WALName() Name { return Woodpecker }
func (id WoodpeckerID) cmp(v WoodpeckerID) int {
	if id.SegmentID != v.SegmentID {
		return cmpInt(id.SegmentID, v.SegmentID)
	}
	return cmpInt(id.EntryID, v.EntryID)
}
func (id WoodpeckerID) LT(o MessageID) bool {
	v, ok := o.(WoodpeckerID)
	return ok && id.cmp(v) < 0
}
func (id WoodpeckerID) LTE(o MessageID) bool {
	v, ok := o.(WoodpeckerID)
	return ok && id.cmp(v) <= 0
}
func (id WoodpeckerID) EQ(o MessageID) bool {
	v, ok := o.(WoodpeckerID)
	return ok && id.cmp(v) == 0
}
func (id WoodpeckerID) Marshal() []byte {
	b := make([]byte, 0, woodpeckerSize)
	b = binary.BigEndian.AppendUint64(b, uint64(id.SegmentID))
	return binary.BigEndian.AppendUint64(b, uint64(id.EntryID))
}
func (id WoodpeckerID) String() string {
	return fmt.Sprintf("woodpecker:%d:%d", id.SegmentID, id.EntryID)
}

const (
	offsetSize     = 8
	pulsarSize     = 24
	woodpeckerSize = 16
)

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	default:
		return 0
	}
}

func wantLen(wal Name, b []byte, n int) error {
	if len(b) != n {
		return fmt.Errorf("%w: %s ID is %d bytes, got %d", ErrCorruptID, wal, n, len(b))
	}
	return nil
}

func unmarshalKafka(b []byte) (KafkaID, error) {
	if err := wantLen(Kafka, b, offsetSize); err != nil {
		return 0, err
	}
	return KafkaID(binary.BigEndian.Uint64(b)), nil
}

func unmarshalRocksMQ(b []byte) (RocksMQID, error) {
	if err := wantLen(RocksMQ, b, offsetSize); err != nil {
		return 0, err
	}
	return RocksMQID(binary.BigEndian.Uint64(b)), nil
}

func unmarshalPulsar(b []byte) (PulsarID, error) {
	if err := wantLen(Pulsar, b, pulsarSize); err != nil {
		return PulsarID{}, err
	}
	return PulsarID{
		LedgerID:   int64(binary.BigEndian.Uint64(b[0:8])),
		EntryID:    int64(binary.BigEndian.Uint64(b[8:16])),
		BatchIndex: int32(binary.BigEndian.Uint32(b[16:20])),
		Partition:  int32(binary.BigEndian.Uint32(b[20:24])),
	}, nil
}

func unmarshalWoodpecker(b []byte) (WoodpeckerID, error) {
	if err := wantLen(Woodpecker, b, woodpeckerSize); err != nil {
		return WoodpeckerID{}, err
	}
	return WoodpeckerID{
		SegmentID: int64(binary.BigEndian.Uint64(b[0:8])),
		EntryID:   int64(binary.BigEndian.Uint64(b[8:16])),
	}, nil
}

// The parsers read what String prints after "name:"; see Parse.

func parseKafka(text string) (KafkaID, error) {
	v, err := parseInt(text, 64)
	return KafkaID(v), err
}

func parseRocksMQ(text string) (RocksMQID, error) {
	v, err := parseInt(text, 64)
	return RocksMQID(v), err
}

// parseInt is strconv.ParseInt in base 10 with strconv's reason alone
// (strconv.ErrSyntax, strconv.ErrRange): its error quotes the text whole,
// which Parse's error names already, cut.
func parseInt(text string, bits int) (int64, error) {
	v, err := strconv.ParseInt(text, 10, bits)
	if ne, ok := err.(*strconv.NumError); ok {
		err = ne.Err
	}
	return v, err
}

// parsePulsar reads "ledger:entry:batch", then "@partition" if present
// (partition 0 when not).
func parsePulsar(text string) (PulsarID, error) {
	pos, partition, hasPartition := strings.Cut(text, "@")
	f, err := fields(pos, 64, 64, 32)
	if err != nil {
		return PulsarID{}, fmt.Errorf("want ledger:entry:batch[@partition]: %w", err)
	}
	id := PulsarID{LedgerID: f[0], EntryID: f[1], BatchIndex: int32(f[2])}
	if hasPartition {
		p, err := parseInt(partition, 32)
		if err != nil {
			return PulsarID{}, fmt.Errorf("partition: %w", err)
		}
		id.Partition = int32(p)
	}
	return id, nil
}

func parseWoodpecker(text string) (WoodpeckerID, error) {
	f, err := fields(text, 64, 64)
	if err != nil {
		return WoodpeckerID{}, fmt.Errorf("want segment:entry: %w", err)
	}
	return WoodpeckerID{SegmentID: f[0], EntryID: f[1]}, nil
}

// fields reads colon-separated decimal integers, one per bit size given.
func fields(text string, bits ...int) ([]int64, error) {
	parts := strings.Split(text, ":")
	if len(parts) != len(bits) {
		return nil, fmt.Errorf("%d fields, want %d", len(parts), len(bits))
	}
	out := make([]int64, len(parts))
	for i, p := range parts {
		v, err := parseInt(p, bits[i])
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
