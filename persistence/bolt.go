package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/lowwater/lowwater/internal/creation"
	"github.com/lowwater/lowwater/internal/shell"
	"github.com/lowwater/lowwater/persistence/internal/record"
	"github.com/lowwater/lowwater/wal"
)

// ErrLocked is returned by OpenBolt when another process, or another Bolt in
// this one, holds the file for longer than the open timeout. It wraps
// bbolt's timeout error.
var ErrLocked = errors.New("persistence: bolt file is locked by another process, or another Bolt in this one")

// ErrNotBolt is the ErrCorruptStore of a file that holds nothing of
// bbolt's: no meta page, and no page at any page size. Most likely the
// path is wrong; if the file was a catalog, nothing of it is left to
// salvage, and only a backup holds its checkpoints. Its text has no
// package prefix: it comes only inside an ErrCorruptStore naming the
// file, whose text has it.
var ErrNotBolt = errors.New("not a bbolt file")

// ErrReadOnly is returned by Save and Delete on a Bolt opened
// WithReadOnly(true), naming the file; nothing is written. Such a Bolt is
// for tools that read a store beside other readers; writing takes a Bolt
// opened without the option, which waits for the readers to close.
var ErrReadOnly = errors.New("persistence: bolt catalog is read-only")

// Bolt is the embedded Catalog: one bbolt file, one bucket, one record per
// pchannel.
//
// One call at a time goes into bbolt, and a call waits for its turn within
// its context; once in, it runs to its end, since bbolt cannot abandon a
// transaction half way (a durable put is about 0.2 ms). Under group
// commit (the default) a Save whose context ends while it waits for its
// batch returns the context's error at once, and its write stays in the
// batch: it may still commit, as a write whose answer was lost may, and a
// retry of the same value then succeeds. Close waits for that commit. A
// Save that finds no commit running and the file free commits its batch
// on its own goroutine: it is in bbolt then, and answers with the
// commit's outcome, past its deadline if need be.
//
// A damaged file is ErrCorruptStore, never a panic, never a hang and never
// an empty store: OpenBolt refuses an existing empty file and reads every
// page before it returns, and a later call that meets damage (bbolt panics
// on it) marks the Bolt damaged, after which every call returns that
// error, group commits included, and Close lets go of the file without
// bbolt.
//
// The lock is on the file that was opened, which a Bolt keeps writing:
// it does not follow a file moved, and it is not another file put at
// its path. So every commit looks at the path after it: where it no
// longer leads to the file open (deleted, renamed, or replaced by a copy
// moved there), the commit's saves, which no later open of the path would
// find, fail, and the Bolt is damaged (ErrCorruptStore, naming what
// happened) rather than acknowledge saves that are lost with the file.
type Bolt struct {
	db *bolt.DB
	// file is the file bbolt opened, kept for closeDB, and read as the
	// store's bytes (checkPages): the path may lead elsewhere by now.
	file *os.File
	// placed is file as it was found at path when opened, and placedAt
	// that path made absolute then, which a later change of the working
	// directory leaves as it was; nil and empty where they could not be
	// told (placedHere).
	placed   os.FileInfo
	placedAt string
	// pageSize is the store's, read at open: bbolt's own reading of it
	// may fault once the file is damaged (shortNow).
	pageSize int64
	path     string
	bucket   []byte
	// group gathers concurrent Saves into one commit; nil under
	// WithGroupCommit(false).
	group *groupCommit
	// readOnly refuses writes (WithReadOnly) before bbolt does, whose
	// refusal names neither the file nor a sentinel of this package.
	readOnly bool

	// calls admits calls and lets Close wait for those in flight, so that
	// none touches a closed db (enter, exit). A save StartSave started is
	// in flight until it is answered.
	calls    sync.Mutex
	closed   bool          // guarded by calls
	inFlight int           // guarded by calls
	drained  chan struct{} // guarded by calls; made by a Close that waits
	// released is closed once the first Close has let go of the file: a
	// Close after it, or beside it, returns ErrClosed then, so that
	// whoever opens the file next finds it free.
	released chan struct{}
	// misplaced holds the records found at open, or by a Load that found
	// nothing (findMisplaced), that may be another pchannel's (see
	// misplaced), by the key they are under: one of them may be the
	// record of a pchannel whose Load finds nothing, and Load then says
	// so rather than "nothing stored" (see notStored). Delete takes a
	// name off. verify fills it before the Bolt is returned, without the
	// lock.
	misplacedMu sync.Mutex
	misplaced   map[string]misplacedRecord // guarded by misplacedMu once shared
	// searches gathers the Loads that find nothing, to look for such
	// records together; searchesRun counts the passes (for tests).
	searches    searchRounds
	searchesRun atomic.Int64

	// turn lets one call at a time into bbolt, and lets a call wait for
	// its turn within its context. A panic inside bbolt (damage, see
	// guard) may leave a lock of bbolt's held for good, and a call already
	// waiting on that lock would never return; waiting here instead, the
	// next call finds the Bolt damaged and refuses. Writers take turns in
	// bbolt anyway; reads (recovery, tools) are few, and wait for a commit.
	turn chan struct{}

	// damaged holds the ErrCorruptStore of the first bbolt panic. From then
	// on every call returns it: a panic may have left a write transaction
	// half applied in memory, and writing on over a damaged file could lose
	// what it still holds.
	damaged atomic.Pointer[error]
	// seenTx is the latest commit this Bolt read or wrote (bbolt's txid):
	// the file read as an earlier one has gone back (view, update).
	seenTx atomic.Uint64
	// damagedNow is closed when damaged is set.
	damagedNow chan struct{}
}

var _ SaveStarter = (*Bolt)(nil)

// BoltOption configures OpenBolt.
type BoltOption interface{ apply(*boltOptions) }

type boltOptions struct {
	bucket      string
	openTimeout time.Duration
	noSync      bool
	group       bool
	groupDelay  time.Duration
	readOnly    bool
	existing    bool
	intactMeta  bool
}

// applyBoltOptions applies opts to the defaults and checks what every
// use of a file needs: a bucket, and a bound on the wait for its lock.
func applyBoltOptions(opts []BoltOption) (boltOptions, error) {
	o := defaultBoltOptions()
	for _, opt := range opts {
		if opt == nil {
			return o, fmt.Errorf("%w: nil bolt option", ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	if o.bucket == "" {
		return o, fmt.Errorf("%w: empty bolt bucket name", ErrInvalidArgument)
	}
	if o.openTimeout <= 0 {
		return o, fmt.Errorf("%w: bolt open timeout %v is not positive", ErrInvalidArgument, o.openTimeout)
	}
	return o, nil
}

type boltOptionFunc func(*boltOptions)

func (f boltOptionFunc) apply(o *boltOptions) { f(o) }

// DefaultBucket is the bucket that holds the records without WithBucket.
const DefaultBucket = "lowwater-checkpoints"

// WithBucket names the bucket that holds the records, so that one file can
// serve several independent catalogs over time. Default DefaultBucket.
// Each bucket carries a mark of its name, by which a damaged name is told
// from a sibling's however close the two: "tenant-0" and "tenant-1" may
// share a file. A bucket made before the marks (an older lowwater) is
// marked by the first writer's OpenBolt; until then, a new name one bit
// from it is refused as its name damaged (ErrCorruptStore).
func WithBucket(name string) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.bucket = name })
}

