package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
)

// bbolt's on-disk format, version 2 (go.etcd.io/bbolt/internal/common):
// the layouts checkPages reads.
const (
	boltMagic          = 0xED0CDAED
	boltVersion        = 2
	pageHeaderSize     = 16 // id uint64, flags uint16, count uint16, overflow uint32
	pageElementSize    = 16 // leaf: flags, pos, ksize, vsize; branch: pos, ksize, pgid
	bucketHeaderSize   = 16 // root pgid, sequence
	metaTxidOffset     = 48
	metaChecksumOffset = 56 // the checksum covers the meta's bytes before it
	branchPageFlag     = 0x01
	leafPageFlag       = 0x02
	metaPageFlag       = 0x04
	freelistPageFlag   = 0x10
	bucketLeafFlag     = 0x01
	// noFreelist is the freelist page ID of a file that keeps none
	// (bbolt's NoFreelistSync).
	noFreelist = ^uint64(0)
	// freelistCountOverflow in a freelist page's count says that the
	// count is the page's first uint64 instead.
	freelistCountOverflow = 0xFFFF
)

// The page sizes a file may have: bbolt takes any (Options.PageSize), as
// long as a meta page fits in one; the cap only keeps a damaged size from
// being believed.
const (
	minPageSize = pageHeaderSize + metaChecksumOffset + 8
	maxPageSize = 1 << 30
)

// errPages is the cause of every checkPages failure.
var errPages = errors.New("page structure")

// checkPages walks every page reachable from the newest valid meta page of
// the file's bytes and checks what bbolt trusts without a check: that each
// page lies inside the file and below the high-water mark, is reached once
// (no cycle), says it is the page it is, and holds its elements, keys and
// values inside itself; that the keys of each bucket are in order; and
// that the freelist page is one, inside the file, holding the page IDs it
// counts. bbolt reads through such damage wherever it meets it: a key or
// value past the mapped file faults, a cycle of branch pages grows a
// cursor's stack until memory runs out, a freelist's overflow count sets
// its consistency check counting to four billion, and keys out of order
// make a look-up miss a record that is there (Load saying nothing is
// stored) or find two under one name. Under guard a fault becomes an
// error, but not on the goroutine bbolt's consistency check runs on, and
// running out of memory ends the process anywhere; so OpenBolt checks the
// structure first, with no pointer into the file.
func checkPages(data []byte) error { return checkPagesUntil(data, nil) }

// stopEvery is how many pages a check walks between two asks of its stop:
// each of a mapped file's pages faults in on first reading, 1–2 µs.
const stopEvery = 32

// checkPagesUntil is checkPages, given up with stop's error as soon as
// stop gives one (it is asked every stopEvery pages): a Load's context,
// which a walk of 300,000 records outlasted by up to 100 ms.
func checkPagesUntil(data []byte, stop func() error) error {
	meta, err := newestMeta(data)
	if err != nil {
		return err
	}
	w := pageWalk{data: data, pageSize: uint64(meta.pageSize), highWater: meta.pgid, seen: make(map[uint64]bool), stop: stop}
	if w.highWater > uint64(len(data))/w.pageSize {
		return fmt.Errorf("%w: the file has %d bytes, short of its %d pages", errPages, len(data), w.highWater)
	}
	if err := w.tree(meta.root, &keyRange{}); err != nil {
		return err
	}
	return w.freelist(meta.freelist)
}

type boltMeta struct {
	at       int // the page's offset in the file; -1: none found
	pageSize uint32
	root     uint64
	freelist uint64
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
	switch {
	case !found && !anyMagic(data) && pagedSize(data) == 0:
		return best, fmt.Errorf("%w: %w: no page of it, at any page size, is bbolt's (a wrong path?)", errPages, ErrNotBolt)
	case !found && !anyMagic(data):
		return best, fmt.Errorf("%w: no meta page has bbolt's magic number: a bbolt file damaged from its start, or not one (a wrong path?)", errPages)
	case !found:
		return best, fmt.Errorf("%w: no valid meta page", errPages)
	}
	return best, nil
}

// anyMagic reports whether either meta page begins with bbolt's magic
// number. The second lies one page size further: the first meta's, if its
// page size field is readable, and 4096, the usual one, besides.
func anyMagic(data []byte) bool {
	hasMagic := func(off int) bool {
		return off+pageHeaderSize+4 <= len(data) && binary.LittleEndian.Uint32(data[off+pageHeaderSize:]) == boltMagic
	}
	if hasMagic(0) || hasMagic(4096) {
		return true
	}
	if len(data) < pageHeaderSize+12 {
		return false
	}
	size := binary.LittleEndian.Uint32(data[pageHeaderSize+8:])
	return size >= minPageSize && size <= maxPageSize && hasMagic(int(size))
}

