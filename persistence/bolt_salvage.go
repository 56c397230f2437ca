package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/lowwater/lowwater/persistence/internal/record"
	"github.com/lowwater/lowwater/wal"
)

// PageState is what a bbolt file says of a page a salvaged record was
// read from.
type PageState int

const (
	// PageLive: the newest whole commit's tree reaches the page, or the
	// page is in no freelist the file holds: what the pchannel held last,
	// as far as the file can tell.
	PageLive PageState = iota
	// PageUnknown: neither is known. The tree is damaged on the way to
	// the page, and the freelist could not be read.
	PageUnknown
	// PageFreed: the page is on the freelist, or at or above the high
	// water mark: a commit before the last wrote it, and a later one
	// rewrote or deleted what it held.
	PageFreed
)

func (s PageState) String() string {
	switch s {
	case PageLive:
		return "live"
	case PageUnknown:
		return "unknown"
	case PageFreed:
		return "freed"
	}
	return fmt.Sprintf("PageState(%d)", int(s))
}

// SalvagedRecord is a whole checkpoint record SalvageBolt found.
type SalvagedRecord struct {
	PChannel   string
	WAL        wal.Name
	Checkpoint wal.MessageID
	Term       uint64
	// Page is the page the record was read from: for a bucket small
	// enough to be kept inside its parent's page, that page.
	Page  uint64
	State PageState
	// Versions is how many whole records of the pchannel the file's
	// pages hold, this one among them: bbolt writes a changed page
	// elsewhere, and the page before keeps its bytes until it is reused.
	Versions int
	// Higher is the highest checkpoint of another of those records above
	// Checkpoint, on page HigherPage, or nil. Checkpoints rise, so it is
	// one lowered or replaced since (set --force), or the last commit's,
	// hidden by a damaged meta page (Salvage.MetaDamage).
	Higher     wal.MessageID
	HigherPage uint64
}

// Salvage is what SalvageBolt read from a damaged file.
type Salvage struct {
	// Records holds one record a pchannel, by name: of the pages the
	// newest commit holds, or else of pages it may hold, or else the
	// highest of freed pages, which an operator checks before restoring.
	Records  []SalvagedRecord
	PageSize int
	// Pages is how many pages the file holds, and Unreadable how many of
	// those below its high water mark read as no page at all: damaged.
	Pages, Unreadable int
	// Damaged is how many elements of the bucket's pages are no whole
	// record: damaged keys or records, and records of a WAL this program
	// has not registered (wal.Register).
	Damaged int
	// OtherBuckets names the file's other buckets. Where it has some, the
	// pages the bucket's own trees do not reach are left out, since they
	// may be another bucket's: LeftOut counts the whole records they hold.
	OtherBuckets []string
	LeftOut      int
	// MetaDamage is a damaged meta page beside a whole one, which the
	// pages' states are read from: when it held the newer commit, that
	// commit's pages read as freed, and its records as Higher.
	MetaDamage *MetaDamage
}

// SalvageBolt reads every whole checkpoint record of the bbolt file at
// path, page by page, without bbolt: a file damaged where bbolt or
// OpenBolt refuses it whole (a branch page, a meta page, the freelist)
// still holds the records of its undamaged leaf pages, each of which
// proves itself whole by its checksum and the name check of its key. Of
// the options, WithBucket names the bucket (a bucket whose name is
// damaged is known by its mark) and WithOpenTimeout bounds the wait for a
// writer's lock (ErrLocked); the others mean nothing here. Nothing is
// written.
//
// bbolt writes a changed page elsewhere and frees the page before, which
// keeps its bytes until reused: a pchannel may be found several times.
// SalvageBolt picks the record of a live page, and says when it found only
// freed ones: a pchannel deleted since, or one whose newest record is on
// a damaged page. Such a record may be older, or after a forced lowering
// higher, than the last one saved; check those before restoring them.
// Where a freed page holds a higher record than the live one, it says so
// too (Higher): a lowering, or a last commit that a damaged meta page
// hides, which it takes the live record over, since a checkpoint too low
// replays what one too high would skip.
func SalvageBolt(ctx context.Context, path string, opts ...BoltOption) (*Salvage, error) {
	o, err := applyBoltOptions(opts)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bbolt file: %w", err)
	}
	defer f.Close()
	if err := lockFile(f, false, o.openTimeout); err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s: not released within %v: %w", ErrLocked, path, o.openTimeout, err)
		}
		return nil, fmt.Errorf("bbolt file %s: lock: %w", path, err)
	}
	data, err := readAll(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("bbolt file %s: %w", path, err)
	}
	s, err := salvage(ctx, data, []byte(o.bucket))
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, fmt.Errorf("salvaging %s: %w", path, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCorruptStore, path, err)
	}
	return s, nil
}