// WithOpenTimeout bounds how long OpenBolt waits for the file lock held by
// another process or another Bolt; after it OpenBolt fails with ErrLocked
// instead of hanging. Default 1s; it must be positive, since bbolt reads
// zero as "wait forever".
func WithOpenTimeout(d time.Duration) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.openTimeout = d })
}

// WithNoSync skips the fsync of every commit. It is for benchmarks only: a
// save that returned nil may be lost by a crash, which breaks the Catalog
// contract. Default false.
func WithNoSync(noSync bool) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.noSync = noSync })
}

// WithGroupCommit(false) gives each Save a write transaction and an fsync
// of its own, one after another, as bbolt's DB.Update does: at 1,000
// pchannels saving together about a hundredth of the saves per second of
// group commit, the default, for no gain in durability.
//
// Under group commit, concurrent Saves share one write transaction and
// one fsync: many pchannels advancing together cost a few commits instead
// of one each. Every Save still returns only after the transaction holding
// its write committed, so the durability promise is unchanged, and the
// never-lower check still runs inside that transaction. A save joins the
// next commit: at once when none is running, and otherwise with the saves
// that come while the one running syncs (up to 1000 a transaction): a
// lone save waits for no one, and under load each commit carries what
// came during the one before. WithGroupCommitDelay makes a batch wait for
// more saves instead, as bbolt's DB.Batch does. Default true.
func WithGroupCommit(enabled bool) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.group = enabled })
}

// WithGroupCommitDelay makes a batch under group commit wait for more
// saves: it commits once it holds 1000, or once d has passed since its
// first save, as bbolt's DB.Batch does with its MaxBatchDelay (10 ms by
// default there). A save then waits up to d, and then for the commits
// before its own, unless its context ends first, and so does Close for
// the saves in flight. Fewer, fuller commits for a longer wait: at 1,000
// pchannels or fewer, a batch seldom fills, and nearly every save waits
// the whole delay. Default 0: no wait, a batch commits as soon as the
// commit before it has; d must be at most MaxGroupCommitDelay.
func WithGroupCommitDelay(d time.Duration) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.groupDelay = d })
}

// WithReadOnly opens the file for reading only, under a shared lock, for
// tools that inspect a store: several readers may open it at once, none
// while a writer holds it (OpenBolt then fails with ErrLocked after the
// open timeout). The file must exist and hold the bucket. Save and Delete
// fail with ErrReadOnly. Default false.
func WithReadOnly(readOnly bool) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.readOnly = readOnly })
}

// WithIntactMeta makes OpenBolt refuse a file with a damaged meta page
// that may have held its last commit (see DamagedMeta: one that held the
// commit before the one read hides nothing, and opens) with a
// *MetaDamageError, before anything is written: for a node that would
// rather stop than run on a file that may have lost its last commit,
// which its first save would make for good. Default false: the file
// opens as bbolt opens it.
func WithIntactMeta(required bool) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.intactMeta = required })
}

// WithExistingBucket makes OpenBolt of a file without the bucket fail, as
// a read-only open does, instead of creating it: for a tool that writes
// to a catalog named by a person, where a mistyped bucket must not become
// a new, empty catalog beside the real one. A file that does not exist is
// still created. Default false.
func WithExistingBucket(existing bool) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.existing = existing })
}

// MaxGroupCommitDelay is the longest delay WithGroupCommitDelay takes: a
// save whose deadline comes before its batch commits fails, though its
// write may commit after, so the delay must stay well inside any sensible
// save timeout.
const MaxGroupCommitDelay = time.Second

func defaultBoltOptions() boltOptions {
	return boltOptions{bucket: DefaultBucket, openTimeout: time.Second, group: true}
}