// readMeta reads the meta page at offset off, or (-1) the second one,
// which lies one page size further: the first meta's page size, or, that
// one damaged beyond reading it (a page torn to zeros), the first size at
// which a whole meta page lies, as bbolt looks for it.
func readMeta(data []byte, off int) (boltMeta, bool) {
	if off >= 0 {
		return metaAt(data, off)
	}
	first, ok := metaAt(data, 0)
	if ok {
		return metaAt(data, int(first.pageSize))
	}
	// The first meta is damaged: its page size may still be read.
	if len(data) >= pageHeaderSize+12 {
		if size := binary.LittleEndian.Uint32(data[pageHeaderSize+8:]); size >= minPageSize && size <= maxPageSize {
			if m, ok := metaAt(data, int(size)); ok {
				return m, true
			}
		}
	}
	for size := 1024; size <= 1024<<14 && size < len(data)-1024; size <<= 1 {
		if m, ok := metaAt(data, size); ok && int(m.pageSize) == size {
			return m, true
		}
	}
	return boltMeta{at: -1}, false
}

// metaHeaderDamaged reports whether a meta page's header is not a meta
// page's own: one torn to zeros names page 0 and has no flags. bbolt's
// consistency check asserts both of each meta page, and fails on such a
// file, which bbolt itself opens as of the other page.
func metaHeaderDamaged(data []byte) bool {
	le := binary.LittleEndian
	header := func(off int, id uint64) bool {
		return off+pageHeaderSize <= len(data) && (le.Uint64(data[off:]) != id || le.Uint16(data[off+8:]) != metaPageFlag)
	}
	if header(0, 0) {
		return true
	}
	m, ok := readMeta(data, 0)
	if !ok {
		if m, ok = readMeta(data, -1); !ok {
			return false
		}
	}
	return header(int(m.pageSize), 1)
}

func metaAt(data []byte, off int) (boltMeta, bool) {
	if off+pageHeaderSize+metaChecksumOffset+8 > len(data) {
		return boltMeta{at: -1}, false
	}
	b := data[off+pageHeaderSize:]
	le := binary.LittleEndian
	m := boltMeta{at: off, pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[metaTxidOffset:])}
	h := fnv.New64a()
	h.Write(b[:metaChecksumOffset])
	valid := le.Uint32(b) == boltMagic && le.Uint32(b[4:]) == boltVersion && le.Uint64(b[metaChecksumOffset:]) == h.Sum64() &&
		m.pageSize >= minPageSize && m.pageSize <= maxPageSize
	return m, valid
}

type pageWalk struct {
	data      []byte
	pageSize  uint64
	highWater uint64
	seen      map[uint64]bool
	stop      func() error // nil: never stop
}

// keyRange is what the keys of one part of a bucket must keep to, walked
// in order: above the last key met (after), at or above the branch key
// that leads there (low), and below the next branch key (high).
type keyRange struct {
	low, high []byte // nil: unbounded
	last      []byte
	any       bool // a key was met: last is set
}

// key checks k, the next key of the bucket in order, and records it.
func (r *keyRange) key(id uint64, i int, k []byte) error {
	switch {
	case r.any && bytes.Compare(k, r.last) <= 0:
		return fmt.Errorf("%w: page %d: key %d (%q) is not above the key before it (%q)", errPages, id, i, k, r.last)
	case r.low != nil && bytes.Compare(k, r.low) < 0:
		return fmt.Errorf("%w: page %d: key %d (%q) is below its branch key (%q)", errPages, id, i, k, r.low)
	case r.high != nil && bytes.Compare(k, r.high) >= 0:
		return fmt.Errorf("%w: page %d: key %d (%q) is not below the next branch key (%q)", errPages, id, i, k, r.high)
	}
	r.last, r.any = k, true
	return nil
}

