package cli

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt keeps two meta pages, pages 0 and 1, and writes each commit's to
// the page of its transaction ID's parity. A file whose newest meta page
// is damaged opens as of the commit before, with no error: after a crash
// that tore the last commit's write, that commit was never acknowledged;
// damaged later, it was, and its saves are gone from what the file says.
// Neither bbolt nor a read of the records tells, so verify reads the two
// pages itself.
//
// The layout, bbolt's on-disk format: a page header of 16 bytes, then
// the meta: magic, version, page size and flags (4 bytes each), the root
// bucket (16), the freelist, high-water and transaction IDs (8 each), and
// an FNV-64a checksum of all of it before the checksum.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	boltPageHeader = 16
	boltMetaSummed = 56 // the meta's bytes before its checksum
)

// boltMeta is one meta page as read from the file.
type boltMeta struct {
	pageSize uint32
	txid     uint64
	valid    bool
}

func readBoltMeta(f io.ReaderAt, offset int64) boltMeta {
	buf := make([]byte, boltMetaSummed+8)
	if _, err := f.ReadAt(buf, offset+boltPageHeader); err != nil {
		return boltMeta{}
	}
	le := binary.NativeEndian // bbolt writes its pages in the machine's order
	h := fnv.New64a()
	h.Write(buf[:boltMetaSummed])
	return boltMeta{
		pageSize: le.Uint32(buf[8:]),
		txid:     le.Uint64(buf[48:]),
		valid: le.Uint32(buf[0:]) == boltMagic && le.Uint32(buf[4:]) == boltVersion &&
			le.Uint64(buf[boltMetaSummed:]) == h.Sum64(),
	}
}

// damagedMeta says which meta page of the bbolt file at path is damaged
// while the other is whole, and which commit each holds, as far as the
// damaged one can still be read: "" when both are whole. Both damaged,
// bbolt refuses the file, and says so.
func damagedMeta(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	metas := [2]boltMeta{readBoltMeta(f, 0)}
	if metas[0].valid {
		metas[1] = readBoltMeta(f, int64(metas[0].pageSize))
	} else {
		// The page size is the first page's to say: try the usual ones.
		for _, size := range []int64{int64(os.Getpagesize()), 4096, 16384, 65536} {
			if m := readBoltMeta(f, size); m.valid && int64(m.pageSize) == size {
				metas[1] = m
				break
			}
		}
	}
	if metas[0].valid == metas[1].valid {
		return "", nil
	}
	bad := 0
	if metas[0].valid {
		bad = 1
	}
	good := metas[1-bad]
	switch metas[bad].txid {
	case good.txid + 1:
		return fmt.Sprintf("meta page %d is damaged; it held commit %d, newer than commit %d, which the file reads as",
			bad, metas[bad].txid, good.txid), nil
	case good.txid - 1:
		return fmt.Sprintf("meta page %d is damaged; it held commit %d, older than commit %d, which the file reads as",
			bad, metas[bad].txid, good.txid), nil
	}
	return fmt.Sprintf("meta page %d is damaged, and which commit it held cannot be read; the file reads as commit %d",
		bad, good.txid), nil
}