// OpenBolt opens or creates the bbolt file at path. The file stays locked
// until Close. A new file is made whole beside path, under a temporary
// name (".NAME.lowwater-new-*"), and then linked into place: no other
// process ever finds it empty, and a creation that fails leaves nothing
// (one killed leaves the temporary file, which a later open that may
// write removes once a minute old). So give it a
// path that does not exist yet, not one from os.CreateTemp: an existing
// empty file is refused (ErrCorruptStore), since a truncated catalog
// must not become an empty one. An empty path, a nil option or one out
// of range is an error wrapping ErrInvalidArgument, and nothing is opened.
//
// A file with one meta page damaged (a flipped byte, a page torn to
// zeros) opens, with no error, as of the other page's commit, as bbolt
// opens it: a crash that tore the last commit's write leaves a file so,
// and that commit was never acknowledged. Damaged later, the file reads
// without that commit's saves, and the next commit makes it for good. A
// node that must tell the two apart asks DamagedMeta after it opens, or
// opens the file WithIntactMeta.
func OpenBolt(path string, opts ...BoltOption) (*Bolt, error) {
	o, err := applyBoltOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.groupDelay < 0 || o.groupDelay > MaxGroupCommitDelay {
		return nil, fmt.Errorf("%w: bolt group commit delay %v is not in [0, %v]", ErrInvalidArgument, o.groupDelay, MaxGroupCommitDelay)
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	// The bucket must be there already when reading, or when asked to on
	// a file that exists: through a link, its target (a link to nothing
	// yet is where a new store is made; see creation.Path).
	_, statErr := os.Stat(path)
	mustHaveBucket := o.readOnly || o.existing && !errors.Is(statErr, os.ErrNotExist)
	db, file, err := openBoltDB(path, o)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s: not released within %v: %w", ErrLocked, path, o.openTimeout, err)
	}
	if errors.Is(err, ErrCorruptStore) {
		return nil, err
	}
	// bbolt reports a file shorter than its two meta pages with a plain
	// fmt.Errorf ("file size too small"), no sentinel: matched by its text.
	if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) ||
		errors.Is(err, bolterrors.ErrVersionMismatch) ||
		(err != nil && strings.Contains(err.Error(), "file size too small")) {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorruptStore, path, err)
	}
	if err != nil {
		return nil, openError(path, err)
	}
	b := &Bolt{db: db, file: file, path: path, bucket: []byte(o.bucket), readOnly: o.readOnly, misplaced: map[string]misplacedRecord{},
		turn: make(chan struct{}, 1), damagedNow: make(chan struct{}), released: make(chan struct{})}
	if info, err := file.Stat(); err == nil {
		if at, err := filepath.Abs(path); err == nil {
			b.placed, b.placedAt = info, at
		}
	}
	b.pageSize = int64(db.Info().PageSize)
	if o.intactMeta {
		d, err := b.DamagedMeta()
		// A page that held the commit before the one read hides nothing:
		// it was damaged after it was superseded.
		if err == nil && d != nil && !(d.Known && !d.Newer) {
			err = &MetaDamageError{Path: path, Damage: *d}
		}
		if err != nil {
			_ = b.closeDB()
			return nil, err
		}
	}
	if o.group {
		b.group = &groupCommit{delay: o.groupDelay, commit: b.commit, tell: func(bt *batch) { b.tell(bt, 0, 0) }}
	}
	err = b.guard("open", func() error {
		if err := b.verify(); err != nil {
			return err
		}
		if mustHaveBucket {
			// Nothing to write: an open that only reads (the tool's
			// refused or unchanged set) leaves the file as it was.
			return nil
		}
		if marked, ok := b.bucketMarked(); ok {
			if marked {
				return nil
			}
			// A bucket made before buckets were marked, once.
			return db.Update(func(tx *bolt.Tx) error { return tx.Bucket(b.bucket).SetSequence(bucketMark(b.bucket)) })
		}
		return db.Update(func(tx *bolt.Tx) error {
			// A new, empty bucket beside the damaged one would make every
			// Load say "nothing stored".
			if damaged, how := damagedBucket(tx, b.bucket); how != noDamage {
				return damagedBucketError(path, b.bucket, damaged, how)
			}
			// A fresh file has committed one transaction (bbolt's own, at
			// its making), and the bucket is made by the next: a file
			// that has committed more and holds no bucket at all lost
			// its root (a damaged page count drops a small store's bucket,
			// kept inside the root page).
			if first, _ := tx.Cursor().First(); tx.ID() > 2 && first == nil {
				return fmt.Errorf("%w: %s: no bucket, though %d transactions were committed to it: its root is damaged, "+
					"or its buckets were deleted (for a new catalog, give a path that does not exist)",
					ErrCorruptStore, path, tx.ID()-1)
			}
			bucket, err := tx.CreateBucket(b.bucket)
			if err != nil {
				return fmt.Errorf("create bucket %q: %w", o.bucket, err)
			}
			return bucket.SetSequence(bucketMark(b.bucket))
		})
	})
	if err != nil {
		_ = b.closeDB()
		if errors.Is(err, ErrCorruptStore) {
			return nil, err
		}
		// Reading it may fail too (too many open files, say): the
		// bucket's making is named only where it failed.
		return nil, openError(path, err)
	}
	if mustHaveBucket {
		if err := b.checkBucket(path); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// bucketMark is what a catalog's bucket holds as its sequence (which
// bbolt keeps in the bucket's header, apart from its name, and lowwater
// does not otherwise use): a sum of its name. A bucket whose mark is
// another name's had its name damaged, by any number of bits; a sibling
// catalog's bucket carries its own name's, however close the names.
func bucketMark(name []byte) uint64 {
	return bucketMarkTag | uint64(crc32.ChecksumIEEE(name))
}

// bucketMarkTag is the high half of every bucketMark: "lwmk", which no
// counter reaches.
const bucketMarkTag = uint64(0x6c776d6b) << 32

// damagedBucket is a bucket of tx that may hold want's records under a
// damaged name, and how it was told (noDamage if there is none). A
// bucket marked as want is sure to. So may one whose mark is no name's
// it bears, and that holds lowwater's records: its name or its mark is
// damaged, or both (a bit of each), and which catalog it was cannot be
// told. A bucket made before buckets were marked is taken for one if its
// name is one bit from want's: damage often stops there, and a person
// naming a sibling seldom does.
func damagedBucket(tx *bolt.Tx, want []byte) (found []byte, how bucketDamage) {
	_ = tx.ForEach(func(name []byte, bucket *bolt.Bucket) error {
		switch seq := bucket.Sequence(); {
		case seq == bucketMark(name):
			// Its own name's: a sibling, even one whose mark is want's
			// too (two names of one CRC-32).
		case seq == bucketMark(want):
			found, how = slices.Clone(name), markedAsWant
			return errStop
		case seq != 0 && seq != bucketMark(name) && holdsRecords(bucket):
			found, how = slices.Clone(name), markedAsNone
			return errStop
		case seq == 0 && len(name) == len(want) && flippedBits(name, want) == 1:
			found, how = slices.Clone(name), unmarkedNear
		}
		return nil
	})
	return found, how
}

// bucketDamage is how damagedBucket told a bucket damaged.
type bucketDamage int

const (
	noDamage     bucketDamage = iota
	markedAsWant              // its mark is the name asked for: sure
	markedAsNone              // its mark is not its name's, and it holds records
	unmarkedNear              // unmarked, one bit from the name asked for
)

// holdsRecords reports whether bucket holds a record lowwater wrote.
func holdsRecords(bucket *bolt.Bucket) bool {
	c := bucket.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			if _, readable, _, _ := record.Decode(string(k), v); readable {
				return true
			}
		}
	}
	return false
}

// damagedBucketError says that the bucket want may be under the name
// found.
func damagedBucketError(path string, want, found []byte, how bucketDamage) error {
	switch how {
	case markedAsWant:
		return fmt.Errorf("%w: %s: no bucket %q, but one named %q that holds its records: its name is damaged",
			ErrCorruptStore, path, want, found)
	case markedAsNone:
		return fmt.Errorf("%w: %s: no bucket %q, but one named %q that holds lowwater's records under a mark that is not its name's: "+
			"its name or its mark is damaged", ErrCorruptStore, path, want, found)
	}
	return fmt.Errorf("%w: %s: no bucket %q, but one named %q, one bit away, made before lowwater marked its buckets: "+
		"its name is damaged (or, if it is another catalog's, name yours further from it)", ErrCorruptStore, path, want, found)
}

// errStop ends a ForEach early.
var errStop = errors.New("stop")

// flippedBits counts the bits a and b, of one length, differ in.
func flippedBits(a, b []byte) int {
	n := 0
	for i := range a {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

// bucketMarked reports whether the file holds the bucket already, and if
// so whether it is marked (bucketMark).
func (b *Bolt) bucketMarked() (marked, ok bool) {
	_ = b.view(func(tx *bolt.Tx) error {
		if bucket := tx.Bucket(b.bucket); bucket != nil {
			ok, marked = true, bucket.Sequence() == bucketMark(b.bucket)
		}
		return nil
	})
	return marked, ok
}

// checkPath refuses, before bbolt sees it, a path that bbolt would
// misreport or misuse. A directory: bbolt opened read-write fails to open
// it ("is a directory"), but opened read-only it opens it and then reports
// an invalid database, which would send an operator to restore a backup
// over a mistyped path; both modes get the read-write error. An existing
// empty file: bbolt would lay out a fresh store over it, and a checkpoint
// store that was there must not silently become an empty one. Any other
// path, missing or unreadable, is left for bbolt to open or report.
func checkPath(path string) error {
	if path == "" {
		return fmt.Errorf("%w: empty bolt file path", ErrInvalidArgument)
	}
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return nil
	case info.IsDir(): // before the size: a directory may have size 0
		return openError(path, &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR})
	case !info.Mode().IsRegular():
		// A device, a pipe or a socket (/dev/null reads as empty): bbolt
		// would lay a store over it, or fail on its first mmap.
		return openError(path, fmt.Errorf("not a regular file: %w", fs.ErrInvalid))
	case info.Size() == 0:
		return fmt.Errorf("%w: %s: the file is empty, which a truncated catalog may be; "+
			"a new catalog is laid out only at a path where no file exists", ErrCorruptStore, path)
	}
	return nil
}

