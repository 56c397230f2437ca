package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/bits"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence/internal/record"
	"github.com/lowwater/lowwater/wal"
)

// PageState is what a bbolt file says of a page a salvaged record was
// read from.
type PageState int

const (
	// PageLive: the newest whole commit holds the page: its tree reaches
	// it and its freelist does not free it, or the page lies where damage
	// cut the tree off and the freelist does not free it.
	PageLive PageState = iota
	// PageUnknown: the file no longer tells. No meta page is whole; or
	// the tree is damaged and the freelist unread; or the two disagree (a
	// damaged branch reaching a freed page).
	PageUnknown
	// PageFreed: the freelist frees the page, or it lies at or above the
	// high water mark, or a whole tree does not reach it: a commit before
	// the last wrote it, and a later one rewrote or deleted what it held.
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
	// Checkpoint, on page HigherPage, or nil; in a whole file (Salvage.
	// Whole), where it can only be one lowered since, nil. Checkpoints
	// rise, so it is one lowered or replaced since (set --force), or the
	// last commit's, hidden by a damaged meta page (Salvage.MetaDamage).
	Higher     wal.MessageID
	HigherPage uint64
	// Hidden is the pchannel's checkpoint in the commit a damaged meta
	// page held, where that page's tree still reads whole and holds
	// another than Checkpoint; HiddenDeleted, that the commit deleted
	// it. bbolt reads the file as of the commit before, and so does the
	// salvage: that commit may have been acknowledged (the page damaged
	// since), or not (its write torn by a crash).
	Hidden        wal.MessageID
	HiddenDeleted bool
	// StoredUnder is the key the record was read under, where it is not
	// the record's own name: its key was damaged, and the name is the one
	// that damage of one byte turns into the key and that the record's
	// name check names (as verify's MISPLACED), and one the file holds a
	// record of under its own key too (an older copy). Empty otherwise.
	StoredUnder string
}

// Ambiguity is a pchannel whose live pages hold more than one checkpoint,
// which one bucket cannot: another bucket's pages, their tree lost, or
// damage. None of them is salvaged.
type Ambiguity struct {
	PChannel    string
	Checkpoints []wal.MessageID
	Pages       []uint64
}

// Salvage is what SalvageBolt read from a damaged file.
type Salvage struct {
	// Records holds one record a pchannel, by name: of a live page, or
	// else of a page of unknown state, or else of a freed page (the
	// highest of their kind), which an operator checks before restoring.
	Records  []SalvagedRecord
	PageSize int
	// Pages is how many pages the file holds, Missing how many more its
	// newest whole meta page counts (a file cut short), and Unreadable
	// how many below the high water mark read as no page at all.
	Pages, Missing, Unreadable int
	// Damaged is how many elements of the bucket's live pages are no
	// whole record: damaged keys or records, and records of a WAL this
	// program has not registered (wal.Register).
	Damaged int
	// Whole says that the newest whole meta page's tree reads whole: every
	// page it reaches is a page, with no damaged element. A pchannel then
	// found only on freed pages was deleted, and is left out: Deleted
	// counts them.
	Whole   bool
	Deleted int
	// Broken says why the tree does not read whole, where Whole is
	// false: the first thing found, a page and what is wrong with it.
	// Damage that counts no record (a branch key out of its range, a
	// page cut off the tree) is told here alone.
	Broken string
	// NoFreelist says that the file keeps no freelist (bbolt's
	// NoFreelistSync): the pages its tree does not reach are freed, if
	// the tree reads whole, and otherwise unknown.
	NoFreelist bool
	// Ambiguous lists the pchannels left out for holding more than one
	// checkpoint on live pages.
	Ambiguous []Ambiguity
	// OtherBuckets names the file's other buckets, and LeftOut counts the
	// records left out as maybe theirs: on live pages that no bucket's
	// tree reaches, in a file with other buckets.
	OtherBuckets []string
	LeftOut      int
	// Unattributed says that no page names a bucket any more: every
	// record found is taken for the bucket's, and a file that held other
	// buckets has theirs among them.
	Unattributed bool
	// RenamedAs is the name the bucket is found under when its name is
	// damaged: it is told by its mark (WithBucket).
	RenamedAs string
	// Twins counts the buckets taken for the asked one on live pages,
	// where there should be one: buckets made before lowwater marked its
	// own, one of them another's renamed by damage, or one nested in
	// another's, cut off the tree by damage. Their records are all
	// taken, and some of them are another bucket's.
	Twins int
	// NoMeta says that no meta page is whole: which pages the last
	// commit holds is not known, and every record's state is
	// PageUnknown.
	NoMeta bool
	// HiddenRead says that the tree of the commit a damaged meta page
	// held still reads whole, and the records tell what it changed
	// (SalvagedRecord.Hidden).
	HiddenRead bool
	// MetaDamage is a damaged meta page beside a whole one, which the
	// pages' states are read from: when it held the newer commit, that
	// commit's pages read as freed, and its records as Higher.
	MetaDamage *MetaDamage
}