// tree checks the pages of a tree rooted at page id, whose keys keep to r.
func (w *pageWalk) tree(id uint64, r *keyRange) error {
	if id < 2 || id >= w.highWater {
		return fmt.Errorf("%w: page %d is outside the data pages [2, %d)", errPages, id, w.highWater)
	}
	if w.seen[id] {
		return fmt.Errorf("%w: page %d is reached twice", errPages, id)
	}
	w.seen[id] = true
	if w.stop != nil && len(w.seen)%stopEvery == 0 {
		if err := w.stop(); err != nil {
			return err
		}
	}
	page, err := w.pageAt(id)
	if err != nil {
		return err
	}
	return w.page(id, page, r)
}

// pageAt is page id with its overflow, once its header is checked.
func (w *pageWalk) pageAt(id uint64) ([]byte, error) {
	off := id * w.pageSize
	header := w.data[off : off+pageHeaderSize]
	le := binary.LittleEndian
	if got := le.Uint64(header); got != id {
		return nil, fmt.Errorf("%w: page %d says it is page %d", errPages, id, got)
	}
	overflow := uint64(le.Uint32(header[12:]))
	if id+overflow >= w.highWater {
		return nil, fmt.Errorf("%w: page %d and its %d overflow pages run past the high-water mark %d", errPages, id, overflow, w.highWater)
	}
	return w.data[off : off+(overflow+1)*w.pageSize], nil
}

// page checks one page's elements, inside page (a whole page and its
// overflow, or an inline bucket's value), the order of their keys (r),
// and the trees they lead to.
func (w *pageWalk) page(id uint64, page []byte, r *keyRange) (err error) {
	le := binary.LittleEndian
	flags, count := le.Uint16(page[8:]), int(le.Uint16(page[10:]))
	if flags != branchPageFlag && flags != leafPageFlag {
		return fmt.Errorf("%w: page %d has flags %#x, neither a branch nor a leaf", errPages, id, flags)
	}
	if pageHeaderSize+count*pageElementSize > len(page) {
		return fmt.Errorf("%w: page %d counts %d elements, more than it holds", errPages, id, count)
	}
	// used is where the page's last key or value ends. bbolt writes a
	// page whole, from a zeroed buffer, its elements' data packed after
	// their headers: a byte in use past that end is data the count no
	// longer reaches (a count damaged lower, whose records would be
	// missing with no error).
	used := uint64(pageHeaderSize + count*pageElementSize)
	defer func() {
		if err == nil {
			if i := slices.IndexFunc(page[used:], func(b byte) bool { return b != 0 }); i >= 0 {
				err = fmt.Errorf("%w: page %d has data past its last of %d elements: its element count is damaged", errPages, id, count)
			}
		}
	}()
	for i := range count {
		at := pageHeaderSize + i*pageElementSize
		elem := page[at : at+pageElementSize]
		if flags == branchPageFlag {
			if err := w.branch(id, page, i, r, count); err != nil {
				return err
			}
			used = max(used, uint64(at)+uint64(le.Uint32(elem))+uint64(le.Uint32(elem[4:])))
			continue
		}
		eflags, pos, ksize, vsize := le.Uint32(elem), uint64(le.Uint32(elem[4:])), uint64(le.Uint32(elem[8:])), uint64(le.Uint32(elem[12:]))
		end := uint64(at) + pos + ksize + vsize
		if end > uint64(len(page)) {
			return fmt.Errorf("%w: page %d: record %d runs past the page", errPages, id, i)
		}
		used = max(used, end)
		if err := r.key(id, i, page[uint64(at)+pos:uint64(at)+pos+ksize]); err != nil {
			return err
		}
		if eflags&bucketLeafFlag == 0 {
			continue
		}
		value := page[uint64(at)+pos+ksize : end]
		if len(value) < bucketHeaderSize {
			return fmt.Errorf("%w: page %d: bucket %d has a %d-byte header", errPages, id, i, len(value))
		}
		// A bucket's keys are a sequence of their own.
		if root := le.Uint64(value); root != 0 {
			if err := w.tree(root, &keyRange{}); err != nil {
				return err
			}
			continue
		}
		inline := value[bucketHeaderSize:]
		if len(inline) < pageHeaderSize {
			return fmt.Errorf("%w: page %d: inline bucket %d is shorter than a page header", errPages, id, i)
		}
		if err := w.page(id, inline, &keyRange{}); err != nil {
			return err
		}
	}
	return nil
}