// openError is the failure to open the file at path, for a cause that
// says nothing about the store's contents.
func openError(path string, err error) error {
	return fmt.Errorf("persistence: open bolt file %s: %w", path, err)
}

// openBoltDB opens the store at path; one that does not exist yet is made
// whole first (createBoltDB), unless read-only.
func openBoltDB(path string, o boltOptions) (*bolt.DB, *os.File, error) {
	// Not on Windows, where a file open elsewhere cannot lose a name.
	if !o.readOnly && runtime.GOOS != "windows" {
		if at, ok := creation.Path(path); ok {
			db, file, placed, err := createBoltDB(at, o)
			if err != nil || placed {
				if placed {
					creation.RemoveStale(at)
				}
				return db, file, err
			}
		}
	}
	db, file, err := openBoltFile(path, o)
	if err == nil && !o.readOnly {
		if at, err := filepath.EvalSymlinks(path); err == nil {
			creation.RemoveStale(at)
		}
	}
	return db, file, err
}

// createBoltDB makes a new store whole under a temporary name beside path,
// then links it into place. No other process then ever finds the file
// empty, which OpenBolt calls damaged (two nodes, or the tool, creating it
// at once), and a creation that fails (a full disk) leaves nothing behind:
// the empty file it left used to be called damaged by the next start,
// sending the operator to look for a backup of a store that never held
// anything. placed is false, with no error, when path appeared meanwhile
// (another process put its file there first), and on a file system
// without hard links: the caller then opens path as bbolt would.
func createBoltDB(path string, o boltOptions) (db *bolt.DB, file *os.File, placed bool, err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, creation.TempPrefix(path))
	if err != nil {
		// The temporary name is ours, not the caller's: name theirs.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = &fs.PathError{Op: "create", Path: path, Err: pe.Err}
		}
		// Not every ENOENT is a missing directory (/proc refuses to
		// create a file so): say so only when it is.
		if errors.Is(err, fs.ErrNotExist) {
			if _, statErr := os.Stat(dir); errors.Is(statErr, fs.ErrNotExist) {
				err = fmt.Errorf("%w: the directory %s does not exist", err, dir)
			}
		}
		return nil, nil, false, err
	}
	tmp := f.Name()
	_ = f.Close()
	defer os.Remove(tmp) // once linked, path keeps the file
	if db, file, err = openBoltFile(tmp, o); err != nil {
		return nil, nil, false, err
	}
	// The bucket too, before the file is placed: a process killed between
	// the two left a file without it, which a node took for a new store,
	// and the tool, restore included, for another program's.
	err = db.Update(func(tx *bolt.Tx) error {
		bucket, err := tx.CreateBucket([]byte(o.bucket))
		if err != nil {
			return err
		}
		return bucket.SetSequence(bucketMark([]byte(o.bucket)))
	})
	if err != nil {
		_ = db.Close()
		return nil, nil, false, fmt.Errorf("persistence: create bucket %q in %s: %w", o.bucket, path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		_ = db.Close()
		return nil, nil, false, nil
	}
	return db, file, true, nil
}

// openBoltFile is bolt.Open with its panics (and faults reading the mapped
// file) turned into ErrCorruptStore. bbolt reads the freelist inside Open,
// so a damaged or truncated file panics there, before there is a DB to
// close: the file it opened is unlocked and closed here instead. Its
// mapping stays (bbolt keeps it unexported): a leak of one mapping of a
// damaged file per failed open.
//
// The error names the damage checkPages finds in the file's bytes, as
// opening it read-only does (a file shorter than its pages, a page that
// says it is another): a nil pointer dereference inside bbolt tells an
// operator nothing but that something is wrong with the program. Only
// when it finds none is the panic the message.
func openBoltFile(path string, o boltOptions) (db *bolt.DB, file *os.File, err error) {
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		if err == nil && lockedFiles {
			err = checkBeforeOpen(f, path, o)
		}
		return f, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if file != nil {
				unlockFile(file)
				_ = file.Close()
			}
			db, file, err = nil, nil, fmt.Errorf("%w: %s: open: bbolt failed on a damaged page (it panicked: %v)", ErrCorruptStore, path, p)
			if damage := pageDamage(path); damage != nil {
				err = fmt.Errorf("%w: %s: %w", ErrCorruptStore, path, damage)
			}
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: o.openTimeout, NoSync: o.noSync, ReadOnly: o.readOnly, OpenFile: openFile})
	if err != nil {
		return nil, nil, err
	}
	return db, file, nil
}

// checkBeforeOpen takes bbolt's lock on f, which bolt.Open is about to
// open, and checks its pages before bbolt reads them: a writer's Open
// reads the freelist page at once, and a freelist that counts more pages
// than the file holds makes it allocate terabytes, which ends the process
// where no recover reaches. Under the lock, no writer is between two
// writes of the file. An empty file is bbolt's to make a store of, or
// OpenBolt's to call damaged. Where files are not locked with flock (not
// unix), the pages are checked only once bbolt has opened the file, and
// such a freelist still ends the process.
func checkBeforeOpen(f *os.File, path string, o boltOptions) error {
	if err := lockFile(f, !o.readOnly, o.openTimeout); err != nil {
		return err
	}
	info, err := f.Stat()
	if err != nil || info.Size() == 0 {
		return err
	}
	data, unmap, err := mapFile(f, info.Size())
	if err != nil {
		return fmt.Errorf("persistence: read bolt file %s: %w", path, err)
	}
	defer unmap()
	if err := checkPages(data); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorruptStore, path, err)
	}
	return nil
}

// pageDamage is what checkPages finds wrong with the file at path, or nil
// if it finds nothing or cannot read it. It runs inside openBoltFile's
// recover, where a panic of its own would escape: checkPages reads the
// file's bytes with every index checked, and should one be missed, the
// panic is taken for finding nothing.
func pageDamage(path string) (damage error) {
	defer func() {
		if recover() != nil {
			damage = nil
		}
	}()
	data, unmap, err := mapPath(path)
	if err != nil {
		return nil
	}
	defer unmap()
	return checkPages(data)
}

// mapPath maps the file at path whole (mapFile).
func mapPath(path string) (data []byte, unmap func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }() // the mapping outlives it
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	return mapFile(f, info.Size())
}

