package etcdcatalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/logutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Catalog stores pchannel checkpoints in etcd. It is safe for concurrent use.
type Catalog struct {
	client    *clientv3.Client
	ownClient bool // Open made the client, so Close closes it
	keys      keys
	pageSize  int64
	holder    string // named in the owner keys it puts (WithHolder)

	// afterPage, when set by a test, runs after each page LoadAll reads.
	afterPage func(page int)
	// awaitingReleases, when set by a test, runs as Close begins to wait
	// for the releases in flight.
	awaitingReleases func()

	closed atomic.Bool

	// calls holds a token per call in flight (WithMaxConcurrentCalls).
	calls chan struct{}
	// closing ends with Close: the calls waiting for a token, and those
	// in flight (etcd).
	closing    context.Context
	endClosing context.CancelFunc
	// etcd makes the calls to etcd, each ended by Close.
	etcd etcdCalls
	// saveTrips, readTrips and pageTrips tell when a save, a read of a few
	// keys or a page of keys is sent again (hedge).
	saveTrips, readTrips, pageTrips roundTrips
	// ownerChecks reads the owner keys that Owns wait on (waitDelete).
	ownerChecks ownerChecks
	// revisions tells when etcd's revision goes back (sawRevision).
	revisions revisions

	mu sync.Mutex
	// hints remembers, per checkpoint key, the record last read or written,
	// so that a save usually needs one round trip. A stale hint only costs
	// a second one: it is never trusted, only compared inside the
	// transaction (see save), and a failed compare replaces it. At most
	// hintCap are kept (putHintLocked).
	hints   map[string]hint
	hintCap int
	// owned holds the Owned values whose watcher runs, for Close to end.
	owned map[*Owned]struct{}
	// releasing counts the releases of ownerships in flight, for Close to
	// wait for; one is counted under mu, and only while the catalog is
	// open (beginRelease).
	releasing sync.WaitGroup
}

var _ persistence.Catalog = (*Catalog)(nil)

// hint is what the catalog last saw at a checkpoint key: the record, its
// stored bytes and its mod revision. rev 0 means absent. The revision only
// orders hints of one etcd history; the bytes are what a save compares.
type hint struct {
	rev int64
	rec persistence.Record
	raw []byte
}

// New returns a catalog on client. The client stays the caller's: Close does
// not close it. A nil client, a nil option or one out of range is an error
// wrapping persistence.ErrInvalidArgument.
func New(client *clientv3.Client, opts ...Option) (*Catalog, error) {
	if client == nil {
		return nil, fmt.Errorf("etcdcatalog: %w: nil client", persistence.ErrInvalidArgument)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	return newCatalog(client, false, o), nil
}

// Open connects to etcd with cfg (endpoints, TLS, auth and timeouts as
// clientv3 has them) and returns a catalog that owns the client: Close
// closes it. A nil option or one out of range is an error wrapping
// persistence.ErrInvalidArgument.
//
// Open caps gRPC's reconnection backoff at 1 s, where gRPC's own grows to
// 120 s: once etcd is back after an outage, the saves must resume within
// the persister's own backoff cap (10 s by default), not two minutes
// later. It gives a connection attempt 5 s, where a second cut a slow
// member's handshake at every retry. DialOptions in cfg come after and
// win.
//
// It also pings each member after DefaultKeepAliveTime without a word from
// it, unless cfg sets DialKeepAliveTime or PermitWithoutStream (etcd closes
// a client that pings idle connections): a member that keeps its
// connections open and answers nothing (a frozen host, a partition that
// drops packets) is then dropped after DefaultKeepAliveTimeout more, and
// the calls go to the others. Without it each call that lands there waits
// out its deadline, for as long as the member hangs, though a quorum
// answers. Its client logs clientv3's warning of each call cut short at
// Debug (ClientLogger), and a call that runs out of time says why its
// last try failed (keepLastTry). A client given to New is taken as it is.
func Open(cfg clientv3.Config, opts ...Option) (*Catalog, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if cfg.DialKeepAliveTime == 0 && !cfg.PermitWithoutStream {
		cfg.DialKeepAliveTime = DefaultKeepAliveTime
		if cfg.DialKeepAliveTimeout == 0 {
			cfg.DialKeepAliveTimeout = DefaultKeepAliveTimeout
		}
	}
	cfg.DialOptions = append([]grpc.DialOption{connectParams, grpc.WithChainUnaryInterceptor(keepLastTry)}, cfg.DialOptions...)
	lg, err := clientLogger(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdcatalog: connect: %w", err)
	}
	cfg.Logger = ClientLogger(lg)
	client, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdcatalog: connect: %w", err)
	}
	return newCatalog(client, true, o), nil
}