// SalvageBolt reads every whole checkpoint record of the bbolt file at
// path, page by page, without bbolt: a file damaged where bbolt or
// OpenBolt refuses it whole (a branch page, a meta page, the freelist)
// still holds the records of its undamaged leaf pages, each of which
// proves itself whole by its checksum and the name check of its key (a
// record under a key damaged a byte away from the name its check names
// is read as that name's: StoredUnder). Of
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
	// A pipe or a device is refused before it is read: a pipe read
	// blocks past every deadline, /dev/zero never ends.
	if err := checkPath(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bbolt file: %w", err)
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, openError(path, fmt.Errorf("not a regular file: %w", fs.ErrInvalid))
	}
	if err := lockWithin(ctx, f, o.openTimeout); err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s: not released within %v: %w", ErrLocked, path, o.openTimeout, err)
		}
		return nil, fmt.Errorf("bbolt file %s: lock: %w", path, err)
	}
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("bbolt file %s: %w", path, err)
	}
	// Mapped, not read: a copy on the heap took the file's size (three
	// times it, grown as it read), and a file larger than the memory
	// left ended the process; a mapping that cannot be made is an error.
	data, unmap, err := mapFile(f, info.Size())
	if err != nil {
		return nil, fmt.Errorf("bbolt file %s: %w", path, err)
	}
	defer unmap()
	s, err := salvageMapped(ctx, data, []byte(o.bucket))
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) || errors.Is(err, ErrNoBucket) || errors.Is(err, errCutWhileRead) {
			return nil, fmt.Errorf("salvaging %s: %w", path, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrCorruptStore, path, err)
	}
	return s, nil
}

// lockWithin takes a reader's lock of f, waiting up to timeout, and no
// longer than ctx: a command's --timeout and its Ctrl-C.
func lockWithin(ctx context.Context, f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := lockFile(f, false, min(max(time.Until(deadline), time.Millisecond), 100*time.Millisecond))
		if !errors.Is(err, bolterrors.ErrTimeout) || !time.Now().Before(deadline) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
	}
}

// errCutWhileRead is the error of a file cut short as it was read: not
// damage, a read that failed.
var errCutWhileRead = errors.New("the file was cut short as it was read (by a program that ignores its lock?)")

// salvageMapped is salvage of a mapped file: a page the file no longer
// holds (cut short by a program that ignores the lock) faults, and is an
// error. What it returns holds no byte of data.
func salvageMapped(ctx context.Context, data, want []byte) (s *Salvage, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if _, fault := p.(interface{ Addr() uintptr }); !fault {
				panic(p)
			}
			s, err = nil, errCutWhileRead
		}
	}()
	return salvage(ctx, data, want)
}

// salvageBucket is a bucket element found in a leaf page.
type salvageBucket struct {
	name []byte
	ours bool // named as asked, or marked so (its name damaged)
	// conflict: named as asked, under another name's mark.
	conflict bool
	// nested: named or marked as asked, on a live page of another
	// bucket's tree.
	nested bool
	root   uint64 // 0: inline, its page inside the element
	page   uint64 // the page the element lies in
}

// salvageFind is a whole record found in a leaf page.
type salvageFind struct {
	key  string
	page uint64
	// inline is the index in salvageScan.buckets of the bucket kept
	// inside its element that holds the record, whose bucket is then
	// known once every bucket is (nested, say); -1 outside one, where the
	// bucket is told by reachability.
	inline int
	h      record.Header
	id     wal.MessageID
	// under is the key the record is stored under, where its key is
	// damaged and key is the name it was written for; "" otherwise.
	under string
}

// salvageScan is what one pass over every page finds.
type salvageScan struct {
	want    []byte
	buckets []salvageBucket
	finds   []salvageFind
	damaged map[uint64]int // elements damaged: out of order, astray, flagged as they are not, by page
	// foreign counts, by page, the elements that hold no lowwater record
	// (another program's values, or records of ours damaged), and
	// foreignInline those of each bucket kept inline, by its index.
	foreign       map[uint64]int
	foreignInline map[int]int
	children      map[uint64][]uint64 // a branch page's children
	keys          map[uint64][][]byte // a branch page's keys, one a child (nil: unread)
	// first and last are the first and last keys of each leaf or branch
	// page, for the keys of the branch above it.
	first, last map[uint64][]byte
	pages       map[uint64]bool   // pages that read as leaf or branch pages
	overflow    map[uint64]uint64 // how many pages after each of those it runs over
	// flags are the type flags, as read, of the leaf pages read as such
	// though that flag is damaged (damagedLeaf).
	flags map[uint64]uint16
}

func newSalvageScan(want []byte) *salvageScan {
	return &salvageScan{want: want, damaged: map[uint64]int{}, foreign: map[uint64]int{}, foreignInline: map[int]int{},
		children: map[uint64][]uint64{}, keys: map[uint64][][]byte{},
		first: map[uint64][]byte{}, last: map[uint64][]byte{}, pages: map[uint64]bool{}, overflow: map[uint64]uint64{},
		flags: map[uint64]uint16{}}
}

// damagedLeaf reads page id, whose type flag is a bit away from a leaf
// page's, as a leaf page, if it holds a whole record and no bucket: one
// bit of its header damaged, its records are whole all the same, each
// proved by its checksum and name check, and they are the live ones.
// Read as no page, they were left for older copies on freed pages, which
// restored would lower their pchannels. It reports whether it did.
func (sc *salvageScan) damagedLeaf(id uint64, page []byte) bool {
	t := newSalvageScan(sc.want)
	t.leaf(id, page, -1)
	if len(t.finds) == 0 || len(t.buckets) > 0 {
		return false
	}
	sc.finds = append(sc.finds, t.finds...)
	for page, n := range t.damaged {
		sc.damaged[page] += n
	}
	for page, n := range t.foreign {
		sc.foreign[page] += n
	}
	maps.Copy(sc.first, t.first)
	maps.Copy(sc.last, t.last)
	return true
}