// verify reads every page a catalog can reach before the store is used,
// so that damage is reported when the store opens, not by a save at some
// later hour: the file must hold every page its metadata counts (a
// truncated copy does not), every key and value of every bucket must be
// readable (under guard, so a damaged page panics here), and bbolt's own
// consistency check must pass (it finds free pages still in use, which a
// later write would overwrite).
func (b *Bolt) verify() error {
	info, err := b.file.Stat()
	if err != nil {
		return fmt.Errorf("persistence: stat bolt file %s: %w", b.path, err)
	}
	return b.view(func(tx *bolt.Tx) error {
		if need := tx.Size(); info.Size() < need {
			return fmt.Errorf("%w: %s: the file has %d bytes, its pages need %d: truncated",
				ErrCorruptStore, b.path, info.Size(), need)
		}
		if !lockedFiles { // else checked already, before bbolt read it
			if err := b.checkPages(context.Background()); err != nil {
				return err
			}
		}
		var touched byte
		err := tx.ForEach(func(name []byte, bucket *bolt.Bucket) error {
			return bucket.ForEach(func(k, v []byte) error {
				if v == nil && bytes.Equal(name, b.bucket) {
					// No catalog makes a bucket inside its bucket: this
					// one is damage (a flipped flag) or another program's,
					// and Load would read its key as nothing stored.
					// Another program's bucket may hold buckets of its
					// own: a catalog opened on it (WithBucket) says so.
					return fmt.Errorf("%w: %s: bucket %q holds a bucket at key %q, which no catalog writes",
						ErrCorruptStore, b.path, name, k)
				}
				// The last byte of each: a size or position damaged to
				// point past the mapped file faults here, under guard.
				if len(k) > 0 {
					touched ^= k[len(k)-1]
				}
				if len(v) > 0 {
					touched ^= v[len(v)-1]
				}
				if bytes.Equal(name, b.bucket) {
					if misplaced(k, v) {
						b.misplaced[string(k)] = misplacedOf(v)
					}
				}
				return nil
			})
		})
		runtime.KeepAlive(touched)
		if err != nil {
			return err
		}
		data, unmap, err := b.mapOpen()
		if err != nil {
			return err
		}
		damaged := metaHeaderDamaged(data)
		unmap()
		if damaged {
			// bbolt's check would fail on the damaged meta page that
			// bbolt reads around; checkPages walked the rest.
			return nil
		}
		var first error
		// Drained to the end: Check's goroutine must finish. It runs on a
		// goroutine of bbolt's, where a read past the mapped file is a
		// fault no guard can catch: it names keys by their length alone,
		// rather than reading a key whose damaged size runs past the file.
		for err := range tx.Check(bolt.WithKVStringer(sizeOnly{})) {
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return fmt.Errorf("%w: %s: consistency check: %w", ErrCorruptStore, b.path, first)
		}
		return nil
	})
}

// checkPages checks the structure of the file's pages before bbolt walks
// them (see the function checkPages), reading the file, not bbolt's
// mapping, which may be stale, and gives up when ctx ends. A page the
// file no longer holds is damage.
func (b *Bolt) checkPages(ctx context.Context) (err error) {
	data, unmap, err := b.mapOpen()
	if err != nil {
		return err
	}
	defer unmap()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: reading its pages: %v (truncated while open?)", ErrCorruptStore, b.path, p)
		}
	}()
	if err := checkPagesUntil(data, ctx.Err); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return err
		}
		return fmt.Errorf("%w: %s: %w", ErrCorruptStore, b.path, err)
	}
	return nil
}

// mapOpen maps the file the Bolt has open, whole: its bytes, whatever
// its path leads to now, and no file opened again (a pchannel's first
// Load took one more descriptor, which a node short of them could not).
func (b *Bolt) mapOpen() (data []byte, unmap func(), err error) {
	info, err := b.file.Stat()
	if err == nil {
		data, unmap, err = mapFile(b.file, info.Size())
	}
	if err != nil {
		return nil, nil, fmt.Errorf("persistence: read bolt file %s: %w", b.path, err)
	}
	return data, unmap, nil
}

// sizeOnly names the keys and values in bbolt's consistency check errors
// by their length, without reading them.
type sizeOnly struct{}

func (sizeOnly) KeyToString(k []byte) string   { return fmt.Sprintf("<a key of %d bytes>", len(k)) }
func (sizeOnly) ValueToString(v []byte) string { return fmt.Sprintf("<a value of %d bytes>", len(v)) }

// guard runs a call into bbolt. bbolt panics on damaged pages (and the
// runtime faults on a mapped page the file no longer holds); guard turns
// either into ErrCorruptStore naming the file, and marks the Bolt damaged
// so that every later call returns that error without touching the file.
// Nothing else run under it may panic, since any panic is taken for damage:
// the calls it makes into a registered ID type's code, decoding a stored ID
// and comparing it with a new one (admit), go through wal.Unmarshal and
// wal.Compare, which return such a panic as an error.
func (b *Bolt) guard(op string, call func() error) (err error) {
	if damaged := b.damaged.Load(); damaged != nil {
		return *damaged
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			// A variable of its own: taking err's address would move it
			// to the heap on every call, not only on a panic.
			err = b.markDamaged(fmt.Errorf("%w: %s: %s: bbolt failed on a damaged page (it panicked: %v)%s", ErrCorruptStore, b.path, op, p, b.shortNow()))
		}
	}()
	return call()
}

// shortNow says, for a panic inside bbolt, that the open file is now
// shorter than the smallest store (its two meta pages, a freelist and a
// root): truncated under the Bolt, which bbolt meets as a nil pointer or
// a fault, saying nothing of the file. Empty otherwise.
func (b *Bolt) shortNow() string {
	info, err := b.file.Stat()
	if err != nil || info.Size() >= 4*b.pageSize {
		return ""
	}
	return fmt.Sprintf(" (the file is %d bytes now: truncated while open?)", info.Size())
}

// view runs fn in a read transaction, and update in a write transaction,
// of the file as of the latest commit this Bolt read or wrote, or later.
// The file read as an earlier one has gone back under the Bolt: its
// newest meta page damaged (bbolt then reads the one before, which names
// the commit before), or the file overwritten by an older copy. A Load
// would return a checkpoint below one acknowledged, and a save would
// write over the commit lost; both are refused as damage, for good.
func (b *Bolt) view(fn func(*bolt.Tx) error) error {
	floor := b.seenTx.Load() // before the transaction: a commit after it may come first
	return b.db.View(func(tx *bolt.Tx) error {
		if err := b.reads(uint64(tx.ID()), floor); err != nil {
			return err
		}
		return fn(tx)
	})
}

func (b *Bolt) update(fn func(*bolt.Tx) error) error {
	floor := b.seenTx.Load()
	var id uint64
	err := b.db.Update(func(tx *bolt.Tx) error {
		id = uint64(tx.ID())
		if err := b.reads(id-1, floor); err != nil { // a write's id is the commit it reads, plus one
			return err
		}
		return fn(tx)
	})
	if err == nil {
		b.saw(id)
		err = b.placedHere()
	}
	return err
}