// branch checks element i of branch page id and the tree it leads to,
// whose keys lie from its key up to the next element's (or r's high).
func (w *pageWalk) branch(id uint64, page []byte, i int, r *keyRange, count int) error {
	le := binary.LittleEndian
	keyOf := func(i int) ([]byte, error) {
		at := pageHeaderSize + i*pageElementSize
		elem := page[at : at+pageElementSize]
		pos, ksize := uint64(le.Uint32(elem)), uint64(le.Uint32(elem[4:]))
		if uint64(at)+pos+ksize > uint64(len(page)) {
			return nil, fmt.Errorf("%w: page %d: key %d runs past the page", errPages, id, i)
		}
		return page[uint64(at)+pos : uint64(at)+pos+ksize], nil
	}
	low, err := keyOf(i)
	if err != nil {
		return err
	}
	high := r.high
	if i+1 < count {
		if high, err = keyOf(i + 1); err != nil {
			return err
		}
		// bbolt searches a branch page's keys in halves: one out of order
		// (the first included, which bounds no key of its child) sends a
		// look-up to the wrong child, where it finds nothing.
		if bytes.Compare(low, high) >= 0 {
			return fmt.Errorf("%w: page %d: branch key %d (%q) is not below the one after it (%q)", errPages, id, i, low, high)
		}
	}
	// The first child may hold keys below its branch key: bbolt keeps
	// the key a page had when it was split, and a delete can move it.
	sub := keyRange{low: low, high: high, last: r.last, any: r.any}
	if i == 0 {
		sub.low = r.low
	}
	child := le.Uint64(page[pageHeaderSize+i*pageElementSize+8:])
	if err := w.tree(child, &sub); err != nil {
		return err
	}
	r.last, r.any = sub.last, sub.any
	return nil
}

// freelist checks the freelist page id that the meta names, which bbolt
// reads, and walks page by page up to its overflow count, before it reads
// any bucket: that it is a freelist page of its own inside the file, and
// that the page IDs it counts fit in it and are data pages.
func (w *pageWalk) freelist(id uint64) error {
	if id == noFreelist {
		return nil
	}
	if id < 2 || id >= w.highWater {
		return fmt.Errorf("%w: freelist page %d is outside the data pages [2, %d)", errPages, id, w.highWater)
	}
	if w.seen[id] {
		return fmt.Errorf("%w: freelist page %d is also a page of the tree", errPages, id)
	}
	page, err := w.pageAt(id)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	if flags := le.Uint16(page[8:]); flags != freelistPageFlag {
		return fmt.Errorf("%w: freelist page %d has flags %#x", errPages, id, flags)
	}
	ids := page[pageHeaderSize:]
	n := uint64(le.Uint16(page[10:]))
	if n == freelistCountOverflow {
		if len(ids) < 8 {
			return fmt.Errorf("%w: freelist page %d has no room for its count", errPages, id)
		}
		n, ids = le.Uint64(ids), ids[8:]
	}
	if n > uint64(len(ids))/8 {
		return fmt.Errorf("%w: freelist page %d counts %d free pages, more than it holds", errPages, id, n)
	}
	for i := range n {
		free := le.Uint64(ids[i*8:])
		switch {
		case free < 2 || free >= w.highWater:
			return fmt.Errorf("%w: freelist page %d frees page %d, outside the data pages [2, %d)", errPages, id, free, w.highWater)
		case w.seen[free]:
			// The next write would take it for new data over the tree's.
			return fmt.Errorf("%w: freelist page %d frees page %d, which the tree uses", errPages, id, free)
		}
	}
	return nil
}

// MetaDamage is a meta page of a bbolt file that is damaged while the
// other is whole (Bolt.DamagedMeta).
type MetaDamage struct {
	Page int // 0 or 1
	// Held is the commit (transaction ID) the damaged page held, when
	// its ID still reads as one next to ReadsAs, or the page is whole but
	// for its ID: Newer says on which side. An ID damaged to read as the
	// older together with other bytes of the page is taken for the older.
	Held  uint64
	Known bool // Held could be read
	Newer bool // Held is the newer commit: the file hides it
	// ReadsAs is the commit of the whole page, which the file reads as.
	ReadsAs uint64
}

// String says which meta page is damaged, which commit it held as far as
// that still reads, and the one the file reads as.
func (d MetaDamage) String() string {
	switch {
	case d.Known && d.Newer:
		return fmt.Sprintf("meta page %d is damaged; it held commit %d, newer than commit %d, which the file reads as", d.Page, d.Held, d.ReadsAs)
	case d.Known:
		return fmt.Sprintf("meta page %d is damaged; it held commit %d, older than commit %d, which the file reads as", d.Page, d.Held, d.ReadsAs)
	}
	return fmt.Sprintf("meta page %d is damaged, and which commit it held cannot be read; the file reads as commit %d", d.Page, d.ReadsAs)
}