// salvage reads the records of bucket want from a file's bytes.
func salvage(ctx context.Context, data, want []byte) (*Salvage, error) {
	pageSize := salvagePageSize(data)
	if pageSize == 0 {
		return nil, fmt.Errorf("%w: no page size at which the file holds bbolt pages: not a bbolt file, or damaged throughout", errPages)
	}
	le := binary.LittleEndian
	out := &Salvage{PageSize: pageSize, Pages: len(data) / pageSize}
	// The meta pages where this page size puts them: newestMeta guesses
	// the second's place at the usual sizes only.
	first, ok0 := metaAt(data, 0)
	second, ok1 := metaAt(data, pageSize)
	out.MetaDamage = metaDamageOf(data, first, ok0, second, ok1)
	if !ok1 && second.at < 0 {
		// Not damaged: cut off with the rest of the file, which Missing
		// tells.
		out.MetaDamage = nil
	}
	meta, metaErr := newestMeta(data)
	if metaErr != nil && ok1 && int(second.pageSize) == pageSize {
		meta, metaErr = second, nil // at a page size newestMeta does not guess
	}
	out.NoMeta = metaErr != nil
	sc := newSalvageScan(want)
	lastPage := uint64(0) // the end of the last page that reads as one
	covered := 0          // the pages up to it continue a page of several
	var mismatched []uint64
	for i := 0; i < out.Pages; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		off := i * pageSize
		flags := le.Uint16(data[off+8:])
		if le.Uint64(data[off:]) != uint64(i) || i < 2 && flags != metaPageFlag {
			if i > covered || i < 2 {
				mismatched = append(mismatched, uint64(i))
			}
			continue
		}
		// A page of several runs over the next ones: cut at the file's end.
		overflow := le.Uint32(data[off+12:])
		covered = max(covered, i+int(min(overflow, uint32(out.Pages))))
		lastPage = uint64(min(i+int(min(overflow, uint32(out.Pages)))+1, out.Pages))
		span := (uint64(overflow) + 1) * uint64(pageSize)
		page := data[off:min(uint64(len(data)), uint64(off)+span)]
		switch flags {
		case leafPageFlag:
			sc.pages[uint64(i)], sc.overflow[uint64(i)] = true, uint64(overflow)
			sc.leaf(uint64(i), page, -1)
		case branchPageFlag:
			sc.pages[uint64(i)], sc.overflow[uint64(i)] = true, uint64(overflow)
			sc.branch(uint64(i), page)
		default:
			if bits.OnesCount16(flags^leafPageFlag) == 1 && sc.damagedLeaf(uint64(i), page) {
				sc.pages[uint64(i)], sc.overflow[uint64(i)] = true, uint64(overflow)
				sc.flags[uint64(i)] = flags
			}
		}
	}
	// A record under a damaged key is taken for the name its check names
	// only where the file holds a record under that name too (an older
	// copy on a freed page, say): of the names a byte from a key damaged
	// in several bytes, one matches a check of 32 bits by chance now and
	// then, and dumped, would make a pchannel that never was, while the
	// one it was written for got an older copy.
	known := map[string]bool{}
	for _, f := range sc.finds {
		if f.under == "" {
			known[f.key] = true
		}
	}
	sc.finds = slices.DeleteFunc(sc.finds, func(f salvageFind) bool { return f.under != "" && !known[f.key] })
	// Pages at and above the high water mark were never written, or are
	// left from a commit that did not end: none is unreadable. Without a
	// whole meta page, the mark is taken to end with the last page.
	highWater := lastPage
	if metaErr == nil {
		highWater = meta.pgid
		out.Missing = int(max(meta.pgid, uint64(out.Pages)) - uint64(out.Pages))
	}
	// What the newest whole meta page says of each page. With the other
	// damaged, it may be the commit before the last, whose tree does not
	// reach the last one's pages: no page is then taken to be freed for
	// being out of its reach.
	st := salvageStates(sc, data, meta, metaErr == nil, pageSize, highWater)
	// A freed page need not read as one: the rest of a freed run of
	// several, whose first page was reused, has no header of its own.
	for _, id := range mismatched {
		if id < highWater && !st.freed[id] {
			out.Unreadable++
		}
	}
	out.NoFreelist = metaErr == nil && meta.freelist == noFreelist
	// A damaged meta page: the commit it held may be the newest.
	switch {
	case !ok0:
		st.breaks("meta page 0 is damaged")
	case !ok1 && second.at < 0:
		st.breaks("meta page 1 is missing: the file is cut short")
	case !ok1:
		st.breaks("meta page 1 is damaged")
	}
	state := func(page uint64) PageState { return st.of(page) }

	// Which bucket a page is: the one whose live tree reaches it, or
	// else the one whose tree of an earlier commit does (a page freed and
	// reused by another bucket since is reached by both). In a file with
	// no other bucket, every leaf page is the bucket's.
	oursLive, othersLive := map[uint64]bool{}, map[uint64]bool{}
	oursOld, othersOld := map[uint64]bool{}, map[uint64]bool{}
	otherNames := map[string]bool{}
	found := false
	// The catalog is a bucket of the file's top-level tree: one of the
	// asked name inside another bucket (another program's) is that
	// bucket's, and its records were mixed into ours.
	top := map[uint64]bool{}
	if metaErr == nil {
		sc.reach(meta.root, top)
	}
	sound := false
	for i := range sc.buckets {
		b := &sc.buckets[i]
		if b.ours && state(b.page) == PageLive {
			if st.tree[b.page] && !top[b.page] {
				// Reached through another bucket. (One that damage cut
				// off the tree cannot be told nested: it is taken as
				// named.)
				b.ours, b.nested = false, true
			} else {
				sound = true
			}
		}
	}
	for i := range sc.buckets {
		if b := &sc.buckets[i]; b.conflict {
			b.ours = !sound
		}
	}
	for _, b := range sc.buckets {
		live := state(b.page) == PageLive
		if b.ours && live {
			out.Twins++
		}
		if b.ours {
			found = true
			if live && !bytes.Equal(b.name, want) && out.RenamedAs == "" {
				out.RenamedAs = string(b.name)
			}
		} else if !b.nested {
			otherNames[string(b.name)] = true // the bucket around a nested one is named too
		}
		if b.root == 0 {
			continue
		}
		switch {
		case b.ours && live:
			sc.reach(b.root, oursLive)
		case b.ours:
			sc.reach(b.root, oursOld)
		case live:
			sc.reach(b.root, othersLive)
		default:
			sc.reach(b.root, othersOld)
		}
	}
	if out.Twins < 2 {
		out.Twins = 0
	}
	for name := range otherNames {
		out.OtherBuckets = append(out.OtherBuckets, name)
	}
	slices.Sort(out.OtherBuckets)
	if !found && len(otherNames) > 0 {
		return nil, fmt.Errorf("%w: no bucket %s found, only %s", ErrNoBucket, shorten.QuotedText(string(want)), quotedNames(out.OtherBuckets))
	}
	alone := len(otherNames) == 0
	out.Unattributed = len(sc.buckets) == 0
	// Our live tree read whole: a live page it does not reach is not ours
	// now, whoever's earlier tree reached it. An earlier tree of ours did
	// reach pages freed since and reused by another bucket, whose own
	// tree damage had lost: its records were dumped as ours, deleted
	// pchannels of ours among them.
	oursWhole := len(oursLive) > 0
	for page := range oursLive {
		if !sc.pages[page] || sc.damaged[page] > 0 || state(page) != PageLive {
			oursWhole = false
			break
		}
	}
	// ours says whether a page's records are the bucket's; unsure, that
	// they may be, or another bucket's.
	ours := func(page uint64) (yes, unsure bool) {
		switch {
		case alone:
			return true, false
		case oursLive[page] && othersLive[page]:
			return false, true
		case oursLive[page]:
			return true, false
		case othersLive[page]:
			return false, false
		case oursOld[page] && !othersOld[page]:
			if oursWhole && state(page) == PageLive {
				return false, true
			}
			return true, false
		case othersOld[page] && !oursOld[page]:
			return false, false
		}
		return false, true
	}
	// counted says whether a record found counts as the bucket's, and
	// whether it is left out as maybe another bucket's (only a live one
	// is worth telling).
	counted := func(f salvageFind) (ok, leftOut bool) {
		if f.inline >= 0 {
			return sc.buckets[f.inline].ours, false
		}
		yes, unsure := ours(f.page)
		return yes, unsure && state(f.page) != PageFreed
	}
	for page, n := range sc.damaged {
		// The top-level tree's pages are every bucket's: damage there
		// (two buckets of one name, say) is the catalog's too.
		if yes, _ := ours(page); (yes || top[page]) && state(page) != PageFreed {
			out.Damaged += n
		}
	}
	// An element that holds no record is damage on the bucket's pages
	// alone: another program's bucket may share the file, and its values
	// are none of lowwater's.
	for _, page := range slices.Sorted(maps.Keys(sc.foreign)) {
		if yes, _ := ours(page); yes && state(page) != PageFreed {
			n := sc.foreign[page]
			out.Damaged += n
			st.breaks(fmt.Sprintf("page %d holds %d %s that %s no lowwater record", page, n, plural(n, "element"), plural(n, "is")))
		}
	}
	for _, i := range slices.Sorted(maps.Keys(sc.foreignInline)) {
		if b, n := sc.buckets[i], sc.foreignInline[i]; b.ours && state(b.page) != PageFreed {
			out.Damaged += n
			st.breaks(fmt.Sprintf("the bucket kept in page %d holds %d %s that %s no lowwater record", b.page, n, plural(n, "element"), plural(n, "is")))
		}
	}
	out.Whole, out.Broken = st.whole, st.broken

	// The commit a damaged meta page held, if its tree still reads
	// whole: what it holds of each pchannel.
	var hidden map[string]wal.MessageID
	if d := out.MetaDamage; d != nil && (d.Newer || !d.Known) && metaErr == nil {
		damaged := first
		if ok0 {
			damaged = second
		}
		if damaged.root >= 2 && damaged.root < damaged.pgid && damaged.pgid <= uint64(out.Pages) {
			alt := salvageStates(sc, data, damaged, true, pageSize, damaged.pgid)
			if alt.whole {
				out.HiddenRead = true
				hidden = map[string]wal.MessageID{}
				for _, f := range sc.finds {
					if ok, _ := counted(f); ok && alt.of(f.page) == PageLive {
						hidden[f.key] = f.id
					}
				}
			}
		}
	}

	byName := map[string][]salvageFind{}
	for _, f := range sc.finds {
		ok, leftOut := counted(f)
		if leftOut {
			out.LeftOut++
		}
		if ok {
			byName[f.key] = append(byName[f.key], f)
		}
	}
	for name, finds := range byName {
		best, bestState := -1, PageFreed
		for i, f := range finds {
			s := state(f.page)
			// Of two alike, the one under its own key: a copy under a
			// damaged key says nothing more.
			if best < 0 || s < bestState || s == bestState && (salvageHigher(f.id, finds[best].id) ||
				salvageSame(f.id, finds[best].id) && finds[best].under != "" && f.under == "") {
				best, bestState = i, s
			}
		}
		if bestState == PageLive {
			// One bucket holds one record a name on its live pages.
			var a Ambiguity
			for _, f := range finds {
				if state(f.page) == PageLive && !slices.ContainsFunc(a.Checkpoints, func(id wal.MessageID) bool { return salvageSame(id, f.id) }) {
					a.Checkpoints, a.Pages = append(a.Checkpoints, f.id), append(a.Pages, f.page)
				}
			}
			if len(a.Checkpoints) > 1 {
				a.PChannel = name
				out.Ambiguous = append(out.Ambiguous, a)
				continue
			}
		}
		if bestState == PageFreed && st.whole {
			out.Deleted++ // a whole tree no longer holds it
			continue
		}
		f := finds[best]
		r := SalvagedRecord{
			PChannel: name, WAL: f.h.WAL, Checkpoint: f.id, Term: f.h.Term,
			Page: f.page, State: bestState, Versions: len(finds), StoredUnder: f.under,
		}
		for _, o := range finds {
			// In a whole file, a freed page is an earlier commit's for
			// certain: a higher checkpoint there was lowered since.
			if !st.whole && salvageHigher(o.id, r.Checkpoint) && (r.Higher == nil || salvageHigher(o.id, r.Higher)) {
				r.Higher, r.HigherPage = o.id, o.page
			}
		}
		if hidden != nil {
			h, ok := hidden[name]
			switch {
			case !ok:
				r.HiddenDeleted = true
			case !salvageSame(h, r.Checkpoint):
				r.Hidden = h
			}
		}
		out.Records = append(out.Records, r)
	}
	slices.SortFunc(out.Records, func(a, b SalvagedRecord) int { return strings.Compare(a.PChannel, b.PChannel) })
	slices.SortFunc(out.Ambiguous, func(a, b Ambiguity) int { return strings.Compare(a.PChannel, b.PChannel) })
	return out, nil
}