// placedHere reports, as the Bolt's damage, that its path no longer leads
// to the file it has open, checked after each commit and before its saves
// are answered: a file deleted or renamed under it (a cleanup script) or
// replaced by another moved to its path (an older copy) keeps taking
// commits, which no later open of the path finds; a node restarted there
// started from nothing, or from the copy, below what was acknowledged. A
// stat that fails otherwise tells nothing, and is let be. The file may
// still move between the look and the answer: the next commit tells.
func (b *Bolt) placedHere() error {
	if b.placed == nil {
		return nil
	}
	info, err := os.Stat(b.placedAt)
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		what = "was deleted or renamed"
	case err != nil, os.SameFile(info, b.placed):
		return nil
	default:
		what = "was replaced by another file"
	}
	// The path made absolute: a relative one says nothing once the
	// working directory has changed.
	advice := "stop the node, put the file back where it was (or restore the newest copy), and restart"
	if what == "was deleted or renamed" && unlinked(b.file) {
		// Deleted: the file this process holds open is the only copy of
		// the saves, and goes when the process ends.
		what, advice = "was deleted", "that file is gone once this process ends: copy it back before you stop the node"
		if runtime.GOOS == "linux" {
			advice += fmt.Sprintf(" (cp -p /proc/%d/fd/%d %s), then restart", os.Getpid(), b.file.Fd(), shell.Word(b.placedAt))
		} else {
			advice += ", from the descriptor this process holds, then restart; or restore the newest copy"
		}
	}
	return b.markDamaged(fmt.Errorf("%w: %s %s while open: the saves since are in the file that was open, which no later open "+
		"of this path finds; %s", ErrCorruptStore, b.placedAt, what, advice))
}

// reads checks that a transaction reads a commit, id, no earlier than
// floor, the latest read or written before it began, and records it.
func (b *Bolt) reads(id, floor uint64) error {
	if id < floor {
		return b.markDamaged(fmt.Errorf("%w: %s: the file reads as of commit %d, before commit %d, which this process read or wrote: "+
			"its newest meta page was damaged under it, or the file was overwritten", ErrCorruptStore, b.path, id, floor))
	}
	b.saw(id)
	return nil
}

// saw records that commit id was read or written.
func (b *Bolt) saw(id uint64) {
	for {
		seen := b.seenTx.Load()
		if id <= seen || b.seenTx.CompareAndSwap(seen, id) {
			return
		}
	}
}

// markDamaged makes damage, an ErrCorruptStore, the answer to every call
// from now on, unless damage was met before: it returns the first.
func (b *Bolt) markDamaged(damage error) error {
	if b.damaged.CompareAndSwap(nil, &damage) {
		close(b.damagedNow)
	}
	return *b.damaged.Load()
}

// Load implements Catalog.
func (b *Bolt) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.exit()
	if err := checkLoadArgs(pchannel); err != nil {
		return nil, err
	}
	id, found, err := b.lookUp(ctx, pchannel)
	if err != nil || found {
		return id, err
	}
	if err := b.searchMisplaced(ctx); err != nil {
		return nil, err
	}
	return nil, b.notStored(pchannel)
}

// lookUp reads the record of pchannel, in its turn.
func (b *Bolt) lookUp(ctx context.Context, pchannel string) (id wal.MessageID, found bool, err error) {
	if err := b.takeTurn(ctx); err != nil {
		return nil, false, err
	}
	defer b.releaseTurn()
	err = b.guard("load", func() error {
		return b.view(func(tx *bolt.Tx) error {
			raw := tx.Bucket(b.bucket).Get([]byte(pchannel))
			if raw == nil {
				return nil
			}
			found = true
			var err error
			id, err = decodeStored(pchannel, raw)
			return locate(b.path, err)
		})
	})
	if err != nil {
		return nil, false, err
	}
	return id, found, nil
}

// searchRounds gathers the Loads that found nothing into rounds, each
// answered by one pass of findMisplaced. A pass takes milliseconds per
// 10,000 records, in the file's turn: a node that started a thousand new
// pchannels beside 10,000 records made one pass each, and a save of any
// other pchannel of the file waited 2.8 s behind them.
//
// A round gathers Loads until one of them gets the turn and begins it;
// Loads that find nothing after that wait for the next round. So every
// Load is answered by a pass begun after it found nothing, as if it had
// made its own.
type searchRounds struct {
	mu   sync.Mutex
	next *searchRound // guarded by mu; not begun yet
}

type searchRound struct {
	done   chan struct{}
	joined int // guarded by searchRounds.mu: the Loads waiting on it
	// err is the pass's outcome, set before done closes: errSearchCut
	// when the context of the Load that ran it ended first, which
	// answers no other Load.
	err error
}

var errSearchCut = errors.New("search for misplaced records cut short")

