package etcdcatalog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Defaults of the BatchOptions.
const (
	// DefaultMaxBatch is half etcd's default --max-txn-ops (128). A save
	// adds one compare, one put and one read to its transaction, and etcd
	// refuses a transaction with more compares, puts or reads than
	// --max-txn-ops.
	DefaultMaxBatch = 64
	// DefaultMaxBatchBytes is two thirds of etcd's default
	// --max-request-bytes (1.5 MiB) and half its client's default send
	// limit (2 MiB): a transaction of checkpoints of the built-in WALs
	// never comes near it, one of a WAL with IDs of many kilobytes does.
	DefaultMaxBatchBytes = 1 << 20
	// DefaultMaxInFlight is how many batch transactions run at once.
	DefaultMaxInFlight = 4
	// DefaultBatchTimeout bounds one batch transaction.
	DefaultBatchTimeout = 5 * time.Second
)

// BatchOption configures a Batcher.
type BatchOption interface{ applyBatch(*batchOptions) }

type batchOptionFunc func(*batchOptions)

func (f batchOptionFunc) applyBatch(o *batchOptions) { f(o) }

type batchOptions struct {
	maxBatch    int
	maxBytes    int
	maxInFlight int
	timeout     time.Duration
}

// WithMaxBatch sets how many saves one transaction carries at most (default
// DefaultMaxBatch), an owned save (Batcher.Own) counting as three. Keep it
// at or below the cluster's --max-txn-ops: each save adds one compare,
// one put and one read, and an owned one two more compares (its owner
// key's term and lease) and one more read; etcd refuses a transaction
// with more of any of them than that. A transaction etcd
// refuses so goes out again as smaller ones: the Batcher lowers its bound
// and learns, within a few transactions, the most the cluster takes. It
// probes above it once every 1,024 transactions at it, one transaction
// carrying the probe, so that a limit raised later is learnt too (a probe
// taken is followed by another soon), at the cost of that one
// transaction sent again when the limit did not change.
func WithMaxBatch(n int) BatchOption {
	return batchOptionFunc(func(o *batchOptions) { o.maxBatch = n })
}

// WithMaxBatchBytes sets how many bytes of keys and records one
// transaction carries at most (default DefaultMaxBatchBytes); a save
// larger than that alone goes in a transaction of its own. Keep it below
// the cluster's --max-request-bytes and the client's MaxCallSendMsgSize: a
// transaction etcd or the client refuses as too large goes out again as
// smaller ones, and the Batcher lowers its bound as WithMaxBatch's.
func WithMaxBatchBytes(n int) BatchOption {
	return batchOptionFunc(func(o *batchOptions) { o.maxBytes = n })
}

// WithMaxInFlight sets how many batch transactions run concurrently on the
// shared client (default DefaultMaxInFlight).
func WithMaxInFlight(n int) BatchOption {
	return batchOptionFunc(func(o *batchOptions) { o.maxInFlight = n })
}

// WithBatchTimeout bounds each batch transaction (default
// DefaultBatchTimeout), whatever the deadlines of the saves it carries;
// each caller still waits no longer than its own context. Keep it at or
// under the callers' deadline (actors.WithSaveTimeout): a batch that no
// member answers holds its commit slot (WithMaxInFlight) until this
// timeout, and while every slot is so held, no save of any pchannel goes
// out, however short its own deadline. (One member that answers nothing
// holds a batch for much less: a transaction with no answer past its
// usual round trip is sent again, to the other members; see Batcher.)
// Keep it well above a transaction's round trip too: a transaction cut by
// it fails every save it carries. A save the Batcher hands to Catalog.Save
// on its own (see Batcher) holds no slot, and is bounded by its caller's
// context alone.
func WithBatchTimeout(d time.Duration) BatchOption {
	return batchOptionFunc(func(o *batchOptions) { o.timeout = d })
}