// clientLogger is the logger clientv3.New would make of cfg.
func clientLogger(cfg clientv3.Config) (*zap.Logger, error) {
	switch {
	case cfg.Logger != nil:
		return cfg.Logger, nil
	case cfg.LogConfig != nil:
		return cfg.LogConfig.Build()
	}
	lg, err := logutil.CreateDefaultZapLogger(clientv3.ClientLogLevel())
	if err != nil {
		return nil, err
	}
	return lg.Named("etcd-client"), nil
}

// The keep-alive Open sets. The time is gRPC's least: it raises a shorter
// one to it, and etcd's servers take pings 5 s apart and more
// (--grpc-keepalive-min-time).
const (
	DefaultKeepAliveTime    = 10 * time.Second
	DefaultKeepAliveTimeout = 2 * time.Second
)

// connectParams retries a member that refused a connection within a
// second (gRPC's own backoff waits up to two minutes), and gives an attempt
// 5 s to connect: TLS and HTTP/2's first frames, which on a loaded host
// took over a second. An attempt cut sooner is cut again at every retry,
// and the client never connects.
var connectParams = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
})

func newCatalog(client *clientv3.Client, own bool, o options) *Catalog {
	closing, end := context.WithCancel(context.Background())
	c := &Catalog{
		client:     client,
		ownClient:  own,
		keys:       keys{prefix: o.prefix},
		pageSize:   o.pageSize,
		holder:     o.holder,
		hints:      make(map[string]hint),
		hintCap:    maxHints,
		owned:      make(map[*Owned]struct{}),
		calls:      make(chan struct{}, o.maxCalls),
		closing:    closing,
		endClosing: end,
		ownerChecks: ownerChecks{
			waits:   make(map[*ownerWait]struct{}),
			perRead: ownersPerRead,
		},
	}
	c.etcd = etcdCalls{c}
	return c
}

// errNilContext refuses a call given a nil context, a caller's bug that
// would otherwise panic inside the catalog.
var errNilContext = fmt.Errorf("etcdcatalog: %w: nil context", persistence.ErrInvalidArgument)

// acquire waits for a call slot (WithMaxConcurrentCalls) until ctx ends,
// the catalog closes or, for a write of an owner (f), its ownership ends;
// release gives it back. A call that was waiting when the catalog closed
// or the ownership ended fails as one made afterwards would, and sends
// nothing.
func (c *Catalog) acquire(ctx context.Context, op, pchannel string, f *fence) error {
	if ctx == nil {
		return errNilContext
	}
	var lost <-chan struct{}
	if f != nil && f.owner != nil {
		lost = f.owner.lost
	}
	held := true
	select {
	case c.calls <- struct{}{}:
	default:
		select {
		case c.calls <- struct{}{}:
		case <-c.closing.Done():
			held = false
		case <-lost:
			held = false
		case <-ctx.Done():
			// Both the context's error and its cause, if it has one of its
			// own: a call that did not wait fails with the former.
			err := ctx.Err()
			if cause := context.Cause(ctx); cause != nil && cause != err {
				err = fmt.Errorf("%w: %w", err, cause)
			}
			return fmt.Errorf("etcdcatalog: %s %q: waiting for one of %d calls in flight to end: %w",
				op, pchannel, cap(c.calls), err)
		}
	}
	err := c.over(pchannel, f)
	if err != nil && held {
		c.release()
	}
	return err
}

// over is the error of a call made now, if the catalog is closed, its
// client was closed under it (New's, by its owner), or the owner of f has
// lost the pchannel. A call on a closed client would retry until its
// deadline and fail as a timeout.
func (c *Catalog) over(pchannel string, f *fence) error {
	if c.closed.Load() {
		return persistence.ErrClosed
	}
	if c.client.Ctx().Err() != nil {
		return errClientClosed
	}
	if f != nil && f.owner != nil {
		if err := f.owner.Err(); err != nil {
			return f.owner.lostError(pchannel, err)
		}
	}
	return nil
}

func (c *Catalog) release() { <-c.calls }

// errClientClosed is over's error once the client was closed.
var errClientClosed = fmt.Errorf("%w: its etcd client was closed", persistence.ErrClosed)

// Client returns the etcd client the catalog uses.
func (c *Catalog) Client() *clientv3.Client { return c.client }