// searchMisplaced joins the next round, and runs it if it gets the turn
// before the round is over.
func (b *Bolt) searchMisplaced(ctx context.Context) error {
	for {
		b.searches.mu.Lock()
		r := b.searches.next
		if r == nil {
			r = &searchRound{done: make(chan struct{})}
			b.searches.next = r
		}
		r.joined++
		b.searches.mu.Unlock()
		select {
		case <-r.done:
		case b.turn <- struct{}{}:
			func() {
				defer b.releaseTurn()
				b.runSearch(ctx, r)
			}()
		case <-ctx.Done():
			return ctx.Err()
		}
		<-r.done
		if r.err != errSearchCut {
			return r.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// runSearch runs round r, in the turn, unless another Load ran it.
func (b *Bolt) runSearch(ctx context.Context, r *searchRound) {
	b.searches.mu.Lock()
	begun := b.searches.next != r
	if !begun {
		b.searches.next = nil
	}
	b.searches.mu.Unlock()
	if begun {
		return
	}
	err := b.guard("load", func() error {
		return b.view(func(tx *bolt.Tx) error { return b.findMisplaced(ctx, tx.Bucket(b.bucket)) })
	})
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = errSearchCut
	}
	b.searchesRun.Add(1)
	r.err = err
	close(r.done)
}

// notStored is Load's answer when nothing is stored under pchannel: nil,
// unless the store holds a record under a name it was not written for
// that is, or may be, this pchannel's, its key damaged: starting from
// nothing would replay from the start, and its first save could go below
// what it had acknowledged. Recovery fails instead, as over a corrupt
// record, until an operator writes the record under its own name and
// deletes the misplaced one (lowwater verify names it, and says how).
//
// A whole record names the one pchannel it was written for by its check,
// and holds back that one alone; one that cannot be read may be any
// pchannel's, and holds back every pchannel with nothing stored.
func (b *Bolt) notStored(pchannel string) error {
	b.misplacedMu.Lock()
	defer b.misplacedMu.Unlock()
	var writtenFor, unread []string
	for k, m := range b.misplaced {
		switch {
		case !m.whole:
			unread = append(unread, k)
		case record.Names(m.check, []byte(pchannel)):
			writtenFor = append(writtenFor, k)
		}
	}
	var why string
	switch {
	case len(writtenFor) > 0:
		why = fmt.Sprintf("%s holds a record under %q that was written for this one, its key damaged or the record copied there",
			b.path, slices.Min(writtenFor))
	case len(unread) > 0:
		why = fmt.Sprintf("%s holds a record under %q that cannot be read, which may be this one's under a damaged key",
			b.path, slices.Min(unread))
	default:
		return nil
	}
	return &CorruptRecordError{PChannel: pchannel, Err: fmt.Errorf(
		"nothing stored under this name, but %s (lowwater verify says how to repair it)", why)}
}

// misplacedRecord is what a Load that finds nothing needs of a misplaced
// record: whose it may be. A whole one's check names the one pchannel it
// was written for; one that cannot be read may be anyone's.
type misplacedRecord struct {
	check uint32
	whole bool
}

func misplacedOf(v []byte) misplacedRecord {
	check, whole := record.NameCheck(v)
	return misplacedRecord{check: check, whole: whole}
}

// misplaced reports whether v, stored under k, may be another
// pchannel's record. One written for another name says so by its name
// check. One that cannot be read may be any pchannel's too, unless its
// name check still names k, which tells that the damage lies in its own
// bytes: damage to the page can shift where a key begins ("ch-000\x02"
// for "pch-000") or ends ("orders" for "orders-2", "orders-2x"), and its
// record then reads from the wrong bytes as well, leaving a name that
// need not resemble the one it was written for.
func misplaced(k, v []byte) bool {
	_, readable, _, err := record.Decode(string(k), v)
	switch {
	case err == nil || readable:
		return false
	case errors.Is(err, record.ErrAnotherPChannel):
		return true
	}
	// A key no catalog writes names nothing, whatever its check says:
	// shrunk to nothing, the empty name's check is 0, as are the bytes of
	// a small Kafka offset where a shifted record puts the check.
	return ValidatePChannel(string(k)) != nil || !record.NamedFor(string(k), v)
}

// findMisplaced adds to the misplaced records those bucket holds now, for
// damage done to the file since it was opened (written into it by a
// program that ignores its lock): the record it hid would otherwise read
// as nothing stored. It reads the file and every record, 4 to 6 ms per
// 10,000 records; a Load finds nothing only for a pchannel never saved,
// the Loads that find nothing together share one pass (searchMisplaced),
// and a node that starts many at once can read them all in one
// (LoadAll, which fails on such a record; actors.WithPreloaded).
//
// The pages are checked first, from the file's bytes, as OpenBolt checks
// them: damage to their structure (a branch page that leads back to
// itself, a key's size past its page, keys out of order) would send the
// pass round for good, or fault where no guard catches it, or hide
// records from it; met, it is the store's damage (markDamaged). The pass
// ends with ctx.
func (b *Bolt) findMisplaced(ctx context.Context, bucket *bolt.Bucket) error {
	if err := b.checkPages(ctx); err != nil {
		if errors.Is(err, ErrCorruptStore) {
			return b.markDamaged(err)
		}
		return err
	}
	found := map[string]misplacedRecord{}
	c := bucket.Cursor()
	n := 0
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if n++; n%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		// A value of nil is a bucket, which no catalog makes in its own.
		if v == nil || misplaced(k, v) {
			found[string(k)] = misplacedOf(v)
		}
	}
	if len(found) == 0 {
		return nil
	}
	b.misplacedMu.Lock()
	defer b.misplacedMu.Unlock()
	maps.Copy(b.misplaced, found)
	return nil
}

// forgetMisplaced takes pchannel off the misplaced records: deleted.
func (b *Bolt) forgetMisplaced(pchannel string) {
	b.misplacedMu.Lock()
	defer b.misplacedMu.Unlock()
	delete(b.misplaced, pchannel)
}

// Save implements Catalog. The stored record is read and compared inside the
// same write transaction, so no interleaving of writers can lower it. A
// stored record that cannot be decoded is reported and kept: overwriting it
// could lower the checkpoint.
func (b *Bolt) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	raw, err := b.checkSave("save", pchannel, checkpoint)
	if err != nil {
		b.exit()
		return err
	}
	if b.group != nil {
		left, err := b.saveGrouped(ctx, &batchedSave{pchannel: pchannel, checkpoint: checkpoint, raw: raw})
		if !left {
			b.exit()
		}
		return err
	}
	defer b.exit()
	if err := b.takeTurn(ctx); err != nil {
		return err
	}
	defer b.releaseTurn()
	key := []byte(pchannel)
	var refused error
	err = b.guard("save", func() error {
		return b.update(func(tx *bolt.Tx) error {
			var err error
			if refused, err = b.newWriter(tx).put(key, pchannel, checkpoint, raw); err != nil {
				return err
			}
			return refused // nothing written: rolled back
		})
	})
	if err != nil && err != refused {
		return b.writeFailed("save", err)
	}
	return err
}

// writeFailed names the file in the failure of a write (op). bbolt's own
// errors name the file it opened, which for a store OpenBolt made is a
// temporary name, long gone: an operator looking for it finds nothing, so
// the error says the path instead. Damage keeps its own error.
func (b *Bolt) writeFailed(op string, err error) error {
	if errors.Is(err, ErrCorruptStore) {
		return err
	}
	if opened := b.db.Path(); opened != b.path {
		err = &renamedError{err: err, opened: opened, path: b.path}
	}
	return fmt.Errorf("persistence: %s: %s: %w", b.path, op, err)
}

// renamedError is err with the name a file was opened under replaced by
// its path, in its text alone: errors.Is and As see err.
type renamedError struct {
	err          error
	opened, path string
}

func (e *renamedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.opened, e.path) }
func (e *renamedError) Unwrap() error { return e.err }

// StartSave implements SaveStarter under group commit: the save joins
// a batch and holds no goroutine until the batch commits, when done is
// called on the goroutine that committed it (or, when a Save's caller
// committed it, on one started to tell the batch), once another has
// taken up the commits that follow: done may save to this Bolt again,
// and its save joins the next batch. It must not call Close, which
// waits until every done has returned. A done that panics or ends its
// goroutine (runtime.Goexit) is taken as told. Without group commit
// (WithGroupCommit(false)) it returns errors.ErrUnsupported: a save is
// then a write transaction of its own, which waits for bbolt's one
// writer, and Save does that. As for Save, the context is checked when
// the save starts; once started, it commits with its batch.
func (b *Bolt) StartSave(ctx context.Context, pchannel string, checkpoint wal.MessageID, done func(error)) error {
	if b.group == nil {
		return errNoGroupCommit
	}
	if done == nil {
		return fmt.Errorf("%w: nil done for pchannel %q", ErrInvalidArgument, pchannel)
	}
	if err := b.enter(ctx); err != nil {
		return err
	}
	raw, err := b.checkSave("save", pchannel, checkpoint)
	if err != nil {
		b.exit()
		return err
	}
	b.startGrouped(pchannel, checkpoint, raw, done) // exits once answered
	return nil
}

// errNoGroupCommit is StartSave's answer without group commit. Made once:
// a caller may ask on every save.
var errNoGroupCommit = fmt.Errorf("persistence: a bolt save starts without waiting only with group commit: %w", errors.ErrUnsupported)

// checkSave checks a save (op: "save", "replace") before it starts, and
// encodes its record.
func (b *Bolt) checkSave(op, pchannel string, checkpoint wal.MessageID) ([]byte, error) {
	if err := b.writable(op, pchannel); err != nil {
		return nil, err
	}
	check := CheckSaveArgs
	if op == "replace" {
		check = CheckReplaceArgs
	}
	if err := check(pchannel, checkpoint); err != nil {
		return nil, err
	}
	return EncodeRecord(pchannel, Record{Checkpoint: checkpoint})
}