// Batcher is a persistence.Catalog over a Catalog that commits concurrent
// saves of different pchannels together: up to WithMaxBatch of them, and
// WithMaxBatchBytes, in one etcd transaction, up to WithMaxInFlight
// transactions at a time, and saves that arrive meanwhile wait for the
// next one. There is no timer: a batch is whatever queued while the
// previous transactions were in flight, so a lone save goes out at once.
// Raft then replicates and fsyncs one entry for many checkpoints.
//
// Every guarantee of Catalog.Save holds per pchannel. Each key in a batch
// has its own compare: its stored bytes must still be the record the
// Catalog last saw and judged lower (the bytes, not the mod revision, which
// an etcd restored from a snapshot hands out again). An etcd transaction is
// all-or-nothing, so when any compare fails nothing is written, and the
// transaction returns every key's current record instead. Each save of the
// batch is then judged on those, as Catalog.Save would judge it: the
// saves still to write go out together once more, and the others are
// answered (stored ahead, equal, another WAL). One stale key costs its
// batch a second round trip, never another key's outcome; a second
// failed compare, another writer moving keys meanwhile, is judged so too,
// and leaves the saves still to write to Catalog.Save, each on its own.
//
// A save of a key the Catalog knows nothing of yet is batched too, its
// compare that the key does not exist: a key created since, by another
// process or before a restart, fails it, and is then judged on the record
// read like any stale key, so the first saves of a fleet share
// transactions whether or not their keys exist. A save the Catalog knows
// to be equal or below what is stored goes to Catalog.Save on its own,
// which confirms that on a fresh read; so does a save of a key whose
// record a batch found undecodable, until the Catalog sees another record
// there: in a batch, it would fail the compare of each transaction.
//
// The saves of an Owned from Batcher.Own are batched too, each with its
// fence (the owner key's term and lease compared in the transaction that
// writes it), beside the saves of other owners and unfenced ones. An
// Owned from Catalog.Own saves one transaction at a time.
//
// A transaction with no answer well past its usual round trip (four
// deviations over the mean, twice the mean and 50 ms at the least) is sent
// again, once to each other member the client has, then again after twice
// that wait, until its time runs out, and the first answer wins, as a
// Catalog's save is: one member that answers nothing (stopped, hung, cut
// off by a partition that drops packets) would otherwise hold each
// transaction the client sends it until the batch timeout, and soon every
// commit slot. Two copies of a transaction are safe: its compares let only
// the first write (see hedge.go).
type Batcher struct {
	c   *Catalog
	opt batchOptions

	mu       sync.Mutex
	queue    []*batchedSave
	inFlight int
	closed   bool
	// saves and bytes bound a transaction: the options, as far as the
	// cluster takes them (see bound). saves counts each save's compares
	// (txnEntry.ops): one, three for an owner's.
	saves, bytes bound
	// undecodable holds the keys whose record a failed transaction read
	// and could not decode, with that record's mod revision: their saves
	// go to Catalog.Save on their own, which reads the key again, until
	// the Catalog sees a later record there. In a batch, each failed its
	// transaction's compare again, and held the others to a second one.
	undecodable map[string]int64
	// running counts the goroutines committing batches, for Close.
	running sync.WaitGroup
	// closing ends with Close's grace (see Close): every transaction and
	// every save a batch hands to the Catalog ends with it.
	closing    context.Context
	endClosing context.CancelCauseFunc
}

var _ persistence.Catalog = (*Batcher)(nil)

// batchedSave is one Save waiting in a Batcher.
type batchedSave struct {
	ctx        context.Context
	pchannel   string
	checkpoint wal.MessageID
	// fence is the owner's, for an Owned's save (Batcher.Own); nil for
	// one of Batcher.Save.
	fence *fence
	done  chan error // buffered: the committer never blocks on it
}

// lost is the error of a fenced save whose owner is known to have lost
// the pchannel: nothing is sent for it, as Catalog.save sends nothing.
func (s *batchedSave) lost() error {
	if s.fence == nil || s.fence.owner == nil {
		return nil
	}
	if err := s.fence.owner.Err(); err != nil {
		return s.fence.owner.lostError(s.pchannel, err)
	}
	return nil
}