// readAll reads f whole, asking ctx between chunks: a file of gigabytes
// on a slow disk takes a while.
func readAll(ctx context.Context, f *os.File) ([]byte, error) {
	var buf bytes.Buffer
	if info, err := f.Stat(); err == nil {
		buf.Grow(int(min(info.Size(), 1<<30)))
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, err := buf.ReadFrom(io.LimitReader(f, 1<<20))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf.Bytes(), nil
		}
	}
}

// salvageBucket is a bucket element found in a leaf page.
type salvageBucket struct {
	name []byte
	ours bool   // named as asked, or marked so (its name damaged)
	root uint64 // 0: inline, its page inside the element
	page uint64 // the page the element lies in
}

// salvageFind is a whole record found in a leaf page.
type salvageFind struct {
	key  string
	page uint64
	// inline: in a bucket kept inside its element, whose bucket is then
	// known, ours or not; else the bucket is told by reachability.
	inline, oursInline bool
	h                  record.Header
	id                 wal.MessageID
}

// salvageScan is what one pass over every page finds.
type salvageScan struct {
	want     []byte
	buckets  []salvageBucket
	finds    []salvageFind
	damaged  map[uint64]int      // elements that are no whole record, by page
	children map[uint64][]uint64 // a branch page's children
	leaves   map[uint64]bool     // pages that read as leaf pages
}

