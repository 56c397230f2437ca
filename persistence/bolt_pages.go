package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
)

// bbolt's on-disk format, version 2 (go.etcd.io/bbolt/internal/common):
// the layouts checkPages reads.
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	pageHeaderSize     = 16 // id uint64, flags uint16, count uint16, overflow uint32
	pageElementSize    = 16 // leaf: flags, pos, ksize, vsize; branch: pos, ksize, pgid
	bucketHeaderSize   = 16 // root pgid, sequence
	metaChecksumOffset = 56 // the checksum covers the meta's bytes before it
	branchPageFlag     = 0x01
	leafPageFlag       = 0x02
	bucketLeafFlag     = 0x01
)

// errPages is the cause of every checkPages failure.
var errPages = errors.New("page structure")

// checkPages walks every page reachable from the newest valid meta page of
// the file's bytes and checks what bbolt trusts without a check: that each
// page lies inside the file and below the high-water mark, is reached once
// (no cycle), says it is the page it is, and holds its elements, keys and
// values inside itself. bbolt reads through such damage wherever it
// meets it: a key or value past the mapped file faults, and a cycle of
// branch pages grows a cursor's stack until memory runs out. Under guard
// a fault becomes an error, but not on the goroutine bbolt's consistency
// check runs on, and running out of memory ends the process anywhere; so
// OpenBolt checks the structure first, with no pointer into the file.
func checkPages(data []byte) error {
	meta, err := newestMeta(data)
	if err != nil {
		return err
	}
	w := pageWalk{data: data, pageSize: uint64(meta.pageSize), highWater: meta.pgid, seen: make(map[uint64]bool)}
	if w.highWater > uint64(len(data))/w.pageSize {
		return fmt.Errorf("%w: the file has %d bytes, short of its %d pages", errPages, len(data), w.highWater)
	}
	return w.tree(meta.root)
}

type boltMeta struct {
	pageSize uint32
	root     uint64
	pgid     uint64
	txid     uint64
}

// newestMeta is the valid meta page with the higher transaction id, as
// bbolt picks it.
func newestMeta(data []byte) (boltMeta, error) {
	var best boltMeta
	found := false
	for _, off := range []int{0, -1} {
		m, ok := readMeta(data, off)
		if ok && (!found || m.txid > best.txid) {
			best, found = m, true
		}
	}
	if !found {
		return best, fmt.Errorf("%w: no valid meta page", errPages)
	}
	return best, nil
}

// readMeta reads the meta page at offset off, or (-1) the second one,
// which lies one page size (the first meta's) further.
func readMeta(data []byte, off int) (boltMeta, bool) {
	if off < 0 {
		first, ok := metaAt(data, 0)
		if !ok && len(data) >= pageHeaderSize+12 {
			// The first meta is damaged: its page size may still be read.
			first.pageSize = binary.LittleEndian.Uint32(data[pageHeaderSize+8:])
		}
		if first.pageSize == 0 || first.pageSize > 1<<20 {
			return boltMeta{}, false
		}
		return metaAt(data, int(first.pageSize))
	}
	return metaAt(data, off)
}

func metaAt(data []byte, off int) (boltMeta, bool) {
	if off+pageHeaderSize+metaChecksumOffset+8 > len(data) {
		return boltMeta{}, false
	}
	b := data[off+pageHeaderSize:]
	le := binary.LittleEndian
	m := boltMeta{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	h := fnv.New64a()
	h.Write(b[:metaChecksumOffset])
	valid := le.Uint32(b) == boltMagic && le.Uint32(b[4:]) == boltVersion && le.Uint64(b[metaChecksumOffset:]) == h.Sum64() &&
		m.pageSize >= 512 && m.pageSize <= 1<<20
	return m, valid
}

type pageWalk struct {
	data      []byte
	pageSize  uint64
	highWater uint64
	seen      map[uint64]bool
}

// tree checks the pages of a tree rooted at page id.
func (w *pageWalk) tree(id uint64) error {
	if id < 2 || id >= w.highWater {
		return fmt.Errorf("%w: page %d is outside the data pages [2, %d)", errPages, id, w.highWater)
	}
	if w.seen[id] {
		return fmt.Errorf("%w: page %d is reached twice", errPages, id)
	}
	w.seen[id] = true
	off := id * w.pageSize
	header := w.data[off : off+pageHeaderSize]
	le := binary.LittleEndian
	if got := le.Uint64(header); got != id {
		return fmt.Errorf("%w: page %d says it is page %d", errPages, id, got)
	}
	overflow := uint64(le.Uint32(header[12:]))
	if id+overflow >= w.highWater {
		return fmt.Errorf("%w: page %d and its %d overflow pages run past the high-water mark %d", errPages, id, overflow, w.highWater)
	}
	page := w.data[off : off+(overflow+1)*w.pageSize]
	return w.page(id, page)
}

// page checks one page's elements, inside page (a whole page and its
// overflow, or an inline bucket's value), and the trees they lead to.
func (w *pageWalk) page(id uint64, page []byte) error {
	le := binary.LittleEndian
	flags, count := le.Uint16(page[8:]), int(le.Uint16(page[10:]))
	if flags != branchPageFlag && flags != leafPageFlag {
		return fmt.Errorf("%w: page %d has flags %#x, neither a branch nor a leaf", errPages, id, flags)
	}
	if pageHeaderSize+count*pageElementSize > len(page) {
		return fmt.Errorf("%w: page %d counts %d elements, more than it holds", errPages, id, count)
	}
	for i := range count {
		at := pageHeaderSize + i*pageElementSize
		elem := page[at : at+pageElementSize]
		if flags == branchPageFlag {
			pos, ksize := uint64(le.Uint32(elem)), uint64(le.Uint32(elem[4:]))
			if uint64(at)+pos+ksize > uint64(len(page)) {
				return fmt.Errorf("%w: page %d: key %d runs past the page", errPages, id, i)
			}
			if err := w.tree(le.Uint64(elem[8:])); err != nil {
				return err
			}
			continue
		}
		eflags, pos, ksize, vsize := le.Uint32(elem), uint64(le.Uint32(elem[4:])), uint64(le.Uint32(elem[8:])), uint64(le.Uint32(elem[12:]))
		end := uint64(at) + pos + ksize + vsize
		if end > uint64(len(page)) {
			return fmt.Errorf("%w: page %d: record %d runs past the page", errPages, id, i)
		}
		if eflags&bucketLeafFlag == 0 {
			continue
		}
		value := page[uint64(at)+pos+ksize : end]
		if len(value) < bucketHeaderSize {
			return fmt.Errorf("%w: page %d: bucket %d has a %d-byte header", errPages, id, i, len(value))
		}
		if root := le.Uint64(value); root != 0 {
			if err := w.tree(root); err != nil {
				return err
			}
			continue
		}
		inline := value[bucketHeaderSize:]
		if len(inline) < pageHeaderSize {
			return fmt.Errorf("%w: page %d: inline bucket %d is shorter than a page header", errPages, id, i)
		}
		if err := w.page(id, inline); err != nil {
			return err
		}
	}
	return nil
}
