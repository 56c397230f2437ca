package wal_test

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/lowwater/lowwater/wal"
)

// LSN is a PostgreSQL log sequence number, a position in the write-ahead
// log of a logical replication slot. It is a 64-bit value, written as two
// hexadecimal halves: 16/B374D848.
type LSN uint64

func (LSN) WALName() wal.Name { return "pglsn" }

func (l LSN) LT(o wal.MessageID) bool {
	v, ok := o.(LSN)
	return ok && l < v
}

func (l LSN) LTE(o wal.MessageID) bool {
	v, ok := o.(LSN)
	return ok && l <= v
}

func (l LSN) EQ(o wal.MessageID) bool {
	v, ok := o.(LSN)
	return ok && l == v
}

func (l LSN) Marshal() []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(l))
}

func (l LSN) String() string {
	return fmt.Sprintf("pglsn:%X/%X", uint32(l>>32), uint32(l))
}

// lsnCodec reads what Marshal and String write: Unmarshal must give back
// the position that Marshal was given, or the ID is refused.
var lsnCodec = wal.Codec[LSN]{
	Unmarshal: func(b []byte) (LSN, error) {
		if len(b) != 8 {
			return 0, fmt.Errorf("LSN is 8 bytes, got %d", len(b))
		}
		return LSN(binary.BigEndian.Uint64(b)), nil
	},
	Parse: func(text string) (LSN, error) {
		hi, lo, ok := strings.Cut(text, "/")
		if !ok {
			return 0, fmt.Errorf("want XXX/XXX")
		}
		h, err := strconv.ParseUint(hi, 16, 32)
		if err != nil {
			return 0, err
		}
		l, err := strconv.ParseUint(lo, 16, 32)
		if err != nil {
			return 0, err
		}
		return LSN(h<<32 | l), nil
	},
}

// Register the WAL at program start, before any actor or catalog meets it.
func init() {
	if err := wal.Register("pglsn", lsnCodec); err != nil {
		panic(err)
	}
}