// NewBatcher returns a Batcher saving through c. The Batcher owns c from
// then on: its Close closes c. Load and LoadAll go to c unchanged. A nil
// c, a nil option or one out of range is an error wrapping
// persistence.ErrInvalidArgument.
func NewBatcher(c *Catalog, opts ...BatchOption) (*Batcher, error) {
	o := batchOptions{maxBatch: DefaultMaxBatch, maxBytes: DefaultMaxBatchBytes, maxInFlight: DefaultMaxInFlight, timeout: DefaultBatchTimeout}
	for _, opt := range opts {
		if opt == nil {
			return nil, fmt.Errorf("etcdcatalog: %w: nil batch option", persistence.ErrInvalidArgument)
		}
		opt.applyBatch(&o)
	}
	switch {
	case c == nil:
		return nil, fmt.Errorf("etcdcatalog: %w: nil catalog", persistence.ErrInvalidArgument)
	case o.maxBatch < 1:
		return nil, fmt.Errorf("etcdcatalog: %w: max batch %d must be positive", persistence.ErrInvalidArgument, o.maxBatch)
	case o.maxBytes < 1:
		return nil, fmt.Errorf("etcdcatalog: %w: max batch bytes %d must be positive", persistence.ErrInvalidArgument, o.maxBytes)
	case o.maxInFlight < 1:
		return nil, fmt.Errorf("etcdcatalog: %w: max in flight %d must be positive", persistence.ErrInvalidArgument, o.maxInFlight)
	case o.timeout <= 0:
		return nil, fmt.Errorf("etcdcatalog: %w: batch timeout %v must be positive", persistence.ErrInvalidArgument, o.timeout)
	}
	closing, end := context.WithCancelCause(context.Background())
	// The Catalog closed under the Batcher (by its owner, who should have
	// closed the Batcher) ends it as the Batcher's own Close does: its
	// saves fail with ErrClosed at once rather than each at its deadline.
	go func() {
		select {
		case <-c.closing.Done():
			end(persistence.ErrClosed)
		case <-closing.Done():
		}
	}()
	return &Batcher{c: c, opt: o, saves: newBound(o.maxBatch), bytes: newBound(o.maxBytes), closing: closing, endClosing: end}, nil
}

// closedErr is err, a save's failure, said to be ErrClosed once the
// Batcher's Close has begun, or its Catalog's: nothing is saved through
// the Batcher again. A transaction that failed meanwhile, cut short by
// the close or on its own timeout, said only "context deadline exceeded",
// and a caller tried once more a save that could no longer be made. An
// answer of what etcd holds (stored ahead, another WAL, a record that
// cannot be decoded) is left as it is: the close did not make it, and a
// caller that asks ErrClosed first would take it for a shutdown.
func (b *Batcher) closedErr(err error) error {
	if err == nil || errors.Is(err, persistence.ErrClosed) || !b.isClosed() || answered(err) {
		return err
	}
	return fmt.Errorf("%w: %w", persistence.ErrClosed, err)
}

// answered tells whether err is judge's answer on a stored record (a
// fenced owner's too), or the one of a record that cannot be decoded.
func answered(err error) bool {
	var ahead *persistence.StoredAheadError
	var corrupt *persistence.CorruptRecordError
	var fenced *FencedError
	return errors.As(err, &ahead) || errors.As(err, &corrupt) || errors.As(err, &fenced) ||
		errors.Is(err, persistence.ErrInvalidArgument)
}

// Catalog returns the Catalog the Batcher saves through.
func (b *Batcher) Catalog() *Catalog { return b.c }

// Own is Catalog.Own, but the Owned it returns saves through the Batcher:
// in transactions shared with the saves of other pchannels, owned or not,
// each save still fenced by its owner's term and lease, compared in the
// same transaction. Its other calls (Load, Replace, Release) go to the
// Catalog, as those of Catalog.Own's. Close the Owned before the Batcher:
// closed after, it can no longer release the pchannel, and its owner key
// stays until the session ends.
func (b *Batcher) Own(ctx context.Context, pchannel string, session *concurrency.Session) (*Owned, error) {
	return b.own(ctx, pchannel, session, true)
}

// TryOwn is Own without the wait, as Catalog.TryOwn.
func (b *Batcher) TryOwn(ctx context.Context, pchannel string, session *concurrency.Session) (*Owned, error) {
	return b.own(ctx, pchannel, session, false)
}

func (b *Batcher) own(ctx context.Context, pchannel string, session *concurrency.Session, wait bool) (*Owned, error) {
	if b.isClosed() {
		return nil, persistence.ErrClosed
	}
	o, err := b.c.own(ctx, pchannel, session, wait)
	if err != nil {
		return nil, err
	}
	o.batcher = b // before anyone can save through it
	return o, nil
}