// Load returns the stored checkpoint of pchannel, or (nil, nil) when none is.
func (c *Catalog) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if c.closed.Load() {
		return nil, persistence.ErrClosed
	}
	if pchannel == "" {
		return nil, fmt.Errorf("etcdcatalog: %w: empty pchannel name", persistence.ErrInvalidArgument)
	}
	if err := c.acquire(ctx, "load", pchannel, nil); err != nil {
		return nil, err
	}
	defer c.release()
	key := c.keys.checkpoint(pchannel)
	resp, err := c.etcd.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("etcdcatalog: load %q: %w", pchannel, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	rec, err := c.decode(pchannel, resp.Kvs[0])
	if err != nil {
		return nil, err
	}
	return rec.Checkpoint, nil
}

// Save stores checkpoint for pchannel unless a checkpoint at or above it is
// stored: equal succeeds without writing, above fails with a
// *persistence.StoredAheadError. Without ownership the record keeps the
// owner term stored with it, so that an owner's older rivals stay fenced,
// unless that term is above the revision of the record's own write: then
// it came from another cluster, or from before a restore of etcd that took
// its revisions back, would fence every owner's saves for good, and is
// dropped. A save with no answer well past the usual round trip is sent
// again to the other members (see hedge.go): its compare lets only one
// copy write.
func (c *Catalog) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if c.closed.Load() {
		return persistence.ErrClosed
	}
	if err := persistence.CheckSaveArgs(pchannel, checkpoint); err != nil {
		return fmt.Errorf("etcdcatalog: %w", err)
	}
	return c.save(ctx, pchannel, checkpoint, nil)
}

// fence conditions a save on the writer still owning the pchannel.
type fence struct {
	// owner, if known, ends a wait for a call slot when it loses the
	// pchannel (acquire).
	owner    *Owned
	ownerKey string
	term     int64
	// lease is the owner's: the term alone is the owner key's create
	// revision, which etcd hands out again after its data is wiped or
	// restored from a backup, so that a stale owner's term can equal the
	// new owner's. Their leases differ. 0 fences on the term alone.
	lease clientv3.LeaseID
}

// holds is the compare that the owner key is still this fence's.
func (f *fence) holds() []clientv3.Cmp {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(f.ownerKey), "=", f.term)}
	if f.lease != 0 {
		cmps = append(cmps, clientv3.Compare(clientv3.LeaseValue(f.ownerKey), "=", int64(f.lease)))
	}
	return cmps
}

// heldBy reports whether the owner key read (nil: none) is this fence's.
func (f *fence) heldBy(owner *mvccpb.KeyValue) bool {
	return owner != nil && owner.CreateRevision == f.term && (f.lease == 0 || clientv3.LeaseID(owner.Lease) == f.lease)
}

