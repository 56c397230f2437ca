// Package recordtest gives tests stored records as another build of
// lowwater, or a damaged file, leaves them.
package recordtest

import (
	"encoding/binary"
	"hash/crc32"
)

// WithWAL is rec, a whole record as persistence.EncodeRecord lays it out,
// naming the WAL name instead, its checksum redone: a record as a build
// with that WAL wrote it.
func WithWAL(rec []byte, name string) []byte {
	body := rec[:len(rec)-4]
	nameLen := int(body[9])
	out := append([]byte{}, body[:9]...)
	out = append(out, byte(len(name)))
	out = append(out, name...)
	out = append(out, body[10+nameLen:]...) // the ID and the name check
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(out, crc32.MakeTable(crc32.Castagnoli)))
}