// Load is Catalog.Load.
func (b *Batcher) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if b.isClosed() {
		return nil, persistence.ErrClosed
	}
	return b.c.Load(ctx, pchannel)
}

// LoadAll is Catalog.LoadAll.
func (b *Batcher) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	if b.isClosed() {
		return nil, persistence.ErrClosed
	}
	return b.c.LoadAll(ctx)
}

// Save stores checkpoint as Catalog.Save does, in a batch with the saves
// of other pchannels. When ctx ends first, Save returns an error wrapping
// ctx's; the save may still commit, as with Catalog.Save, and a retry
// then finds it equal.
func (b *Batcher) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if b.isClosed() {
		return persistence.ErrClosed
	}
	if err := persistence.CheckSaveArgs(pchannel, checkpoint); err != nil {
		return fmt.Errorf("etcdcatalog: %w", err)
	}
	return b.save(ctx, pchannel, checkpoint, nil)
}

// save queues a save whose arguments were checked, fenced by f if not
// nil (an Owned's), and waits for its answer.
func (b *Batcher) save(ctx context.Context, pchannel string, checkpoint wal.MessageID, f *fence) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("etcdcatalog: save %q: %w", pchannel, err) // nothing written
	}
	s := &batchedSave{ctx: ctx, pchannel: pchannel, checkpoint: checkpoint, fence: f, done: make(chan error, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return persistence.ErrClosed
	}
	b.queue = append(b.queue, s)
	if b.inFlight < b.opt.maxInFlight {
		b.inFlight++
		b.running.Add(1)
		go b.commitLoop()
	}
	b.mu.Unlock()
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
		// Named, as Catalog.Save names its own: a deadline alone, in a
		// log of thousands of pchannels, said neither which nor where.
		return fmt.Errorf("etcdcatalog: save %q: %w", pchannel, ctx.Err())
	}
}

// Delete is Catalog.Delete. A save of the same pchannel still queued may
// land after it, as it could if the caller ran the two concurrently on the
// Catalog itself: retire a pchannel once nothing saves it.
func (b *Batcher) Delete(ctx context.Context, pchannel string) error {
	if b.isClosed() {
		return persistence.ErrClosed
	}
	return b.c.Delete(ctx, pchannel)
}

// Close commits what is queued, waits for the transactions in flight, and
// closes the Catalog. Later calls fail with persistence.ErrClosed, and so
// does the first when the Catalog was closed under the Batcher.
//
// It waits for the saves no longer than the batch timeout
// (WithBatchTimeout): then what is still in flight or queued ends, its
// callers getting persistence.ErrClosed, as the Catalog's own Close ends
// its calls. A save whose caller's context has no deadline, with etcd
// down, would otherwise hold Close until etcd came back. The Catalog's
// Close then waits for the releases of Owneds in flight, up to
// ReleaseTimeout more.
func (b *Batcher) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return persistence.ErrClosed
	}
	b.closed = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.running.Wait()
		close(done)
	}()
	grace := time.NewTimer(b.opt.timeout)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		b.endClosing(persistence.ErrClosed)
		<-done
	}
	b.endClosing(persistence.ErrClosed)
	return b.c.Close()
}