// writer writes records in one write transaction: a Save's whole, or a
// batch's. Its cursor reads the stored records; bbolt's Get makes a
// cursor per read.
type writer struct {
	bucket *bolt.Bucket
	cursor *bolt.Cursor
	// absent answers a save of a pchannel that nothing is stored under:
	// nil, unless the file holds a misplaced record (notStored), which
	// may be this pchannel's, above what the save would write.
	absent func(pchannel string) error
	path   string // the file's, for a record that cannot be decoded (locate)
}

func (b *Bolt) newWriter(tx *bolt.Tx) writer {
	bk := tx.Bucket(b.bucket)
	return writer{bucket: bk, cursor: bk.Cursor(), absent: b.notStored, path: b.path}
}

// locate adds to a record that cannot be decoded the file it lies in and
// what mends it, as notStored does for a misplaced one: the node's log,
// where a failed read or save is retried at every backoff, is where an
// operator meets it, and the error alone named neither.
func locate(path string, err error) error {
	corrupt, ok := err.(*CorruptRecordError)
	if !ok {
		return err
	}
	return &CorruptRecordError{PChannel: corrupt.PChannel,
		Err: fmt.Errorf("%w, in %s (lowwater verify says how to repair it)", corrupt.Err, path)}
}

// put writes raw as the record of pchannel unless the stored one is above
// checkpoint or cannot be decoded (refused), or is equal (nothing to
// write). err is the failure of the write itself. The key is read, never
// kept: bbolt's Put copies it.
func (w writer) put(key []byte, pchannel string, checkpoint wal.MessageID, raw []byte) (refused, err error) {
	// As Get: a value only under this very key (Seek gives a nested
	// bucket a nil value; verify refuses them at open).
	k, old := w.cursor.Seek(key)
	switch {
	case !bytes.Equal(k, key):
		old = nil
	case old == nil:
		// A nested bucket under this very key, made by damage since the
		// open (a flipped flag): a record was there, and bbolt would
		// refuse the write with an error of its own.
		return locate(w.path, &CorruptRecordError{PChannel: pchannel, Err: errors.New("a bucket where its record should be: a damaged flag")}), nil
	}
	if old == nil {
		if refused := w.absent(pchannel); refused != nil {
			return refused, nil
		}
	}
	write, refused := admit(pchannel, old, old != nil, checkpoint)
	if refused != nil || !write {
		return locate(w.path, refused), nil // refused, or already durable: an earlier commit wrote it
	}
	return nil, w.bucket.Put(key, raw)
}

// LoadAll implements Catalog.
func (b *Bolt) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.exit()
	if err := b.takeTurn(ctx); err != nil {
		return nil, err
	}
	defer b.releaseTurn()
	all := make(map[string]wal.MessageID)
	err := b.guard("load all", func() error {
		return b.view(func(tx *bolt.Tx) error {
			return tx.Bucket(b.bucket).ForEach(func(k, raw []byte) error {
				pchannel := string(k)
				id, err := decodeStored(pchannel, raw)
				if err != nil {
					return locate(b.path, err)
				}
				all[pchannel] = id
				return nil
			})
		})
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// Close implements Catalog. It refuses new calls, waits for those in
// flight (a save StartSave started is in flight until it is answered:
// within the group commit's delay, if any, and the commits before its
// own), and releases the file and its lock.
//
// Of a damaged Bolt it waits a second at most for calls in flight, once
// the damage is known: a panic inside bbolt may leave a lock of bbolt's
// held for good, and a call waiting on it would never return. It then
// closes the file itself, not through bbolt, and bbolt's mapping of the
// file stays until the process exits.
//
// A second Close, made while the first waits or after it, returns
// ErrClosed once the first has released the file.
func (b *Bolt) Close() error {
	b.calls.Lock()
	if b.closed {
		b.calls.Unlock()
		<-b.released
		return ErrClosed
	}
	b.closed = true
	var drained chan struct{}
	if b.inFlight > 0 {
		drained = make(chan struct{})
		b.drained = drained
	}
	b.calls.Unlock()
	defer close(b.released)
	if drained != nil {
		b.awaitDrained(drained)
	}
	if err := b.closeDB(); err != nil {
		return fmt.Errorf("persistence: close bolt file: %w", err)
	}
	return nil
}

// abandonAfter is how long Close of a damaged Bolt waits for calls still
// in flight: a call that does not return by then waits on a lock bbolt
// will never release.
const abandonAfter = time.Second

// awaitDrained waits until drained closes, or, once the Bolt is damaged,
// abandonAfter at most.
func (b *Bolt) awaitDrained(drained chan struct{}) {
	select {
	case <-drained:
		return
	case <-b.damagedNow:
	}
	t := time.NewTimer(abandonAfter)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
}

// closeDB closes the bbolt file. Of a damaged Bolt it closes the file
// itself, and drops its lock, rather than through DB.Close: a panic
// inside bbolt (a damaged page met in a read, a write, a rollback, or
// while a transaction starts) may have left bbolt's own locks held, and
// DB.Close would wait for them for good. bbolt's mapping of the file is
// then left to the process. No call touches the db by then: a damaged
// Bolt refuses every call.
func (b *Bolt) closeDB() error {
	if b.damaged.Load() == nil {
		return b.db.Close()
	}
	unlockFile(b.file)
	return b.file.Close()
}

// enter admits a call unless the Bolt is closed or ctx has ended; the call
// then exits once it is done with the db. The context is read before the
// call counts: a nil one panicked there, and left counted a call that
// never exited, for which Close then waited for ever.
func (b *Bolt) enter(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	ended := ctx.Err()
	b.calls.Lock()
	defer b.calls.Unlock()
	if b.closed {
		return ErrClosed
	}
	if ended != nil {
		return ended
	}
	b.inFlight++
	return nil
}

// exit ends a call that entered, and tells a Close waiting for the last.
func (b *Bolt) exit() { b.exitN(1) }

// exitN ends n calls at once.
func (b *Bolt) exitN(n int) {
	if n == 0 {
		return
	}
	b.calls.Lock()
	b.inFlight -= n
	if b.inFlight == 0 && b.drained != nil {
		close(b.drained)
		b.drained = nil
	}
	b.calls.Unlock()
}

// takeTurn waits within ctx for the turn to call into bbolt;
// releaseTurn gives it back.
func (b *Bolt) takeTurn(ctx context.Context) error {
	if b.tryTurn() {
		return nil
	}
	select {
	case b.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *Bolt) releaseTurn() { <-b.turn }

// tryTurn takes the turn if no call holds it, and reports whether it did.
func (b *Bolt) tryTurn() bool {
	select {
	case b.turn <- struct{}{}:
		return true
	default:
		return false
	}
}

// writable fails a write (op, such as "save") of pchannel on a read-only
// Bolt.
func (b *Bolt) writable(op, pchannel string) error {
	if b.readOnly {
		return fmt.Errorf("%w: %s: cannot %s pchannel %q", ErrReadOnly, b.path, op, pchannel)
	}
	return nil
}
