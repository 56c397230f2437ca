package persistence

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/lowwater/lowwater/wal"
)

// ErrLocked is returned by OpenBolt when another process, or another Bolt in
// this one, holds the file for longer than the open timeout. It wraps
// bbolt's timeout error.
var ErrLocked = errors.New("persistence: bolt file is locked by another catalog")

// ErrReadOnly is returned by Save and Delete on a Bolt opened
// WithReadOnly(true), naming the file; nothing is written. Such a Bolt is
// for tools that read a store beside other readers; writing takes a Bolt
// opened without the option, which waits for the readers to close.
var ErrReadOnly = errors.New("persistence: bolt catalog is read-only")

// Bolt is the embedded Catalog: one bbolt file, one bucket, one record per
// pchannel.
//
// Contexts are checked before each call starts and not after: bbolt cannot
// abandon a transaction half way, so a call that has started runs to its
// end (a durable put is about 0.2 ms; a save may also wait for the one
// writer bbolt admits at a time).
//
// A damaged file is ErrCorruptStore, never a panic and never an empty
// store: OpenBolt refuses an existing empty file and reads every page before
// it returns, and a later call that meets damage (bbolt panics on it) marks
// the Bolt damaged, after which every call returns that error, group
// commits included (see groupCommit).
type Bolt struct {
	db *bolt.DB
	// file is the file bbolt opened, kept for closeDB.
	file   *os.File
	path   string
	bucket []byte
	// group gathers concurrent Saves into one commit (WithGroupCommit);
	// nil without it.
	group *groupCommit
	// readOnly refuses writes (WithReadOnly) before bbolt does, whose
	// refusal names neither the file nor a sentinel of this package.
	readOnly bool

	// mu makes Close wait for calls in flight, so that no call touches a
	// closed db: calls hold it for reading, Close for writing.
	mu     sync.RWMutex
	closed bool
	// started counts the saves StartSave started and has not answered:
	// Close waits for them too, since they hold no lock while they wait.
	started sync.WaitGroup

	// damaged holds the ErrCorruptStore of the first bbolt panic. From then
	// on every call returns it: a panic may have left a write transaction
	// half applied in memory, and writing on over a damaged file could lose
	// what it still holds.
	damaged atomic.Pointer[error]
	// wedged is set when bbolt panicked while starting a transaction:
	// it still holds the locks it took then, and DB.Close would wait for
	// them for good (see closeDB).
	wedged atomic.Bool
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
}

type boltOptionFunc func(*boltOptions)

func (f boltOptionFunc) apply(o *boltOptions) { f(o) }

// WithBucket names the bucket that holds the records, so that one file can
// serve several independent catalogs over time. Default
// "lowwater-checkpoints".
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

// WithGroupCommit makes concurrent Saves share one write transaction and
// one fsync, as bbolt's DB.Batch does: many pchannels advancing together
// cost a few commits instead of one each. Every Save still returns only after the
// transaction holding its write committed, so the durability promise is
// unchanged, and the never-lower check still runs inside that transaction.
// The price is latency: a Save waits until the batch is full (1000 calls)
// or its delay (WithGroupCommitDelay) has passed. Default false.
func WithGroupCommit(enabled bool) BoltOption {
	return boltOptionFunc(func(o *boltOptions) { o.group = enabled })
}

// WithGroupCommitDelay bounds how long a Save under WithGroupCommit waits
// for others to join its transaction. Default 10 ms (bbolt's); it must be
// positive.
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

// defaultGroupCommitDelay is bbolt's own default MaxBatchDelay.
const defaultGroupCommitDelay = 10 * time.Millisecond

func defaultBoltOptions() boltOptions {
	return boltOptions{bucket: "lowwater-checkpoints", openTimeout: time.Second, groupDelay: defaultGroupCommitDelay}
}