// isClosed reports whether the Batcher, or the Catalog under it, is
// closed.
func (b *Batcher) isClosed() bool {
	if b.closing.Err() != nil || b.c.closed.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// commitLoop commits batches until the queue is empty.
func (b *Batcher) commitLoop() {
	defer b.running.Done()
	for {
		batch := b.take()
		if batch == nil {
			return
		}
		b.commit(batch)
	}
}

// take removes as many queued saves as a transaction takes, of distinct
// pchannels (a transaction may not put one key twice; a second save of a
// pchannel waits for the next batch), and answers those whose caller is
// gone. It returns nil, and leaves the loop count, when nothing is queued.
func (b *Batcher) take() []*batchedSave {
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch []*batchedSave
	var seen map[string]struct{}
	kept := b.queue[:0]
	for _, s := range b.queue {
		if len(batch) == b.saves.most() {
			kept = append(kept, s)
			continue
		}
		if err := s.ctx.Err(); err != nil {
			s.done <- err // never sent: nothing written
			continue
		}
		if b.closing.Err() != nil {
			s.done <- persistence.ErrClosed // never sent: nothing written
			continue
		}
		if _, dup := seen[s.pchannel]; dup {
			kept = append(kept, s)
			continue
		}
		if seen == nil {
			seen = make(map[string]struct{})
		}
		seen[s.pchannel] = struct{}{}
		batch = append(batch, s)
	}
	clear(b.queue[len(kept):])
	b.queue = kept
	if len(batch) == 0 {
		b.inFlight--
	}
	return batch
}

// commit writes batch in as few transactions as the cluster takes, and
// hands to Catalog.Save the saves a transaction cannot decide.
//
// A transaction the cluster refuses as too many or too large wrote
// nothing: its saves go out again in smaller ones, the bound lowered. One
// whose compare failed wrote nothing either, and read every key's record:
// each save is judged on it, and those still to write go out together once
// more; after a second failed compare, those still to write go to Save.
func (b *Batcher) commit(batch []*batchedSave) {
	entries, alone := b.prepare(batch)
	for round := 0; len(entries) > 0; round++ {
		var again []txnEntry
		for len(entries) > 0 {
			n, probes := b.fit(entries)
			txn := entries[:n]
			retry, refused := b.commitTogether(txn, probes)
			if refused {
				continue // the next transaction takes fewer of the same saves
			}
			entries = entries[len(txn):]
			if round == 0 {
				again = append(again, retry...)
				continue
			}
			for _, e := range retry {
				alone = append(alone, e.save)
			}
		}
		entries = again
	}
	for _, s := range alone {
		b.saveAlone(s)
	}
}

// saveAlone hands s to Catalog.Save on a goroutine of its own, which
// Close waits for: its caller's deadline bounds it, not the batch
// timeout, and the commit loop goes on meanwhile. A loop that waited for
// it held its place among the WithMaxInFlight, and saves of a caller with
// no deadline, stuck on a member that answers nothing, held every one.
func (b *Batcher) saveAlone(s *batchedSave) {
	b.running.Add(1) // while the loop's own count holds: Close waits for it
	go func() {
		defer b.running.Done()
		// The caller's deadline, and Close's grace.
		ctx, cancel := context.WithCancel(s.ctx)
		defer cancel()
		defer context.AfterFunc(b.closing, cancel)()
		err := b.c.save(ctx, s.pchannel, s.checkpoint, s.fence)
		if s.ctx.Err() == nil {
			err = b.closedErr(err)
		}
		s.done <- err
	}()
}

// txnEntry is one save made ready for a transaction: the record it
// compares, at key, and the one it puts.
type txnEntry struct {
	save *batchedSave
	key  string
	// absent is a key the catalog saw absent, or never saw: the
	// transaction creates it, its compare that it does not exist.
	absent bool
	stored []byte
	rec    persistence.Record
	val    []byte
	// size is what the transaction carries of it: the key thrice
	// (compare, put, get), the record compared and the one put, and a
	// fenced save's owner key, compared and read.
	size int
	// ops is how many compares it adds, the most of any kind of
	// operation: one, and a fenced save's compares of its owner key.
	ops int
}

// compares are what must hold for e to be written, as in Catalog.save:
// the stored bytes alone (see Catalog.save), not the revision, which etcd
// hands out again after a restore; or nothing, for a key to create; and,
// for a fenced save, that its owner still holds the owner key.
func (e *txnEntry) compares() []clientv3.Cmp {
	cmp := clientv3.Compare(clientv3.Value(e.key), "=", string(e.stored))
	if e.absent {
		cmp = clientv3.Compare(clientv3.CreateRevision(e.key), "=", 0)
	}
	if f := e.save.fence; f != nil {
		return append([]clientv3.Cmp{cmp}, f.holds()...)
	}
	return []clientv3.Cmp{cmp}
}

// reads are what a failed transaction reads for e to be judged again:
// its key, and a fenced save's owner key (see Catalog.judgeReads).
func (e *txnEntry) reads() []clientv3.Op {
	if f := e.save.fence; f != nil {
		return []clientv3.Op{clientv3.OpGet(e.key), clientv3.OpGet(f.ownerKey)}
	}
	return []clientv3.Op{clientv3.OpGet(e.key)}
}

// prepare makes ready for a transaction the saves of batch that one can
// write on what the catalog last saw of their keys (nothing, for a key it
// knows nothing of), and returns the others, for Save: a value it knows
// equal or below what is stored, or of a term above its owner's, which
// Save confirms on a fresh read, and a key whose record a batch found
// undecodable. It answers the saves of owners known to have lost their
// pchannels, and sends nothing for them.
func (b *Batcher) prepare(batch []*batchedSave) (entries []txnEntry, alone []*batchedSave) {
	for _, s := range batch {
		if err := s.lost(); err != nil {
			s.done <- err
			continue
		}
		key := b.c.keys.checkpoint(s.pchannel)
		h := b.c.hint(key)
		if b.stillUndecodable(key, h) {
			alone = append(alone, s)
			continue
		}
		if h.rev != 0 {
			if done, _ := judge(s.pchannel, h.rec, s.checkpoint, s.fence); done {
				alone = append(alone, s)
				continue
			}
		}
		if e, ok := newTxnEntry(s, key, h); ok {
			entries = append(entries, e)
		}
	}
	return entries, alone
}

// newTxnEntry makes s ready to replace h, the record stored at key, or to
// create the key when h says it is absent (rev 0). A record that cannot be
// encoded answers s, as Save would, and is not ok.
func newTxnEntry(s *batchedSave, key string, h hint) (e txnEntry, ok bool) {
	rec := persistence.Record{Checkpoint: s.checkpoint, Term: carriedTerm(h.rec.Term, h.rev)}
	if s.fence != nil {
		rec.Term = uint64(s.fence.term)
	}
	val, err := persistence.EncodeRecord(s.pchannel, rec)
	if err != nil {
		s.done <- fmt.Errorf("etcdcatalog: %w", err)
		return txnEntry{}, false
	}
	e = txnEntry{save: s, key: key, absent: h.rev == 0, stored: h.raw, rec: rec, val: val,
		size: 3*len(key) + len(h.raw) + len(val), ops: 1}
	if s.fence != nil {
		holds := s.fence.holds()
		e.ops += len(holds)
		// The owner key in each compare and in the read, and the
		// values compared.
		e.size += (len(holds)+1)*len(s.fence.ownerKey) + 8*len(holds)
	}
	return e, true
}

// probes says which bounds offered a transaction their probe (bound.offer).
type probes struct{ saves, bytes bool }

// fit tells how many of entries, at least one, the next transaction
// takes within both bounds, and which bounds' probes it was offered: its
// outcome must be told to them (commitTogether).
func (b *Batcher) fit(entries []txnEntry) (int, probes) {
	var p probes
	var maxOps, maxBytes int
	b.mu.Lock()
	maxOps, p.saves = b.saves.offer()
	maxBytes, p.bytes = b.bytes.offer()
	b.mu.Unlock()
	n, ops, bytes := 0, 0, 0
	for _, e := range entries {
		if n > 0 && (ops+e.ops > maxOps || bytes+e.size > maxBytes) {
			break
		}
		n, ops, bytes = n+1, ops+e.ops, bytes+e.size
	}
	return n, p
}

// commitTogether writes txn in one transaction, a lone save too, which
// then holds its commit loop as a batch would (the next batch is what
// queues meanwhile), and answers its saves; but not when the cluster
// refused it, of two saves or more, as too many or too large (nothing
// written, the bound lowered: refused), nor when a compare failed. Then
// nothing was written and every key's record was read: a save that record
// decides (stored ahead, equal, another WAL, a record that cannot be
// decoded) is answered as Save would answer it, a save still to write is
// made ready again on it (retry): to replace the record read, or to
// create the key, gone or not there yet.
func (b *Batcher) commitTogether(txn []txnEntry, p probes) (retry []txnEntry, refused bool) {
	cmps := make([]clientv3.Cmp, 0, len(txn))
	puts := make([]clientv3.Op, len(txn))
	gets := make([]clientv3.Op, 0, len(txn))
	// firstRead is, for each save, where its reads begin among the
	// responses of a failed transaction.
	firstRead := make([]int, len(txn)+1)
	ops, bytes := 0, 0
	for i, e := range txn {
		cmps = append(cmps, e.compares()...)
		puts[i] = clientv3.OpPut(e.key, string(e.val))
		gets = append(gets, e.reads()...)
		firstRead[i+1] = len(gets)
		ops, bytes = ops+e.ops, bytes+e.size
	}
	ctx, cancel := context.WithTimeout(b.closing, b.opt.timeout)
	resp, err := b.c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return b.c.etcd.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
	})
	cancel()
	switch {
	case len(txn) > 1 && errors.Is(err, rpctypes.ErrTooManyOps):
		// The cluster takes fewer operations a transaction than
		// WithMaxBatch says.
		b.mu.Lock()
		b.saves.refuse(ops, p.saves)
		b.bytes.untried(p.bytes)
		b.mu.Unlock()
		return nil, true
	case len(txn) > 1 && tooLarge(err):
		// Likewise for the bytes, refused by etcd or, before sending,
		// by the client.
		b.mu.Lock()
		b.bytes.refuse(bytes, p.bytes)
		b.saves.untried(p.saves)
		b.mu.Unlock()
		return nil, true
	case err != nil:
		b.mu.Lock()
		b.saves.untried(p.saves)
		b.bytes.untried(p.bytes)
		b.mu.Unlock()
		// A save too large alone fails here, as Save would fail it.
		// The transaction may have committed; each caller's retry finds
		// it equal.
		for _, e := range txn {
			e.save.done <- b.closedErr(fmt.Errorf("etcdcatalog: save %q: %w", e.save.pchannel, err))
		}
		return nil, false
	}
	// Taken, or its compares evaluated: the cluster took its size.
	b.mu.Lock()
	b.saves.take(ops, p.saves)
	b.bytes.take(bytes, p.bytes)
	b.mu.Unlock()
	if resp.Succeeded {
		// Every write of one transaction has its header's revision.
		for _, e := range txn {
			b.c.remember(e.key, hint{rev: resp.Header.Revision, rec: e.rec, raw: e.val})
			e.save.done <- nil
		}
		return nil, false
	}
	for i, e := range txn {
		s := e.save
		// As Save after its failed compare: what was read replaces the
		// hint, even at a lower revision (after a reset of etcd it is
		// the current one), and decides the save.
		reads := resp.Responses[firstRead[i]:firstRead[i+1]]
		h, err := b.c.judgeReads(s.pchannel, e.key, s.fence, reads)
		if err != nil {
			if kvs := reads[0].GetResponseRange().GetKvs(); len(kvs) > 0 && errors.As(err, new(*persistence.CorruptRecordError)) {
				b.markUndecodable(e.key, kvs[0].ModRevision)
			}
			s.done <- err
			continue
		}
		b.c.replace(e.key, h)
		if h.rev != 0 {
			if done, err := judge(s.pchannel, h.rec, s.checkpoint, s.fence); done {
				s.done <- err
				continue
			}
		}
		if err := s.lost(); err != nil {
			s.done <- err // as Catalog.save, no second round trip
			continue
		}
		if next, ok := newTxnEntry(s, e.key, h); ok {
			retry = append(retry, next)
		}
	}
	return retry, false
}

// markUndecodable notes that the record at key, of mod revision rev, could
// not be decoded (see Batcher.undecodable).
func (b *Batcher) markUndecodable(key string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.undecodable == nil || len(b.undecodable) >= maxHints {
		b.undecodable = make(map[string]int64) // as many as the hints: forgotten ones cost a round trip
	}
	b.undecodable[key] = rev
}

// stillUndecodable tells whether the record at key is the one found
// undecodable, as far as h, what the Catalog saw there last, tells: a
// later one forgets the mark.
func (b *Batcher) stillUndecodable(key string, h hint) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	rev, ok := b.undecodable[key]
	if ok && h.rev > rev {
		delete(b.undecodable, key)
		return false
	}
	return ok
}

// tooLarge reports whether err is a request refused for its size, which
// was not applied: by etcd (--max-request-bytes), or by gRPC, the
// client's send limit or the server's receive limit, which say so only in
// words. etcd's other ResourceExhausted errors (no space, too many
// requests) are not about the request's size.
func tooLarge(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}