// quotedNames lists names quoted, a few of them.
func quotedNames(names []string) string {
	shown := make([]string, 0, 4)
	for _, n := range names[:min(len(names), 3)] {
		shown = append(shown, shorten.QuotedText(n))
	}
	if len(names) > 3 {
		shown = append(shown, fmt.Sprintf("and %d more", len(names)-3))
	}
	return strings.Join(shown, ", ")
}

// salvageSame reports whether a and b are one position of one WAL.
func salvageSame(a, b wal.MessageID) bool {
	c, err := wal.Compare(a, b)
	return err == nil && c == 0
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
	return pagedSize(data)
}

// pagedSize is the size at which the most pages of data say they are the
// page they are; 0 where none does, at any size.
func pagedSize(data []byte) int {
	le := binary.LittleEndian
	// bbolt takes any page size: the candidates are the sizes at which
	// the second meta page's header and magic number would lie, and the
	// usual powers of two.
	var sizes []int
	for size := 512; size <= maxSalvagePageSize; size <<= 1 {
		sizes = append(sizes, size)
	}
	second := binary.LittleEndian.AppendUint64(nil, 1)
	for off := minPageSize; off+pageHeaderSize+4 <= min(len(data), maxSalvagePageSize+pageHeaderSize+4); off++ {
		if bytes.Equal(data[off:off+8], second) && le.Uint16(data[off+8:]) == metaPageFlag && le.Uint32(data[off+pageHeaderSize:]) == boltMagic {
			sizes = append(sizes, off)
		}
	}
	best, bestScore := 0, 0
	for _, size := range sizes {
		if 2*size > len(data) {
			continue
		}
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

// maxSalvagePageSize is the largest page size a salvage looks for
// without a whole meta page to say it.
const maxSalvagePageSize = 1 << 16

// leaf reads the elements of a leaf page: records, and buckets (reading
// the page of a bucket kept inside its element). inline is the index in
// sc.buckets of the bucket whose element holds the page, -1 for a page of
// the file.
func (sc *salvageScan) leaf(id uint64, page []byte, inline int) {
	le := binary.LittleEndian
	count := sc.count(id, page, 4)
	// Buckets are taken once the page is read: a page that holds a
	// record holds no bucket (lowwater's buckets hold none, and the
	// top-level page no record), whatever an element looks like.
	var buckets []salvageBucket
	var values [][]byte
	flagged := 0 // of buckets, those flagged so: not counted damaged yet
	records := false
	defer func() {
		if records {
			sc.damaged[id] += flagged
			return
		}
		for i, b := range buckets {
			sc.buckets = append(sc.buckets, b)
			if b.root == 0 {
				sc.leaf(id, values[i][bucketHeaderSize:], len(sc.buckets)-1)
			}
		}
	}()
	var order elementOrder
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
		if !order.next(start, vEnd, key) {
			sc.damaged[id]++
		}
		if inline < 0 {
			sc.bound(id, j, key)
		}
		// An element's flag says whether it is a record or a bucket, and
		// one bit of damage turns either into the other: what its value
		// is decides. A whole record is a record; a bucket's header is
		// 16 bytes (no record is shorter than 21), or a page of its own
		// kept inline, and lowwater's buckets hold no bucket.
		h, ok, mid, err := record.Decode(string(key), value)
		name, under := string(key), ""
		if errors.Is(err, record.ErrAnotherPChannel) {
			// Whole but for its name, whose check names one name a byte
			// away from its key: its key was damaged. Read as that
			// name's, it is not left out for an older copy on a freed
			// page, which restored would lower the pchannel.
			if held, heldOK, heldID, idErr := record.DecodeMisplaced(value); heldOK {
				if check, checked := record.NameCheck(value); checked {
					if written := writtenFor(name, check); written != "" {
						h, ok, mid, err = held, true, heldID, idErr
						name, under = written, name
						sc.damaged[id]++
					}
				}
			}
		}
		whole := ok && err == nil
		flaggedBucket := flags&bucketLeafFlag != 0
		switch {
		case flaggedBucket != whole:
		case whole, inline < 0 && bucketHeader(value):
			sc.damaged[id]++ // a record flagged a bucket, or a bucket not flagged so
		case inline >= 0:
			sc.foreignInline[inline]++
		default:
			// No record: another program's value, or one of ours
			// damaged, which is told once the page's bucket is known.
			sc.foreign[id]++
		}
		switch {
		case whole:
			records = true
			sc.finds = append(sc.finds, salvageFind{key: name, page: id, inline: inline, h: h, id: mid, under: under})
		case inline < 0 && bucketHeader(value):
			b := salvageBucket{name: bytes.Clone(key), root: le.Uint64(value), page: id}
			switch seq := le.Uint64(value[8:]); {
			case seq == bucketMark(key):
				// Its own name's: what its name says, even where its mark
				// is the asked one's too (two names of one CRC-32).
				b.ours = bytes.Equal(key, sc.want)
			case seq == bucketMark(sc.want):
				b.ours = true // its name damaged
			case seq&^0xffffffff == bucketMarkTag:
				// Another name's mark: its name or its mark is damaged.
				// Bearing the asked name, it is ours only if no sound
				// bucket is (see salvage): one byte made a sibling's name
				// ours, and gave its records as ours.
				b.conflict = bytes.Equal(key, sc.want)
				sc.damaged[id]++
			default:
				// Unmarked: made before lowwater marked its buckets, or
				// another program's.
				b.ours = bytes.Equal(key, sc.want)
			}
			buckets, values = append(buckets, b), append(values, value)
			if flaggedBucket {
				flagged++
			}
		case flaggedBucket:
			sc.damaged[id]++ // neither
		}
	}
}

// bucketHeader reports whether value reads as a bucket's: its root page
// and sequence, and for a bucket kept inline (root 0), a leaf page.
func bucketHeader(value []byte) bool {
	le := binary.LittleEndian
	switch {
	case len(value) == bucketHeaderSize:
		return le.Uint64(value) >= 2
	case len(value) >= bucketHeaderSize+pageHeaderSize:
		return le.Uint64(value) == 0 && le.Uint16(value[bucketHeaderSize+8:]) == leafPageFlag
	}
	return false
}

// branch notes a branch page's children.
func (sc *salvageScan) branch(id uint64, page []byte) {
	le := binary.LittleEndian
	count := sc.count(id, page, 0)
	var order elementOrder
	for j := range count {
		e := pageHeaderSize + j*pageElementSize
		if e+pageElementSize > len(page) {
			sc.damaged[id] += count - j
			return
		}
		sc.children[id] = append(sc.children[id], le.Uint64(page[e+8:]))
		start := uint64(e) + uint64(le.Uint32(page[e:]))
		kEnd := start + uint64(le.Uint32(page[e+4:]))
		var key []byte
		if kEnd <= uint64(len(page)) {
			key = page[start:kEnd]
			sc.bound(id, j, key)
		}
		sc.keys[id] = append(sc.keys[id], key)
		if key == nil || !order.next(start, kEnd, key) {
			sc.damaged[id]++
		}
	}
}

// bound notes key, the j-th of page id's elements, as the page's first
// key or, so far, its last: the bounds the branch above it holds it to.
func (sc *salvageScan) bound(id uint64, j int, key []byte) {
	if j == 0 {
		sc.first[id] = key
	}
	sc.last[id] = key
}

// elementOrder checks a page's elements as bbolt lays them out: their
// keys strictly ascending, and their data end to end, each element's
// right after the one before. Damage that keeps every element's record
// whole can still break either (an offset made to point at the next
// element's record, which then reads twice and hides its own; a key made
// into its neighbour's): then look-ups through the page go astray, as
// bbolt's check and verify say, and the page counts as damaged.
type elementOrder struct {
	end  uint64
	last []byte
	seen bool
}

// next takes the element whose data runs from start to end, with key,
// and reports whether it follows the one before.
func (o *elementOrder) next(start, end uint64, key []byte) bool {
	ok := !o.seen || start == o.end && bytes.Compare(o.last, key) < 0
	o.end, o.last, o.seen = end, key, true
	return ok
}

// count is how many elements a leaf or branch page holds; posAt is where
// an element's header holds its key's offset (4 in a leaf's, after its
// flags; 0 in a branch's). bbolt lays the
// first key right after the last element's header, so the first
// element's offset tells their number too: where the page's count is
// lower, damaged, the elements past it are read all the same, and the
// page counts as damaged, so that their records are not taken for
// deleted.
func (sc *salvageScan) count(id uint64, page []byte, posAt int) int {
	le := binary.LittleEndian
	count := int(le.Uint16(page[10:]))
	if count == 0 || len(page) < pageHeaderSize+pageElementSize {
		return count
	}
	first := int(le.Uint32(page[pageHeaderSize+posAt:])) // the first element's key, from its header
	if first == count*pageElementSize {
		return count
	}
	sc.damaged[id]++
	if first%pageElementSize == 0 && first > count*pageElementSize && pageHeaderSize+first <= len(page) {
		return first / pageElementSize
	}
	return count
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

// pageStates is what the newest whole meta page says of the pages.
type pageStates struct {
	known        bool            // a meta page is whole
	tree         map[uint64]bool // what its tree reaches
	freed        map[uint64]bool // what its freelist frees, and the pages at and above its high water mark
	freelistRead bool
	contradicted bool   // the freelist frees a page the tree reaches
	whole        bool   // every page its tree reaches is a page, with no damaged element
	broken       string // why not whole, the first thing found
}

// breaks notes why the tree does not read whole, unless a reason is
// noted already.
func (st *pageStates) breaks(why string) {
	st.whole = false
	if st.broken == "" {
		st.broken = why
	}
}

func (st *pageStates) of(page uint64) PageState {
	inTree, onFreelist := st.tree[page], st.freed[page]
	switch {
	case !st.known:
		return PageUnknown
	case inTree && onFreelist:
		return PageUnknown // a damaged branch, or a damaged freelist
	case inTree:
		return PageLive
	case onFreelist, st.whole:
		return PageFreed
	case st.freelistRead && !st.contradicted:
		return PageLive // below the mark, freed by none: cut off by damage
	}
	return PageUnknown
}

// salvageStates reads the pages' states from meta, the newest whole meta
// page (known: there is one): the pages its tree reaches (the root's, and
// the trees of the buckets in them), and those its freelist frees.
func salvageStates(sc *salvageScan, data []byte, meta boltMeta, known bool, pageSize int, highWater uint64) *pageStates {
	st := &pageStates{known: known, tree: map[uint64]bool{}, freed: map[uint64]bool{}}
	if !known {
		return st
	}
	sc.reach(meta.root, st.tree)
	for grown := true; grown; {
		grown = false
		for _, b := range sc.buckets {
			if st.tree[b.page] && b.root != 0 && !st.tree[b.root] {
				sc.reach(b.root, st.tree)
				grown = true
			}
		}
	}
	for id := highWater; id < uint64(len(data)/pageSize); id++ {
		st.freed[id] = true
	}
	var freelistSpan uint64
	if meta.freelist == noFreelist {
		// The file keeps no freelist (bbolt's NoFreelistSync): bbolt
		// frees, as it opens it, every page below the mark that its
		// tree does not reach, and so does this, where the tree reads
		// whole.
		if st.treeBreak(sc, meta, highWater) == "" {
			covered := st.covered(sc, meta, highWater, 0)
			for id := uint64(2); id < highWater; id++ {
				if !covered[id] {
					st.freed[id] = true
				}
			}
			st.freelistRead = true
		}
	} else {
		st.freelistRead, freelistSpan = readFreelist(data, meta, pageSize, st.freed)
	}
	for id := range st.freed {
		if st.tree[id] {
			// The freelist frees a page the tree reaches: one of the two
			// is damaged (a branch pointed at a freed page, or an id of
			// the list changed into a live page's), and a page neither
			// names is no more surely live, cut off by damage, than
			// freed: a deleted pchannel came back as live.
			st.contradicted = true
			break
		}
	}
	st.whole = true
	switch {
	case !st.freelistRead && meta.freelist == noFreelist:
		st.breaks(st.treeBreak(sc, meta, highWater))
	case !st.freelistRead:
		st.breaks(fmt.Sprintf("its freelist, page %d, does not read whole", meta.freelist))
	default:
		if why := st.unaccounted(sc, meta, highWater, freelistSpan); why != "" {
			st.breaks(why)
		}
	}
	return st
}

// unaccounted says why the tree and the freelist do not account for
// every page as bbolt keeps them, or "" where they do: each page the
// tree reaches is a page, with no damaged element, below the high water
// mark, reached once and freed by no freelist; and each page below the
// mark is reached, freed, or the meta pages, the freelist or a page run
// over by one of several. A damaged count or pointer cuts a live page
// off the tree: without this, the page would be taken for one an
// earlier commit freed.
func (st *pageStates) unaccounted(sc *salvageScan, meta boltMeta, highWater, freelistSpan uint64) string {
	if why := st.treeBreak(sc, meta, highWater); why != "" {
		return why
	}
	covered := st.covered(sc, meta, highWater, freelistSpan)
	for id := uint64(2); id < highWater; id++ {
		if !covered[id] && !st.freed[id] {
			return fmt.Sprintf("page %d is neither in the tree nor freed: cut off by damage", id)
		}
	}
	return ""
}

// treeBreak says why a page the tree reaches is not what bbolt keeps:
// no page, or with damaged elements, at or past the high water mark,
// reached twice, freed by the freelist, or with keys outside its branch
// key's range. "" means the tree reads whole. Pages are looked at in
// order, so that the reason told is the same from run to run.
func (st *pageStates) treeBreak(sc *salvageScan, meta boltMeta, highWater uint64) string {
	refs := map[uint64]int{meta.root: 1}
	for _, id := range slices.Sorted(maps.Keys(st.tree)) {
		switch {
		case !sc.pages[id]:
			return fmt.Sprintf("page %d, in the tree, reads as no page", id)
		case sc.flags[id] != 0:
			return fmt.Sprintf("page %d, in the tree, is a leaf page whose type flag is damaged (it reads %#x)", id, sc.flags[id])
		case sc.damaged[id] > 0:
			return fmt.Sprintf("page %d, in the tree, has %d damaged %s", id, sc.damaged[id], plural(sc.damaged[id], "element"))
		case id >= highWater:
			return fmt.Sprintf("page %d, in the tree, lies past the last page the file counts (%d)", id, highWater-1)
		case st.freed[id]:
			return fmt.Sprintf("page %d, in the tree, is freed too", id)
		}
		keys := sc.keys[id]
		for i, child := range sc.children[id] {
			refs[child]++
			// The child's keys lie from its branch key to the next one,
			// as bbolt's check holds them: a key grown past its
			// neighbour's reads in order, and sends look-ups astray.
			if first := sc.first[child]; first != nil && bytes.Compare(first, keys[i]) < 0 {
				return fmt.Sprintf("branch page %d: page %d's first key lies below its branch key", id, child)
			}
			if last := sc.last[child]; last != nil && i+1 < len(keys) && bytes.Compare(last, keys[i+1]) >= 0 {
				return fmt.Sprintf("branch page %d: page %d's last key lies at or past the next branch key", id, child)
			}
		}
	}
	for _, b := range sc.buckets {
		if st.tree[b.page] && b.root != 0 {
			refs[b.root]++
		}
	}
	for _, id := range slices.Sorted(maps.Keys(refs)) {
		if refs[id] > 1 {
			return fmt.Sprintf("page %d is reached %d times in the tree", id, refs[id])
		}
	}
	return ""
}

// covered is the pages below the mark that the tree reaches, with the
// pages each runs over, and the freelist's freelistSpan pages.
func (st *pageStates) covered(sc *salvageScan, meta boltMeta, highWater, freelistSpan uint64) map[uint64]bool {
	// Each run is cut at the mark: a damaged overflow may count billions.
	covered := map[uint64]bool{}
	for id := range st.tree {
		for i := id; i <= id+sc.overflow[id] && i < highWater; i++ {
			covered[i] = true
		}
	}
	for i := uint64(0); i < freelistSpan && meta.freelist+i < highWater; i++ {
		covered[meta.freelist+i] = true
	}
	return covered
}

// readFreelist adds to freed the pages meta's freelist frees, and reports
// whether it could be read, and how many pages it takes.
func readFreelist(data []byte, meta boltMeta, pageSize int, freed map[uint64]bool) (ok bool, pages uint64) {
	if meta.freelist == noFreelist || meta.freelist < 2 || meta.freelist >= meta.pgid {
		return false, 0
	}
	le := binary.LittleEndian
	off := meta.freelist * uint64(pageSize)
	if off+uint64(pageSize) > uint64(len(data)) || le.Uint64(data[off:]) != meta.freelist || le.Uint16(data[off+8:]) != freelistPageFlag {
		return false, 0
	}
	pages = uint64(le.Uint32(data[off+12:])) + 1
	page := data[off:min(uint64(len(data)), off+pages*uint64(pageSize))]
	ids := page[pageHeaderSize:]
	n := uint64(le.Uint16(page[10:]))
	if n == freelistCountOverflow {
		if len(ids) < 8 {
			return false, 0
		}
		n, ids = le.Uint64(ids), ids[8:]
	}
	// bbolt writes the list sorted, below the mark, on as many pages as
	// it needs and no more: a list that is not so is damaged (a page of
	// it zeroed, a bit of its count), and the pages it no longer names
	// would be taken for live ones cut off the tree, deleted pchannels
	// among them. It sizes the list before it takes the list's own pages
	// out of it, so the pages may hold those ids more.
	need := func(n uint64) uint64 {
		size := uint64(pageHeaderSize) + n*8
		if n >= freelistCountOverflow {
			size += 8
		}
		return size/uint64(pageSize) + 1
	}
	if n > uint64(len(ids))/8 || pages < need(n) || pages > need(n+pages) {
		return false, 0
	}
	// bbolt writes the rest of the list's pages as zeros: an id after
	// the count says the count was lowered.
	for _, b := range ids[n*8:] {
		if b != 0 {
			return false, 0
		}
	}
	list := make([]uint64, n)
	for i := range n {
		id := le.Uint64(ids[i*8:])
		if id < 2 || id >= meta.pgid || i > 0 && id <= list[i-1] {
			return false, 0
		}
		list[i] = id
	}
	for _, id := range list {
		freed[id] = true
	}
	return true, pages
}

// plural is word as it goes with n: "element", "elements"; "is", "are".
func plural(n int, word string) string {
	switch {
	case n == 1:
		return word
	case word == "is":
		return "are"
	}
	return word + "s"
}