// OpenBolt opens or creates the bbolt file at path. The file stays locked
// until Close. A new file is made whole beside path, under a temporary
// name (".NAME.new-*"), and then linked into place: no other process ever
// finds it empty, and a creation that fails leaves nothing.
func OpenBolt(path string, opts ...BoltOption) (*Bolt, error) {
	o := defaultBoltOptions()
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("%w: nil bolt option", ErrInvalidArgument)
		}
		opt.apply(&o)
	}
	if o.bucket == "" {
		return nil, fmt.Errorf("%w: empty bolt bucket name", ErrInvalidArgument)
	}
	if o.openTimeout <= 0 {
		return nil, fmt.Errorf("%w: bolt open timeout %v is not positive", ErrInvalidArgument, o.openTimeout)
	}
	if o.groupDelay <= 0 {
		return nil, fmt.Errorf("%w: bolt group commit delay %v is not positive", ErrInvalidArgument, o.groupDelay)
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
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
	b := &Bolt{db: db, file: file, path: path, bucket: []byte(o.bucket), readOnly: o.readOnly}
	if o.group {
		b.group = &groupCommit{delay: o.groupDelay}
	}
	err = b.guard("open", func() error {
		if err := b.verify(); err != nil {
			return err
		}
		if o.readOnly || b.hasBucket() {
			// Nothing to write: an open that only reads (the tool's
			// refused or unchanged set) leaves the file as it was.
			return nil
		}
		return db.Update(func(tx *bolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists(b.bucket)
			return err
		})
	})
	if err != nil {
		_ = b.closeDB()
		if errors.Is(err, ErrCorruptStore) {
			return nil, err
		}
		return nil, fmt.Errorf("persistence: create bucket %q in %s: %w", o.bucket, path, err)
	}
	if o.readOnly {
		if err := b.checkBucket(path); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// hasBucket reports whether the file holds the bucket already.
func (b *Bolt) hasBucket() bool {
	found := false
	_ = b.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(b.bucket) != nil
		return nil
	})
	return found
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
	info, err := os.Stat(path)
	switch {
	case err != nil:
		return nil
	case info.IsDir(): // before the size: a directory may have size 0
		return openError(path, &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR})
	case info.Size() == 0:
		return fmt.Errorf("%w: %s: the file is empty", ErrCorruptStore, path)
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
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			db, file, placed, err := createBoltDB(path, o)
			if err != nil || placed {
				return db, file, err
			}
		}
	}
	return openBoltFile(path, o)
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
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-")
	if err != nil {
		return nil, nil, false, err
	}
	tmp := f.Name()
	_ = f.Close()
	defer os.Remove(tmp) // once linked, path keeps the file
	if db, file, err = openBoltFile(tmp, o); err != nil {
		return nil, nil, false, err
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
func openBoltFile(path string, o boltOptions) (db *bolt.DB, file *os.File, err error) {
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if file != nil {
				unlockFile(file)
				_ = file.Close()
			}
			db, file, err = nil, nil, fmt.Errorf("%w: %s: open: bbolt panicked: %v", ErrCorruptStore, path, p)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: o.openTimeout, NoSync: o.noSync, ReadOnly: o.readOnly, OpenFile: openFile})
	if err != nil {
		return nil, nil, err
	}
	return db, file, nil
}

// verify reads every page a catalog can reach before the store is used,
// so that damage is reported when the store opens, not by a save at some
// later hour: the file must hold every page its metadata counts (a
// truncated copy does not), every key and value of every bucket must be
// readable (under guard, so a damaged page panics here), and bbolt's own
// consistency check must pass (it finds free pages still in use, which a
// later write would overwrite).
func (b *Bolt) verify() error {
	info, err := os.Stat(b.path)
	if err != nil {
		return fmt.Errorf("persistence: stat bolt file %s: %w", b.path, err)
	}
	return b.db.View(func(tx *bolt.Tx) error {
		if need := tx.Size(); info.Size() < need {
			return fmt.Errorf("%w: %s: the file has %d bytes, its pages need %d: truncated",
				ErrCorruptStore, b.path, info.Size(), need)
		}
		var touched byte
		err := tx.ForEach(func(_ []byte, bucket *bolt.Bucket) error {
			return bucket.ForEach(func(k, v []byte) error {
				// The last byte of each: a size or position damaged to
				// point past the mapped file faults here, under guard.
				if len(k) > 0 {
					touched ^= k[len(k)-1]
				}
				if len(v) > 0 {
					touched ^= v[len(v)-1]
				}
				return nil
			})
		})
		runtime.KeepAlive(touched)
		if err != nil {
			return err
		}
		var first error
		for err := range tx.Check() { // drained to the end: Check's goroutine must finish
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
			damaged := fmt.Errorf("%w: %s: %s: bbolt panicked: %v", ErrCorruptStore, b.path, op, p)
			b.damaged.CompareAndSwap(nil, &damaged)
			if panickedStartingTx() {
				b.wedged.Store(true)
			}
			err = *b.damaged.Load()
		}
	}()
	return call()
}

// Load implements Catalog.
func (b *Bolt) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.ready(ctx); err != nil {
		return nil, err
	}
	if err := checkLoadArgs(pchannel); err != nil {
		return nil, err
	}
	var id wal.MessageID
	err := b.guard("load", func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			raw := tx.Bucket(b.bucket).Get([]byte(pchannel))
			if raw == nil {
				return nil
			}
			var err error
			id, err = decodeStored(pchannel, raw)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return id, nil
}

// Save implements Catalog. The stored record is read and compared inside the
// same write transaction, so no interleaving of writers can lower it. A
// stored record that cannot be decoded is reported and kept: overwriting it
// could lower the checkpoint.
func (b *Bolt) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	raw, err := b.checkSave(ctx, pchannel, checkpoint)
	if err != nil {
		return err
	}
	if b.group != nil {
		return b.saveGrouped(pchannel, checkpoint, raw)
	}
	key := []byte(pchannel)
	return b.guard("save", func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			refused, err := b.put(tx, key, pchannel, checkpoint, raw)
			if err != nil {
				return err
			}
			return refused
		})
	})
}