// save is the read-compare-swap loop behind every save.
//
// The transaction compares the checkpoint key's stored bytes with those of
// the record judged lower than checkpoint (create revision 0 when nothing was
// stored), so the value is replaced only if it is still that record. Not its
// mod revision: etcd reuses revision numbers after its data is wiped or a
// snapshot is restored, so a remembered revision can match a different,
// higher record, and a save would lower it. Equal bytes are the very record
// the judgement was made on, so it holds whatever history etcd went
// through.
//
// The compare is equality, not order: ordering the value itself through an
// order-preserving encoding (etcd compares values as bytes) was rejected, as
// the order of a MessageID is its WAL's LT, which byte order matches only for
// some encodings (not for signed offsets, nor for Pulsar IDs, whose partition
// is not part of the order), and the record carries a version, an owner term
// and a checksum that must take no part in the comparison. Comparing for
// equality keeps the record format free and the order defined in one place,
// package wal.
//
// The price would be a read before every write; the catalog avoids it by
// judging against the record it last read or wrote at the key (its hint),
// which the compare then confirms. When the compare fails, the transaction
// returns the current record in the same round trip, and the loop judges that
// one. When the hint says no write is needed (equal, ahead, another WAL, a
// higher term), the record is read again before answering, so the answer is
// never based on a stale record. Every failed compare means another writer
// succeeded, so the loop makes progress; it ends when the value is written,
// found equal, found ahead, fenced, or ctx ends.
func (c *Catalog) save(ctx context.Context, pchannel string, checkpoint wal.MessageID, f *fence) error {
	if err := c.acquire(ctx, "save", pchannel, f); err != nil {
		return err
	}
	defer c.release()
	key := c.keys.checkpoint(pchannel)
	h, fresh := c.hint(key), false
	for {
		if h.rev != 0 {
			if done, err := judge(pchannel, h.rec, checkpoint, f); done {
				if fresh {
					return err
				}
				// Only a current record can justify refusing or skipping.
				if h, err = c.read(ctx, pchannel, key, f); err != nil {
					return err
				}
				c.replace(key, h)
				fresh = true
				continue
			}
		}
		term := carriedTerm(h.rec.Term, h.rev)
		if f != nil {
			term = uint64(f.term)
		}
		rec := persistence.Record{Checkpoint: checkpoint, Term: term}
		val, err := persistence.EncodeRecord(pchannel, rec)
		if err != nil {
			return fmt.Errorf("etcdcatalog: %w", err)
		}
		cmp := clientv3.Compare(clientv3.Value(key), "=", string(h.raw))
		if h.rev == 0 {
			cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		}
		// A save needs a second round trip when its hint was stale: by
		// then the catalog may have closed, or the owner lost the
		// pchannel, and a write made now would come after.
		if err := c.over(pchannel, f); err != nil {
			return err
		}
		cmps := []clientv3.Cmp{cmp}
		reads := []clientv3.Op{clientv3.OpGet(key)}
		if f != nil {
			cmps = append(cmps, f.holds()...)
			reads = append(reads, clientv3.OpGet(f.ownerKey))
		}
		resp, err := c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return c.etcd.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(val))).Else(reads...).Commit()
		})
		if err != nil {
			// The write may have committed; a retry finds it equal.
			return fmt.Errorf("etcdcatalog: save %q: %w", pchannel, err)
		}
		if resp.Succeeded {
			// The transaction's one write is at the header's revision.
			c.remember(key, hint{rev: resp.Header.Revision, rec: rec, raw: val})
			return nil
		}
		if h, err = c.judgeReads(pchannel, key, f, resp.Responses); err != nil {
			return err
		}
		// What the failed compare found replaces the hint, even if its
		// revision is lower: after a reset of etcd it is the current one.
		c.replace(key, h)
		fresh = true
	}
}

// carriedTerm is the owner term a write without ownership gives the
// record it replaces, stored with term at revision rev: the same, so that
// an owner's older rivals stay fenced by it, unless no owner of this etcd
// could have written it. An owner's term is the create revision of its
// owner key, which comes before any write it makes, so a term above the
// revision of the record's own write came from another cluster, or from
// before a restore of etcd that took its revisions back; kept, it would
// fence every owner's saves for good, and it is dropped (0).
func carriedTerm(term uint64, rev int64) uint64 {
	if rev > 0 && term > uint64(rev) {
		return 0
	}
	return term
}

// sameWAL tells whether two IDs are of one WAL by their types, not their
// WALName: a registered type's methods may panic, and judge runs on a
// Batcher's commit goroutine too.
func sameWAL(a, b wal.MessageID) bool {
	wa, _ := wal.NameOf(a)
	wb, _ := wal.NameOf(b)
	return wa == wb
}

// judge decides whether checkpoint may replace the stored record: done is
// false when it may be written, else err is the answer (nil for an equal
// value). The IDs are ordered by wal.Compare, so that an ID type registered
// outside package wal whose LT or EQ panics fails this save with
// ErrInvalidArgument (wrapping wal.ErrCorruptID), as the other stores do,
// instead of panicking in the caller or in a Batcher's commit goroutine.
func judge(pchannel string, stored persistence.Record, checkpoint wal.MessageID, f *fence) (done bool, err error) {
	switch {
	case f != nil && stored.Term > uint64(f.term):
		return true, &FencedError{PChannel: pchannel, Term: uint64(f.term), StoredTerm: stored.Term}
	case !sameWAL(stored.Checkpoint, checkpoint):
		storedWAL, _ := wal.NameOf(stored.Checkpoint)
		return true, fmt.Errorf("etcdcatalog: %w: pchannel %q stores a %s checkpoint, got %s: %w",
			persistence.ErrInvalidArgument, pchannel, storedWAL, wal.String(checkpoint), wal.ErrWALMismatch)
	}
	order, err := wal.Compare(checkpoint, stored.Checkpoint)
	switch {
	case err != nil:
		return true, fmt.Errorf("etcdcatalog: %w: pchannel %q: %s cannot be ordered against the stored checkpoint %s: %w",
			persistence.ErrInvalidArgument, pchannel, wal.String(checkpoint), wal.String(stored.Checkpoint), err)
	case order == 0:
		return true, nil
	case order < 0:
		return true, &persistence.StoredAheadError{PChannel: pchannel, Stored: stored.Checkpoint, Attempted: checkpoint}
	default:
		return false, nil
	}
}

