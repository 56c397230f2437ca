package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/lowwater/lowwater/wal"
)

// Record is what a catalog stores for one pchannel. It describes itself, so
// that a record read back by another version, or by a process configured for
// another WAL, is recognised rather than misread.
type Record struct {
	// Checkpoint is the stored consume checkpoint.
	Checkpoint wal.MessageID
	// Term is the owner term of the writer when fencing is on, else zero.
	Term uint64
}

// recordVersion 1 layout, big-endian:
//
//	version   u8   = 1
//	term      u64
//	walLen    u8   , wal name bytes
//	idLen     u16  , ID bytes (wal.MessageID.Marshal)
//	crc32c    u32  over everything before it
const recordVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeRecord returns the versioned, checksummed bytes of r.
func EncodeRecord(r Record) ([]byte, error) {
	if r.Checkpoint == nil {
		return nil, fmt.Errorf("%w: nil checkpoint", ErrInvalidArgument)
	}
	name, err := walOf(r.Checkpoint)
	if err != nil {
		return nil, err
	}
	id := r.Checkpoint.Marshal()
	b := make([]byte, 0, 1+8+1+len(name)+2+len(id)+4)
	b = append(b, recordVersion)
	b = binary.BigEndian.AppendUint64(b, r.Term)
	b = append(b, byte(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(id)))
	b = append(b, id...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

var errShort = errors.New("record truncated")

// DecodeRecord parses bytes written by EncodeRecord. Every failure wraps
// ErrCorruptRecord; it never panics, whatever the input.
func DecodeRecord(b []byte) (Record, error) {
	r, err := decodeRecord(b)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	return r, nil
}

func decodeRecord(b []byte) (Record, error) {
	if len(b) < 1+8+1+2+4 {
		return Record{}, errShort
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return Record{}, errors.New("checksum mismatch")
	}
	if body[0] != recordVersion {
		return Record{}, fmt.Errorf("unknown record version %d", body[0])
	}
	term := binary.BigEndian.Uint64(body[1:9])
	rest := body[9:]
	nameLen := int(rest[0])
	rest = rest[1:]
	if len(rest) < nameLen+2 {
		return Record{}, errShort
	}
	name := string(rest[:nameLen])
	rest = rest[nameLen:]
	idLen := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != idLen {
		return Record{}, fmt.Errorf("ID length %d, %d bytes left", idLen, len(rest))
	}
	id, err := wal.Unmarshal(name, rest)
	if err != nil {
		return Record{}, err
	}
	return Record{Checkpoint: id, Term: term}, nil
}
