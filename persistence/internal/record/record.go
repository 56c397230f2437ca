// Package record is the byte layout of a stored checkpoint record, shared by
// the catalogs under persistence/ and kept out of the public API: users
// reach records through a Catalog, operators through Inspect.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"unsafe"

	"github.com/lowwater/lowwater/wal"
)

// Version is the layout written today. Version 2, big-endian:
//
//	version   u8   = 2
//	term      u64
//	walLen    u8   , wal name bytes
//	idLen     u16  , ID bytes (wal.MessageID.Marshal)
//	nameSum   u32  crc32c of the pchannel's name
//	crc32c    u32  over everything before it
//
// The name is not stored (it is the key the record is stored under), but
// nameSum checks it: a record read under another name than its own (a
// damaged key, a record copied to another pchannel's key) is refused as
// another pchannel's, rather than giving one pchannel another's
// checkpoint. The last checksum is computed as version 1's, so that a
// build that knows only version 1 calls such a record of an unknown
// version, not damaged.
//
// Version 1, which Decode still reads, has no nameSum.
const Version = 2

// v1 is the layout before Version 2, read and never written.
const v1 = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrTruncated is the error of a record shorter than its layout says.
var ErrTruncated = errors.New("record truncated")

// MaxIDLen is the longest ID, in bytes, a record holds (idLen is a u16):
// wal.MaxIDLen, which every way an ID comes in checks.
const MaxIDLen = wal.MaxIDLen

// Encode returns the bytes of pchannel's record of an ID whose bytes are
// raw and whose WAL is walName, written by an owner of the given term
// (zero without fencing). The caller has checked the ID (wal.NameOf) and
// that raw is at most MaxIDLen bytes.
func Encode(pchannel string, walName wal.Name, raw []byte, term uint64) []byte {
	b := make([]byte, 0, 1+8+1+len(walName)+2+len(raw)+4+4)
	b = append(b, Version)
	b = binary.BigEndian.AppendUint64(b, term)
	b = append(b, byte(len(walName)))
	b = append(b, walName...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(raw)))
	b = append(b, raw...)
	b = binary.BigEndian.AppendUint32(b, nameSum(pchannel))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// nameSum checks the name a version 2 record is stored under. crc32 only
// reads its input, so it is given the string's own bytes: a copy escaped
// to the heap, twice on each save (its read and its write).
func nameSum(pchannel string) uint32 {
	return crc32.Checksum(unsafe.Slice(unsafe.StringData(pchannel), len(pchannel)), castagnoli)
}

// NamedFor reports whether b ends as a version 2 record written for
// pchannel does, read without its checksum: of a record that fails it,
// whether the damage lies in its own bytes, under its own key, or it may
// be another pchannel's (its key damaged, or where its key begins, so
// that key and record both read from the wrong bytes). A chance match is
// one in 2^32.
func NamedFor(pchannel string, b []byte) bool {
	return len(b) >= 8 && binary.BigEndian.Uint32(b[len(b)-8:]) == nameSum(pchannel)
}

// NameCheck is the name check of b, a whole version 2 record (its
// checksum holds): what tells the one name it was written for, as far as
// a check of 32 bits tells. ok is false for a record of version 1, which
// has none, and for one that is not whole, whose check may be damaged.
func NameCheck(b []byte) (check uint32, ok bool) {
	if _, err := decodeHeaderNamed(nil, b); err != nil || b[0] != Version {
		return 0, false
	}
	return binary.BigEndian.Uint32(b[len(b)-8:]), true
}

// Names reports whether check, a record's NameCheck, is that of a record
// written for the name name spells.
func Names(check uint32, name []byte) bool {
	return crc32.Checksum(name, castagnoli) == check
}

// ErrAnotherPChannel is the error of a whole record stored under another
// name than the one it was written for.
var ErrAnotherPChannel = errors.New("another pchannel's record: its key was damaged, or it was copied under this name")

// Header is what a record says about itself. A record whose checksum or
// version is wrong has no header worth reading.
type Header struct {
	Version int
	Term    uint64
	WAL     wal.Name
	// ID is the ID's bytes as stored.
	ID []byte
}

// Decode parses bytes written by Encode, as stored for pchannel. It never
// panics, whatever the input. The header is returned whenever it could be read, also when the ID
// could not be decoded (an unregistered WAL, bad ID bytes), so that a tool
// can say what the record is; ok tells whether it could.
func Decode(pchannel string, b []byte) (h Header, ok bool, id wal.MessageID, err error) {
	h, err = decodeHeader(pchannel, b)
	if err != nil {
		return Header{}, false, nil, err
	}
	id, err = wal.Unmarshal(h.WAL, h.ID)
	if err != nil {
		return h, true, nil, err
	}
	return h, true, id, nil
}

func decodeHeader(pchannel string, b []byte) (Header, error) {
	named := nameSum(pchannel)
	return decodeHeaderNamed(&named, b)
}

// DecodeMisplaced decodes b as Decode does, for a record stored under
// another name than its own (ErrAnotherPChannel): the name check aside,
// it is whole, and what it holds tells an operator whose it may be.
func DecodeMisplaced(b []byte) (h Header, ok bool, id wal.MessageID, err error) {
	h, err = decodeHeaderNamed(nil, b)
	if err != nil {
		return Header{}, false, nil, err
	}
	id, err = wal.Unmarshal(h.WAL, h.ID)
	return h, true, id, err
}

// decodeHeaderNamed decodes a record's header, checking that a version 2
// record was written for the name whose nameSum is named (nil: for any).
func decodeHeaderNamed(named *uint32, b []byte) (Header, error) {
	if len(b) < 1+8+1+2+4 {
		return Header{}, ErrTruncated
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return Header{}, errors.New("checksum mismatch")
	}
	switch body[0] {
	case v1:
	case Version:
		if len(body) < 1+8+1+2+4 {
			return Header{}, ErrTruncated
		}
		var sum uint32
		body, sum = body[:len(body)-4], binary.BigEndian.Uint32(body[len(body)-4:])
		if named != nil && sum != *named {
			return Header{}, ErrAnotherPChannel
		}
	default:
		return Header{}, fmt.Errorf("unknown record version %d", body[0])
	}
	h := Header{Version: int(body[0]), Term: binary.BigEndian.Uint64(body[1:9])}
	rest := body[9:]
	nameLen := int(rest[0])
	rest = rest[1:]
	if len(rest) < nameLen+2 {
		return Header{}, ErrTruncated
	}
	h.WAL = walName(rest[:nameLen])
	rest = rest[nameLen:]
	idLen := int(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if len(rest) != idLen {
		return Header{}, fmt.Errorf("ID length %d, %d bytes left", idLen, len(rest))
	}
	h.ID = rest
	return h, nil
}

// walName is the name b spells. The WALs built in are returned as the
// constants they are, without a copy: every save reads the stored record
// first, and the copy was an allocation of each.
func walName(b []byte) wal.Name {
	switch string(b) {
	case string(wal.Kafka):
		return wal.Kafka
	case string(wal.Pulsar):
		return wal.Pulsar
	case string(wal.RocksMQ):
		return wal.RocksMQ
	case string(wal.Woodpecker):
		return wal.Woodpecker
	}
	return wal.Name(b)
}