// StartSave implements SaveStarter under WithGroupCommit: the save joins
// a batch and holds no goroutine until the batch commits, when done is
// called on the goroutine that committed it. Without group commit it
// returns errors.ErrUnsupported: a save is then a write transaction of
// its own, which waits for bbolt's one writer, and Save does that. As for
// Save, the context is checked when the save starts; once started, it
// commits with its batch.
func (b *Bolt) StartSave(ctx context.Context, pchannel string, checkpoint wal.MessageID, done func(error)) error {
	if b.group == nil {
		return errNoGroupCommit
	}
	if done == nil {
		return fmt.Errorf("%w: nil done for pchannel %q", ErrInvalidArgument, pchannel)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	raw, err := b.checkSave(ctx, pchannel, checkpoint)
	if err != nil {
		return err
	}
	b.started.Add(1)
	b.startGrouped(pchannel, checkpoint, raw, done)
	return nil
}

// errNoGroupCommit is StartSave's answer without group commit. Made once:
// a caller may ask on every save.
var errNoGroupCommit = fmt.Errorf("persistence: a bolt save starts without waiting only with group commit: %w", errors.ErrUnsupported)

// checkSave checks a save before it starts, and encodes its record. The
// caller holds b.mu for reading.
func (b *Bolt) checkSave(ctx context.Context, pchannel string, checkpoint wal.MessageID) ([]byte, error) {
	if err := b.ready(ctx); err != nil {
		return nil, err
	}
	if err := b.writable("save", pchannel); err != nil {
		return nil, err
	}
	if err := CheckSaveArgs(pchannel, checkpoint); err != nil {
		return nil, err
	}
	return EncodeRecord(Record{Checkpoint: checkpoint})
}

// put writes raw as the record of pchannel unless the stored one is above
// checkpoint or cannot be decoded (refused), or is equal (nothing to
// write). err is the failure of the write itself. It is the whole write
// transaction of a Save, or its share of a batch.
func (b *Bolt) put(tx *bolt.Tx, key []byte, pchannel string, checkpoint wal.MessageID, raw []byte) (refused, err error) {
	bucket := tx.Bucket(b.bucket)
	old := bucket.Get(key)
	write, refused := admit(pchannel, old, old != nil, checkpoint)
	if refused != nil || !write {
		return refused, nil // refused, or already durable: an earlier commit wrote it
	}
	return nil, bucket.Put(key, raw)
}

// LoadAll implements Catalog.
func (b *Bolt) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.ready(ctx); err != nil {
		return nil, err
	}
	all := make(map[string]wal.MessageID)
	err := b.guard("load all", func() error {
		return b.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(b.bucket).ForEach(func(k, raw []byte) error {
				pchannel := string(k)
				id, err := decodeStored(pchannel, raw)
				if err != nil {
					return err
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

// Close implements Catalog. It waits for calls in flight, and for the
// saves StartSave started to be answered (bounded by the group commit's
// delay and one commit), and releases the file lock.
func (b *Bolt) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.closed = true
	b.mu.Unlock()
	// No save starts from here on: each started one was counted under
	// b.mu, before closed was set.
	b.started.Wait()
	if err := b.closeDB(); err != nil {
		return fmt.Errorf("persistence: close bolt file: %w", err)
	}
	return nil
}

// closeDB closes the bbolt file. Of a wedged Bolt it closes the file
// itself, which lets go of its lock too, since DB.Close would wait for
// good for the locks bbolt still holds; bbolt's mapping of the file is
// then left to the process. Nothing touches the db by then: a wedged Bolt
// is damaged, and refuses every call.
func (b *Bolt) closeDB() error {
	if !b.wedged.Load() {
		return b.db.Close()
	}
	unlockFile(b.file)
	return b.file.Close()
}

// panickedStartingTx reports whether the panic being recovered was raised
// while bbolt was starting a transaction (it checks the meta pages then,
// and panics if neither is valid), after it took its locks and before any
// code of its own could release them. Called from a deferred recover, it
// sees the panicking frames still on the stack.
func panickedStartingTx() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		switch f.Function {
		case "go.etcd.io/bbolt.(*DB).beginTx", "go.etcd.io/bbolt.(*DB).beginRWTx":
			return true
		}
		if !more {
			return false
		}
	}
}

func (b *Bolt) ready(ctx context.Context) error {
	if b.closed {
		return ErrClosed
	}
	return ctx.Err()
}

// writable fails a write (op, such as "save") of pchannel on a read-only
// Bolt.
func (b *Bolt) writable(op, pchannel string) error {
	if b.readOnly {
		return fmt.Errorf("%w: %s: cannot %s pchannel %q", ErrReadOnly, b.path, op, pchannel)
	}
	return nil
}