// salvage reads the records of bucket want from a file's bytes.
func salvage(ctx context.Context, data, want []byte) (*Salvage, error) {
	pageSize := salvagePageSize(data)
	if pageSize == 0 {
		return nil, fmt.Errorf("%w: no page size at which the file holds bbolt pages: not a bbolt file, or damaged throughout", errPages)
	}
	le := binary.LittleEndian
	out := &Salvage{PageSize: pageSize, Pages: len(data) / pageSize}
	sc := &salvageScan{want: want, damaged: map[uint64]int{}, children: map[uint64][]uint64{}, leaves: map[uint64]bool{}}
	// Pages at and above the high water mark were never written, or
	// are left from a commit that did not end: none is unreadable.
	highWater := uint64(out.Pages)
	if m, err := newestMeta(data); err == nil {
		highWater = min(highWater, m.pgid)
	}
	covered := 0 // the pages up to it continue a page of several
	for i := 0; i < out.Pages; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		off := i * pageSize
		if le.Uint64(data[off:]) != uint64(i) {
			if i > covered && uint64(i) < highWater {
				out.Unreadable++
			}
			continue
		}
		// A page of several runs over the next ones: cut at the file's end.
		overflow := le.Uint32(data[off+12:])
		covered = max(covered, i+int(min(overflow, uint32(out.Pages))))
		span := (uint64(overflow) + 1) * uint64(pageSize)
		page := data[off:min(uint64(len(data)), uint64(off)+span)]
		switch le.Uint16(data[off+8:]) {
		case leafPageFlag:
			sc.leaves[uint64(i)] = true
			sc.leaf(uint64(i), page, false, false)
		case branchPageFlag:
			sc.branch(uint64(i), page)
		}
	}

	// Which pages hold the bucket's records: those its trees reach, and,
	// in a file with no other bucket, every leaf page.
	ours, others := map[uint64]bool{}, map[uint64]bool{}
	otherNames := map[string]bool{}
	for _, b := range sc.buckets {
		switch {
		case b.ours && b.root != 0:
			sc.reach(b.root, ours)
		case !b.ours:
			otherNames[string(b.name)] = true
			if b.root != 0 {
				sc.reach(b.root, others)
			}
		}
	}
	for name := range otherNames {
		out.OtherBuckets = append(out.OtherBuckets, name)
	}
	slices.Sort(out.OtherBuckets)
	counted := func(f salvageFind) bool {
		switch {
		case f.inline:
			return f.oursInline
		case ours[f.page]:
			return true
		default:
			return len(otherNames) == 0
		}
	}
	for page, n := range sc.damaged {
		if ours[page] || len(otherNames) == 0 && !others[page] {
			out.Damaged += n
		}
	}

	// Which pages the newest whole commit holds, and which it freed.
	live, freed, freelistRead := salvageLive(sc, data, pageSize)
	out.MetaDamage = metaDamage(data)

	byName := map[string][]salvageFind{}
	for _, f := range sc.finds {
		if !counted(f) {
			out.LeftOut++
			continue
		}
		byName[f.key] = append(byName[f.key], f)
	}
	for name, finds := range byName {
		best, bestState := -1, PageFreed
		for i, f := range finds {
			state := PageUnknown
			switch {
			case live[f.page]:
				state = PageLive
			case freed[f.page]:
				state = PageFreed
			case freelistRead:
				// On no freelist, below the high water mark: the tree
				// holds it, on a way that damage cut.
				state = PageLive
			}
			if best < 0 || state < bestState || state == bestState && salvageHigher(f.id, finds[best].id) {
				best, bestState = i, state
			}
		}
		f := finds[best]
		r := SalvagedRecord{
			PChannel: name, WAL: f.h.WAL, Checkpoint: f.id, Term: f.h.Term,
			Page: f.page, State: bestState, Versions: len(finds),
		}
		for _, o := range finds {
			if salvageHigher(o.id, r.Checkpoint) && (r.Higher == nil || salvageHigher(o.id, r.Higher)) {
				r.Higher, r.HigherPage = o.id, o.page
			}
		}
		out.Records = append(out.Records, r)
	}
	slices.SortFunc(out.Records, func(a, b SalvagedRecord) int { return strings.Compare(a.PChannel, b.PChannel) })
	return out, nil
}

// salvageHigher reports whether a is after b: an ID of another WAL, or
// one that cannot be compared, is not.
func salvageHigher(a, b wal.MessageID) bool {
	c, err := wal.Compare(a, b)
	return err == nil && c > 0
}