// read reads the record at key, and the owner key when fenced, in one
// read-only transaction.
func (c *Catalog) read(ctx context.Context, pchannel, key string, f *fence) (hint, error) {
	reads := []clientv3.Op{clientv3.OpGet(key)}
	if f != nil {
		reads = append(reads, clientv3.OpGet(f.ownerKey))
	}
	resp, err := c.readTogether(ctx, reads...)
	if err != nil {
		return hint{}, fmt.Errorf("etcdcatalog: save %q: %w", pchannel, err)
	}
	return c.judgeReads(pchannel, key, f, resp.Responses)
}

// readTogether makes reads in one read-only transaction, at one revision,
// sent again when no answer comes, on the reads' estimate (hedge).
func (c *Catalog) readTogether(ctx context.Context, reads ...clientv3.Op) (*clientv3.TxnResponse, error) {
	return hedge(c, &c.readTrips, maxHedges, ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return c.etcd.Txn(ctx).Then(reads...).Commit()
	})
}

// judgeReads checks the owner key read beside the record, when fenced, and
// returns the record read as the new hint.
func (c *Catalog) judgeReads(pchannel, key string, f *fence, reads []*etcdserverpb.ResponseOp) (hint, error) {
	if f != nil {
		owner := reads[1].GetResponseRange().GetKvs()
		if len(owner) == 0 || !f.heldBy(owner[0]) {
			fe := &FencedError{PChannel: pchannel, Term: uint64(f.term)}
			if len(owner) > 0 {
				fe.OwnerTerm = uint64(owner[0].CreateRevision)
			}
			return hint{}, fe
		}
	}
	kvs := reads[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return hint{}, nil
	}
	rec, err := c.decode(pchannel, kvs[0])
	if err != nil {
		return hint{}, err
	}
	return hint{rev: kvs[0].ModRevision, rec: rec, raw: kvs[0].Value}, nil
}

// LoadAll returns every stored checkpoint under the prefix, but for a
// record under the empty pchannel name, which no node can use. It reads
// page-size keys per request; the first request fixes the revision and every
// later page is read at it, so the result is one snapshot even while others
// write. Should that revision be compacted away between pages, the read
// starts over at a new one, as often as that happens: an etcd compacted
// more often than the whole read takes keeps it starting over until ctx
// ends. Pages fewer and larger (WithPageSize) shorten the read.
func (c *Catalog) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	if err := c.over("", nil); err != nil {
		return nil, err
	}
	var all map[string]wal.MessageID
	err := c.scan(ctx, "load all", func() { all = make(map[string]wal.MessageID) },
		func(pchannel string, kv *mvccpb.KeyValue) error {
			if pchannel == "" {
				// No node can load, save or own the empty name: a record
				// there is not one of the pchannels a node recovers, and
				// one it cannot decode must not fail their recovery.
				// Inspect shows it, and DeleteBadName clears it.
				return nil
			}
			rec, err := c.decode(pchannel, kv)
			if err != nil {
				return err
			}
			all[pchannel] = rec.Checkpoint
			return nil
		})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// scan calls each for every record under the prefix, read page by page at
// one revision, so that the whole reads as one snapshot however many pages
// it takes. When that revision is compacted away between pages it starts
// again from the top (calling reset first), until ctx is done.
func (c *Catalog) scan(ctx context.Context, op string, reset func(), each func(pchannel string, kv *mvccpb.KeyValue) error) error {
	return c.scanKeys(ctx, op, c.keys.pchannelOf, false, reset, each)
}