// MetaDamageError is OpenBolt's refusal, under WithIntactMeta, of a file
// with a damaged meta page. errors.Is(err, ErrCorruptStore) holds.
type MetaDamageError struct {
	Path   string
	Damage MetaDamage
}

func (e *MetaDamageError) Error() string {
	return fmt.Sprintf("%v: %s: %v (lowwater verify says what it may hide, and how to mend it)", ErrCorruptStore, e.Path, e.Damage)
}

// Is makes errors.Is(err, ErrCorruptStore) hold.
func (e *MetaDamageError) Is(target error) bool { return target == ErrCorruptStore }

// metaDamage finds a damaged meta page in the file's bytes while the
// other is whole; nil when both are whole, or both damaged (bbolt then
// refuses the file, and checkPages says so).
func metaDamage(data []byte) *MetaDamage {
	first, ok0 := readMeta(data, 0)
	second, ok1 := readMeta(data, -1)
	return metaDamageOf(data, first, ok0, second, ok1)
}

// metaDamageOf is metaDamage of the meta pages read as first and second.
func metaDamageOf(data []byte, first boltMeta, ok0 bool, second boltMeta, ok1 bool) *MetaDamage {
	if ok0 == ok1 {
		return nil
	}
	d := &MetaDamage{ReadsAs: first.txid}
	bad := second
	if ok0 {
		d.Page = 1
	} else {
		d.ReadsAs, bad = second.txid, first
	}
	// A commit's page is the one of its ID's parity: the damaged page held
	// the commit after the whole one, or the one before. Its ID may still
	// read as such; but the damage may be in the ID itself, and turn one
	// into the other (one bit, where they differ by two): a page whole but
	// for its ID is told by its checksum first, the newer asked first.
	switch {
	case wholeAs(data, bad, d.ReadsAs+1):
		d.Held, d.Known, d.Newer = d.ReadsAs+1, true, true
	case wholeAs(data, bad, d.ReadsAs-1):
		d.Held, d.Known = d.ReadsAs-1, true
	case bad.txid == d.ReadsAs+1:
		d.Held, d.Known, d.Newer = bad.txid, true, true
	case bad.txid == d.ReadsAs-1:
		d.Held, d.Known = bad.txid, true
	}
	return d
}

// wholeAs reports whether the meta page m, read from data, would pass its
// checksum with txid as its transaction ID.
func wholeAs(data []byte, m boltMeta, txid uint64) bool {
	if m.at < 0 || m.at+pageHeaderSize+metaChecksumOffset+8 > len(data) {
		return false
	}
	b := data[m.at+pageHeaderSize:]
	h := fnv.New64a()
	h.Write(b[:metaTxidOffset])
	h.Write(binary.LittleEndian.AppendUint64(nil, txid))
	h.Write(b[metaTxidOffset+8 : metaChecksumOffset])
	return binary.LittleEndian.Uint64(b[metaChecksumOffset:]) == h.Sum64()
}

// DamagedMeta reports a meta page of the file that is damaged while the
// other is whole, or nil. bbolt keeps two and opens the file as of the
// whole one, with no error: after a crash that tore the last commit's
// write, that commit was never acknowledged; damaged later, it was, and
// the file reads without its saves. Nothing else tells the two apart
// from a sound file; the next commit rewrites the damaged page.
//
// It reads the file the Bolt opened, wherever it now is: a file put at
// its path since is another. After Close it returns ErrClosed.
func (b *Bolt) DamagedMeta() (*MetaDamage, error) {
	b.calls.Lock()
	closed := b.closed
	b.calls.Unlock()
	if closed {
		return nil, ErrClosed
	}
	// The meta pages lie in the first two pages, which readMeta looks
	// for up to 16 MiB each: the rest of the file is not read.
	data, err := io.ReadAll(io.NewSectionReader(b.file, 0, metaSpan))
	if errors.Is(err, os.ErrClosed) {
		return nil, ErrClosed // closed as it read
	}
	if err != nil {
		return nil, fmt.Errorf("persistence: read bolt file %s: %w", b.path, err)
	}
	return metaDamage(data), nil
}

// metaSpan is how far into a file readMeta looks for the meta pages: two
// pages of the largest size it tries.
const metaSpan = 2 * (1024 << 14)