// salvagePageSize is the file's page size: a whole meta page's, or else
// the size at which the most pages say they are the page they are.
func salvagePageSize(data []byte) int {
	if m, err := newestMeta(data); err == nil {
		return int(m.pageSize)
	}
	le := binary.LittleEndian
	best, bestScore := 0, 0
	for size := 1024; size <= 1<<16 && 2*size <= len(data); size <<= 1 {
		score := 0
		for i := 2; i*size+pageHeaderSize <= len(data) && i < 1<<16; i++ {
			if le.Uint64(data[i*size:]) == uint64(i) {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = size, score
		}
	}
	return best
}

// leaf reads the elements of a leaf page: records, and buckets (reading
// the page of a bucket kept inside its element). inline tells a page
// inside a bucket's element, of a bucket that is ours or not.
func (sc *salvageScan) leaf(id uint64, page []byte, inline, ours bool) {
	le := binary.LittleEndian
	count := int(le.Uint16(page[10:]))
	for j := range count {
		e := pageHeaderSize + j*pageElementSize
		if e+pageElementSize > len(page) {
			sc.damaged[id] += count - j
			return
		}
		flags := le.Uint32(page[e:])
		start := uint64(e) + uint64(le.Uint32(page[e+4:]))
		kEnd := start + uint64(le.Uint32(page[e+8:]))
		vEnd := kEnd + uint64(le.Uint32(page[e+12:]))
		if vEnd > uint64(len(page)) {
			sc.damaged[id]++
			continue
		}
		key, value := page[start:kEnd], page[kEnd:vEnd]
		if flags&bucketLeafFlag != 0 {
			if inline || len(value) < bucketHeaderSize {
				sc.damaged[id]++ // lowwater's buckets hold no bucket
				continue
			}
			b := salvageBucket{name: bytes.Clone(key), root: le.Uint64(value), page: id}
			b.ours = bytes.Equal(key, sc.want) || le.Uint64(value[8:]) == bucketMark(sc.want)
			sc.buckets = append(sc.buckets, b)
			if b.root == 0 && len(value) >= bucketHeaderSize+pageHeaderSize {
				sc.leaf(id, value[bucketHeaderSize:], true, b.ours)
			}
			continue
		}
		h, ok, mid, err := record.Decode(string(key), value)
		if !ok || err != nil {
			sc.damaged[id]++
			continue
		}
		sc.finds = append(sc.finds, salvageFind{key: string(key), page: id, inline: inline, oursInline: ours, h: h, id: mid})
	}
}

// branch notes a branch page's children.
func (sc *salvageScan) branch(id uint64, page []byte) {
	le := binary.LittleEndian
	count := int(le.Uint16(page[10:]))
	for j := range count {
		e := pageHeaderSize + j*pageElementSize
		if e+pageElementSize > len(page) {
			return
		}
		sc.children[id] = append(sc.children[id], le.Uint64(page[e+8:]))
	}
}

// reach marks in seen every page of the tree at root that reads whole.
func (sc *salvageScan) reach(root uint64, seen map[uint64]bool) {
	stack := []uint64{root}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		stack = append(stack, sc.children[id]...)
	}
}

// salvageLive is what the newest whole meta page says of the pages: those
// its tree reaches (the root's pages, and the trees of the buckets in
// them), those on its freelist or at or above its high water mark, and
// whether it had a freelist to read.
func salvageLive(sc *salvageScan, data []byte, pageSize int) (live, freed map[uint64]bool, freelistRead bool) {
	live, freed = map[uint64]bool{}, map[uint64]bool{}
	m, err := newestMeta(data)
	if err != nil {
		return live, freed, false
	}
	sc.reach(m.root, live)
	for _, b := range sc.buckets {
		if live[b.page] && b.root != 0 {
			sc.reach(b.root, live)
		}
	}
	pages := uint64(len(data) / pageSize)
	for id := m.pgid; id < pages; id++ {
		freed[id] = true
	}
	if m.freelist == noFreelist || m.freelist < 2 || m.freelist >= m.pgid {
		return live, freed, false
	}
	le := binary.LittleEndian
	off := m.freelist * uint64(pageSize)
	if off+uint64(pageSize) > uint64(len(data)) || le.Uint64(data[off:]) != m.freelist || le.Uint16(data[off+8:]) != freelistPageFlag {
		return live, freed, false
	}
	span := (uint64(le.Uint32(data[off+12:])) + 1) * uint64(pageSize)
	page := data[off:min(uint64(len(data)), off+span)]
	ids := page[pageHeaderSize:]
	n := uint64(le.Uint16(page[10:]))
	if n == freelistCountOverflow {
		if len(ids) < 8 {
			return live, freed, false
		}
		n, ids = le.Uint64(ids), ids[8:]
	}
	if n > uint64(len(ids))/8 {
		return live, freed, false
	}
	for i := range n {
		freed[le.Uint64(ids[i*8:])] = true
	}
	return live, freed, true
}