// scanKeys is scan of the keys name finds a pchannel in: the records'
// (keys.pchannelOf), the owners', or the stray ones. keysOnly leaves the
// values, and the leases, unread.
func (c *Catalog) scanKeys(ctx context.Context, op string, name func(key string) (string, bool), keysOnly bool, reset func(),
	each func(pchannel string, kv *mvccpb.KeyValue) error) error {
	if ctx == nil {
		return errNilContext
	}
	for {
		reset()
		err := c.scanAt(ctx, op, name, keysOnly, each)
		if errors.Is(err, rpctypes.ErrCompacted) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

func (c *Catalog) scanAt(ctx context.Context, op string, name func(key string) (string, bool), keysOnly bool,
	each func(pchannel string, kv *mvccpb.KeyValue) error) error {
	start := c.keys.pchannels()
	end := clientv3.GetPrefixRangeEnd(start)
	var rev int64
	for page := 0; ; page++ {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(c.pageSize)}
		if keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.etcd.Scan(ctx, start, opts...)
		if err != nil {
			return fmt.Errorf("etcdcatalog: %s: %w", op, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			pchannel, ok := name(string(kv.Key))
			if !ok {
				continue // a key of another kind
			}
			if err := each(pchannel, kv); err != nil {
				return err
			}
		}
		if c.afterPage != nil {
			c.afterPage(page)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Close closes the catalog: later calls fail with persistence.ErrClosed,
// and so do the calls waiting for a slot (WithMaxConcurrentCalls) and
// those in flight, which it ends (a save ended so may still be applied
// by etcd, never acknowledged; an Own, still claim the pchannel until its
// session ends); a release of an ownership in flight goes on, within its
// own context, and Close waits for it, up to ReleaseTimeout, before it
// closes a client made by Open; every Owned obtained from it stops
// watching and reports ownership lost (its owner key stays until its
// session ends or it is released); and a client made by Open is closed.
func (c *Catalog) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return persistence.ErrClosed
	}
	c.endClosing()
	c.stopOwnerChecks()
	c.mu.Lock()
	owned := make([]*Owned, 0, len(c.owned))
	for o := range c.owned {
		owned = append(owned, o)
	}
	c.mu.Unlock()
	for _, o := range owned {
		o.lose(persistence.ErrClosed)
		<-o.watching
	}
	if c.ownClient {
		c.awaitReleases()
		if err := c.client.Close(); err != nil {
			return fmt.Errorf("etcdcatalog: close client: %w", err)
		}
	}
	return nil
}

// awaitReleases waits for the releases in flight, up to ReleaseTimeout:
// a client closed under one would cut it. None begins once closed is set
// and mu was taken after (Close).
func (c *Catalog) awaitReleases() {
	if c.awaitingReleases != nil {
		c.awaitingReleases()
	}
	released := make(chan struct{})
	go func() {
		c.releasing.Wait()
		close(released)
	}()
	grace := time.NewTimer(ReleaseTimeout)
	defer grace.Stop()
	select {
	case <-released:
	case <-grace.C: // a release with no deadline, on an etcd out of reach
	}
}

// beginRelease counts a release of an ownership in flight, unless the
// catalog is closed: then it returns false, and the release sends nothing.
func (c *Catalog) beginRelease() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.releasing.Add(1)
	return true
}

// decode decodes a stored record and remembers its revision and term.
func (c *Catalog) decode(pchannel string, kv *mvccpb.KeyValue) (persistence.Record, error) {
	rec, err := persistence.DecodeRecord(pchannel, kv.Value)
	if err != nil {
		// The key and what mends it, for the node's log, where the read or
		// save is retried at every backoff.
		return persistence.Record{}, &persistence.CorruptRecordError{PChannel: pchannel,
			Err: fmt.Errorf("%w, under key %q (lowwater verify says how to repair it)", err, kv.Key)}
	}
	c.remember(string(kv.Key), hint{rev: kv.ModRevision, rec: rec, raw: kv.Value})
	return rec, nil
}

func (c *Catalog) hint(key string) hint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hints[key]
}

// remember records what was seen at key, unless a later revision was seen
// (replies of concurrent calls arrive in any order). Should etcd's revisions
// have gone back, the hint kept is stale until a save's failed compare
// replaces it.
func (c *Catalog) remember(key string, h hint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.hints[key]; ok && old.rev > h.rev {
		return
	}
	c.putHintLocked(key, h)
}

// maxHints bounds the hints a catalog keeps: well above the pchannels of
// one cluster, and about 36 MB at most with names of 40 bytes. Pchannels come and go over a
// process's life, deleted by other nodes or tools, and one hint per name
// ever seen would grow for good.
const maxHints = 1 << 17

// putHintLocked records h at key, first forgetting an arbitrary other
// hint when hintCap are kept: losing one costs its next save a round trip.
func (c *Catalog) putHintLocked(key string, h hint) {
	if _, ok := c.hints[key]; !ok && len(c.hints) >= c.hintCap {
		for k := range c.hints {
			delete(c.hints, k)
			break
		}
	}
	c.hints[key] = h
}

// replace records what a save found at key, whatever the revision of the
// hint it replaces.
func (c *Catalog) replace(key string, h hint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.rev == 0 {
		delete(c.hints, key)
		return
	}
	c.putHintLocked(key, h)
}
