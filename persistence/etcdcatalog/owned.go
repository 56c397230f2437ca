package etcdcatalog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

var (
	// ErrOwned is returned by TryOwn when another session owns the pchannel.
	ErrOwned = errors.New("etcdcatalog: pchannel owned by another session")
	// ErrSessionDone is why ownership ends when its session's lease is lost,
	// expired or closed.
	ErrSessionDone = errors.New("etcdcatalog: owner session ended")
	// ErrOwnerChanged is why ownership ends when the owner key is deleted or
	// replaced (lease revoked or expired, or removed by hand), or a save
	// finds that a newer owner took over.
	ErrOwnerChanged = errors.New("etcdcatalog: owner key deleted or taken over")
	// ErrReleased is why ownership ends after Release or Close.
	ErrReleased = errors.New("etcdcatalog: ownership released")
	// ErrOwnerWithoutLease is returned by Own and TryOwn when the owner key
	// carries no lease (Owner.Leaseless): put by hand or by another tool, it
	// is no session's and never expires. Own does not wait for it: it
	// would wait for good, for an operator who does not know.
	ErrOwnerWithoutLease = errors.New("etcdcatalog: owner key with no lease")
)

// OwnedError is returned by TryOwn when another session owns the
// pchannel, and by Own and TryOwn when an owner key with no lease holds
// it (Lease 0).
type OwnedError struct {
	PChannel string
	// Lease is the lease the owner key is bound to.
	Lease clientv3.LeaseID
	// Term is the current owner's term.
	Term uint64
	// Holder is who the owner says it is (WithHolder), "" when it names
	// none.
	Holder string
}

func (e *OwnedError) Error() string {
	if e.Lease == clientv3.NoLease {
		return fmt.Sprintf("etcdcatalog: pchannel %q held by an owner key with no lease (term %d), "+
			"put by hand or by another tool: it never expires; 'lowwater release' removes it", e.PChannel, e.Term)
	}
	if e.Holder != "" {
		return fmt.Sprintf("etcdcatalog: pchannel %q owned by %q (lease %x, term %d)", e.PChannel, e.Holder, int64(e.Lease), e.Term)
	}
	return fmt.Sprintf("etcdcatalog: pchannel %q owned by lease %x (term %d)", e.PChannel, int64(e.Lease), e.Term)
}

// Is makes errors.Is(err, ErrOwned) hold, and errors.Is(err,
// ErrOwnerWithoutLease) for a key with no lease.
func (e *OwnedError) Is(target error) bool {
	return target == ErrOwned || target == ErrOwnerWithoutLease && e.Lease == clientv3.NoLease
}

// FencedError is returned when a writer that no longer owns the pchannel
// tries to save it. Nothing was written.
type FencedError struct {
	PChannel string
	// Term is the writer's term.
	Term uint64
	// OwnerTerm is the current owner's term, 0 when nobody owns the pchannel
	// or the refusal came from elsewhere.
	OwnerTerm uint64
	// StoredTerm is set when the stored record carries a term above the
	// writer's.
	StoredTerm uint64
	// Cause is why ownership ended, when it was known before the save
	// (ErrSessionDone, ErrOwnerChanged, ErrReleased, persistence.ErrClosed);
	// nil when the store refused the save. After a refusal for a stored
	// term above the writer's, later saves get that refusal again.
	Cause error
}

func (e *FencedError) Error() string {
	msg := fmt.Sprintf("etcdcatalog: pchannel %q: writer of term %d is fenced", e.PChannel, e.Term)
	switch {
	case e.Cause != nil:
		return msg + ": " + e.Cause.Error()
	case e.StoredTerm != 0:
		return msg + fmt.Sprintf(": stored record has term %d", e.StoredTerm)
	case e.OwnerTerm == e.Term:
		return msg + fmt.Sprintf(": owned at term %d under another lease (etcd handed the term out again: its data was wiped or restored)", e.OwnerTerm)
	case e.OwnerTerm != 0:
		return msg + fmt.Sprintf(": owned at term %d", e.OwnerTerm)
	default:
		return msg + ": no owner"
	}
}

// Is makes errors.Is(err, persistence.ErrFenced) hold.
func (e *FencedError) Is(target error) bool { return target == persistence.ErrFenced }

// Unwrap exposes the cause, if known.
func (e *FencedError) Unwrap() error { return e.Cause }

// advisedTTL is the least session TTL, in seconds, that rides out a
// member that answers nothing (see Own); NewSession warns under it.
const advisedTTL = 25

// NewSession makes a session to own pchannels with (Own), whose lease
// lives ttl seconds past its last renewal (see Own for how long to make
// it). The lease is granted under ctx, which bounds the wait for etcd, and
// the session outlives ctx: concurrency.NewSession grants its own lease
// with no deadline, and waits for good while etcd is out of reach, and a
// session given concurrency.WithContext ends with that context. End the
// session when done with CloseSession: it revokes the lease, which lets
// every pchannel it owns go at once. A TTL under 25 s is taken, with a
// Warn line on the client's logger.
func (c *Catalog) NewSession(ctx context.Context, ttl int) (*concurrency.Session, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("etcdcatalog: %w: session TTL %d s, want 1 or more", persistence.ErrInvalidArgument, ttl)
	}
	if c.closed.Load() {
		return nil, persistence.ErrClosed
	}
	if lg := c.client.GetLogger(); ttl < advisedTTL && lg != nil {
		lg.Warn("session TTL under the advised 25 s: a member that answers nothing, or an etcd restart, can end it, and its pchannels move to another node",
			zap.Int("ttl", ttl), zap.Int("advised", advisedTTL))
	}
	// Sent again when no answer comes, as a save is: a copy that comes
	// second grants a lease no key is put on, which runs out after ttl.
	lease, err := hedge(c, &c.saveTrips, maxHedges, ctx, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) {
		return onLeader(ctx, func(ctx context.Context) (*clientv3.LeaseGrantResponse, error) {
			return c.client.Grant(ctx, int64(ttl))
		})
	})
	if err != nil {
		return nil, fmt.Errorf("etcdcatalog: grant a session's lease: %w", c.closedErr(causeOf(ctx, err)))
	}
	return concurrency.NewSession(c.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(ttl))
}

// CloseSession ends session, within ctx: its keep-alive stops, and its
// lease is revoked, which lets every pchannel it owns go at once. A lease
// etcd no longer knows (expired, or revoked already) is ended already: no
// error. The session's own Close revokes it too, but in one call bounded
// by the session's TTL alone: a member that answers nothing holds that
// call to the TTL, one Close in three, and a node's stop with it. The
// revoke is sent again as a save is when no answer comes (hedge): a copy
// that comes second finds the lease gone. Should the revoke fail, the
// lease runs out after its TTL, for nothing renews it any longer.
func (c *Catalog) CloseSession(ctx context.Context, session *concurrency.Session) error {
	if ctx == nil {
		return errNilContext
	}
	if session == nil {
		return fmt.Errorf("etcdcatalog: %w: nil session", persistence.ErrInvalidArgument)
	}
	session.Orphan()
	if c.closed.Load() {
		return persistence.ErrClosed
	}
	_, err := hedge(c, &c.saveTrips, maxHedges, ctx, func(ctx context.Context) (*clientv3.LeaseRevokeResponse, error) {
		return onLeader(ctx, func(ctx context.Context) (*clientv3.LeaseRevokeResponse, error) {
			return c.client.Revoke(ctx, session.Lease())
		})
	})
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcdcatalog: revoke a session's lease: %w", c.closedErr(causeOf(ctx, err)))
	}
	return nil
}

// Own makes session the owner of pchannel, waiting while another session
// owns it, until ctx or the session ends. An owner key with no lease, which
// no session holds and which never expires, is not waited for: Own
// returns an *OwnedError at once (errors.Is ErrOwnerWithoutLease). Own
// tells nothing while it waits: to know whether it will, and for whom,
// call TryOwn first, whose *OwnedError names the owner. The owner key is
// created in one transaction, bound to the session's lease, so it goes
// when the session does. Owning again with the session that already owns
// the pchannel (say, after an Own whose reply was lost) returns the same
// term, and takes the ownership over: the earlier Owned still saves under
// that term, its Release deletes nothing, and the later one's Release
// ends both.
//
// The session's TTL bounds how long a dead node's pchannels wait for a new
// owner, and must outlast a member that answers nothing: Open's client
// drops one after 12 s (its keep-alive), and the lease, renewed every
// third of the TTL, may have only two thirds of it left when the member
// stops answering. Under about 19 s, a session whose keep-alive stream is
// on such a member ends though a quorum answers, and its pchannels stop:
// freezing that member of a 3-member cluster at the worst moment ended
// sessions of 15 s and 18 s 10.0–12.4 s after, and those of 20 s held with
// 0.7 s to spare (a trial of 31 freezes), 25 s with 4.2 s; the same with
// two processes spinning on the host's two cores, for the drop is a
// timer's, not the processor's. Give 25 s or more; 30 s leaves room for
// what the trial did not try, such as a member's slow disk.
//
// Own fails at once with ErrSessionDone on a session that ended, and on
// one whose lease etcd no longer knows though the session has not heard
// yet (Done is closed only after its next keep-alive, up to a third of
// its TTL later): either way, own on a new session.
//
// Each Owned watches its owner key (a goroutine and an etcd watch) until
// the ownership ends or it is closed: Close one you are done with, before
// owning the pchannel again with the same session (to respawn its actor,
// say), or both keep watching until the session ends.
//
// While it waits, Own watches the owner key, and the catalog reads it every
// 1–2 s as well, with the keys of its other waiting Owns, up to 64 to a
// read (a serializable read, which its member answers from its own store):
// a watch held by a member that answers nothing hears of no deletion until
// the client's keep-alive drops the member.
//
// The session may use another client than the catalog, but must be on the
// same etcd cluster. If ctx ends after the key was created but before the
// reply, the key stays until the session ends or Own is called again. A
// copy of the claim sent to a member that answers nothing, and cut short
// when another copy was answered, may yet reach etcd when the member comes
// back, as any call abandoned there may: after a Release of the ownership,
// it finds the mark the release left, and writes nothing (claim). Each
// release writes that mark, one key per pchannel
// (<prefix>/wal/<pchannel>/released).
func (c *Catalog) Own(ctx context.Context, pchannel string, session *concurrency.Session) (*Owned, error) {
	return c.own(ctx, pchannel, session, true)
}

// TryOwn is Own without the wait: when another session owns pchannel it
// returns an *OwnedError (errors.Is ErrOwned) at once.
func (c *Catalog) TryOwn(ctx context.Context, pchannel string, session *concurrency.Session) (*Owned, error) {
	return c.own(ctx, pchannel, session, false)
}

func (c *Catalog) own(ctx context.Context, pchannel string, session *concurrency.Session, wait bool) (*Owned, error) {
	if ctx == nil {
		return nil, errNilContext
	}
	if c.closed.Load() {
		return nil, persistence.ErrClosed
	}
	// The names Save takes, no other: an owner key of a name no record
	// can be saved under would hold the pchannel for nothing.
	if err := persistence.ValidatePChannel(pchannel); err != nil {
		return nil, fmt.Errorf("etcdcatalog: %w", err)
	}
	if session == nil {
		return nil, fmt.Errorf("etcdcatalog: %w: nil session", persistence.ErrInvalidArgument)
	}
	// A session that ends cannot own anything, and a catalog closed owns
	// nothing more: stop waiting then. The wait for another owner to go
	// is a watch, no call Close ends (etcdCalls).
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(session.Ctx(), func() { cancel(ErrSessionDone) })
	defer stop()
	stopClosed := context.AfterFunc(c.closing, func() { cancel(persistence.ErrClosed) })
	defer stopClosed()

	key := c.keys.owner(pchannel)
	lease := session.Lease()
	token := ownerToken(lease, c.holder)
	released := int64(0) // the mod revision of the last release's mark, as last read
	for {
		resp, err := c.claim(ctx, pchannel, key, released, lease, token)
		if err != nil {
			return nil, err
		}
		if resp.Succeeded {
			return c.newOwned(ctx, pchannel, key, token, session, resp.Header.Revision)
		}
		released = 0
		if mark := resp.Responses[1].GetResponseRange().GetKvs(); len(mark) > 0 {
			released = mark[0].ModRevision
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue // released since it was last read: claim again
		}
		if clientv3.LeaseID(kvs[0].Lease) == lease {
			retaken, err := c.retake(ctx, pchannel, kvs[0], token)
			if err != nil {
				return nil, err
			}
			if !retaken.Succeeded {
				continue // the key changed since: read it again
			}
			return c.newOwned(ctx, pchannel, key, token, session, kvs[0].CreateRevision)
		}
		if !wait || kvs[0].Lease == int64(clientv3.NoLease) {
			o := ownerOf(kvs[0])
			return nil, &OwnedError{PChannel: pchannel, Lease: o.Lease, Term: o.Term, Holder: o.Holder}
		}
		if err := c.waitDelete(ctx, kvs[0], resp.Header.Revision+1); err != nil {
			return nil, fmt.Errorf("etcdcatalog: own %q: %w", pchannel, causeOf(ctx, err))
		}
	}
}

// claim puts the owner key of pchannel under lease, holding token, unless
// it exists or the pchannel was released since released, the mod revision
// of the release mark (keys.released) as the Own last read it, 0 for none;
// otherwise it reads both. It takes a call slot: Own's wait for another
// owner to go holds none, and the catalog's reader of the owner keys
// waited on one for each of its reads (readOwnersOnce).
//
// It is sent again when no answer comes (commit): of two copies, the one
// that comes second finds the key, on the session's lease, and writes
// nothing; should its answer come first, Own retakes the key, as it would
// one an earlier Own of the session put. A copy held by a member that
// answers nothing may reach etcd long after, when the member comes back,
// as may any call abandoned there: the mark keeps it from putting back
// the key of an ownership released since, which no Owned would release
// again, and which would hold every other node off the pchannel until the
// session ended.
func (c *Catalog) claim(ctx context.Context, pchannel, key string, released int64, lease clientv3.LeaseID, token string) (*clientv3.TxnResponse, error) {
	if err := c.acquire(ctx, "own", pchannel, nil); err != nil {
		return nil, err
	}
	defer c.release()
	mark := c.keys.released(pchannel)
	resp, err := c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return c.etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
				clientv3.Compare(clientv3.ModRevision(mark), "=", released)).
			Then(clientv3.OpPut(key, token, clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key), clientv3.OpGet(mark, clientv3.WithKeysOnly())).
			Commit()
	})
	if err != nil {
		return nil, ownFailed(ctx, pchannel, err)
	}
	return resp, nil
}

// ownFailed is the error of a claim or a retake: a lease etcd no longer
// knows is the session's end, which the session tells (ErrSessionDone)
// only once its next keep-alive fails, a third of its TTL later.
func ownFailed(ctx context.Context, pchannel string, err error) error {
	err = causeOf(ctx, err)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("etcdcatalog: own %q: %w (%w)", pchannel, ErrSessionDone, err)
	}
	return fmt.Errorf("etcdcatalog: own %q: %w", pchannel, err)
}

// retake puts token in the owner key owner, which the session's lease
// holds already (an Own again with that session), keeping its term: an
// earlier Owned of the session then no longer matches the key's value, and
// its Release, late maybe (sent before a partition, delivered after it),
// deletes nothing. It fails if the key changed since it was read (its mod
// revision): a retake delivered late, after a later Own of the session
// retook the key, must not put a token that no Owned holds, which no
// Release would then delete. The same compare makes it safe to send twice
// (commit): the copy that comes second finds the key changed, and writes
// nothing.
func (c *Catalog) retake(ctx context.Context, pchannel string, owner *mvccpb.KeyValue, token string) (*clientv3.TxnResponse, error) {
	if err := c.acquire(ctx, "own", pchannel, nil); err != nil {
		return nil, err
	}
	defer c.release()
	key := string(owner.Key)
	resp, err := c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return c.etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", owner.ModRevision),
				clientv3.Compare(clientv3.CreateRevision(key), "=", owner.CreateRevision),
				clientv3.Compare(clientv3.LeaseValue(key), "=", owner.Lease)).
			Then(clientv3.OpPut(key, token, clientv3.WithLease(clientv3.LeaseID(owner.Lease)))).
			Commit()
	})
	if err != nil {
		return nil, ownFailed(ctx, pchannel, err)
	}
	return resp, nil
}

// ownerToken is the value an Own puts in the owner key: the lease, for a
// reader, a random part that tells one Owned of the session from
// another, and the holder (WithHolder), for an operator.
func ownerToken(lease clientv3.LeaseID, holder string) string {
	return strconv.FormatInt(int64(lease), 16) + "/" + strconv.FormatUint(rand.Uint64(), 16) + "/" + holder
}

// ownerOf reads an owner key. The holder is read from a value of
// ownerToken's form alone, naming the key's own lease: another value with
// a lease was put by hand or by another tool, not by Own (Foreign), and
// whatever follows a slash in it names nobody.
func ownerOf(kv *mvccpb.KeyValue) Owner {
	o := Owner{Term: uint64(kv.CreateRevision), Lease: clientv3.LeaseID(kv.Lease)}
	if o.Lease == clientv3.NoLease {
		return o
	}
	parts := strings.SplitN(string(kv.Value), "/", 3)
	if len(parts) == 1 && parts[0] == strconv.FormatInt(kv.Lease, 16) {
		return o // the lease alone, as an Own put it before the holder
	}
	if len(parts) != 3 || parts[0] != strconv.FormatInt(kv.Lease, 16) {
		o.Foreign = true
		return o
	}
	if _, err := strconv.ParseUint(parts[1], 16, 64); err != nil {
		o.Foreign = true
		return o
	}
	if len(parts[2]) <= MaxHolderLen && isText(parts[2]) {
		o.Holder = parts[2]
	}
	return o
}

// causeOf prefers the reason ctx was cancelled (the session ended) to the
// bare context.Canceled the client reports.
func causeOf(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return cause
	}
	return err
}

// waitDelete returns nil once owner's key is deleted at or after revision
// rev, or found gone or another's, or when rev was compacted away, the
// client closed or the member watching has no leader: the caller then
// reads the key again.
//
// The watch requires a leader. A member cut off from its peers hears of
// no deletion, and a wait that the client had sent there lasted as long
// as the cut, though the other members served and the owner's lease had
// run out on them. Such a member ends the watch once it has been without
// a leader for three election timeouts (3 s by default), and refuses a new
// one at once; the key is read again, on a member with a leader (onLeader),
// after a pause, so that a wait on members none of which has a leader does
// not spin.
//
// A member that answers nothing (frozen, or behind a partition that drops
// packets) ends nothing: the watch waits there until the client's
// keep-alive drops the member (12 s with Open's), and with no keep-alive
// for ever. So the key is also read every ownerRecheck or so, with the
// keys of the catalog's other waits (readOwners), each read sent again to
// the other members when it has no answer (readTogether).
// The watch is asked for on a goroutine of its own: clientv3's Watch
// returns only once etcd has created the watch, and the waits of a client
// share one stream, so that a stream held by such a member held the next
// wait's Watch too, before any read.
func (c *Catalog) waitDelete(ctx context.Context, owner *mvccpb.KeyValue, rev int64) error {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	watched := make(chan clientv3.WatchChan, 1)
	go func() { watched <- c.client.Watch(ctx, string(owner.Key), clientv3.WithRev(rev)) }()
	var events clientv3.WatchChan
	defer func() {
		cancel() // Watch returns at once, if it has not yet
		if events == nil {
			<-watched
		}
	}()
	read := c.awaitOwner(owner)
	defer c.forgetOwner(read)
	for {
		select {
		case events = <-watched:
			watched = nil
		case wr, ok := <-events:
			if !ok {
				return ctx.Err()
			}
			if wr.CompactRevision != 0 {
				return nil
			}
			if err := wr.Err(); errors.Is(err, rpctypes.ErrNoLeader) {
				return sleep(ctx, noLeaderPause)
			} else if err != nil {
				return err
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					return nil
				}
			}
		case <-read.gone:
			return nil
		}
	}
}

// Owned is the ownership of one pchannel by one session, and the catalog of
// that pchannel for its owner: Save writes only while the ownership holds,
// and records the owner's term. Calls naming another pchannel are refused
// with persistence.ErrInvalidArgument. It is safe for concurrent use.
type Owned struct {
	c *Catalog
	// batcher, if not nil, is the Batcher its saves go through
	// (Batcher.Own).
	batcher  *Batcher
	pchannel string
	ownerKey string
	// token is the owner key's value as this Owned's Own put it
	// (ownerToken): Release deletes the key only while it holds it.
	token string
	term  int64
	lease clientv3.LeaseID // the session's, which the owner key carries

	closed atomic.Bool
	// keyDeleted is set once a release's delete of the owner key went
	// through (or found it another's): a release after that sends
	// nothing, while one after a failed delete tries it again.
	keyDeleted atomic.Bool

	lostOnce sync.Once
	lost     chan struct{} // closed when the ownership is known to be over
	cause    error         // why; written before lost is closed
	ctx      context.Context
	endCtx   context.CancelCauseFunc // ends ctx with the cause, in lose

	stopWatch context.CancelFunc // ends the watcher
	watching  chan struct{}      // closed when the watcher has returned
	// sessionHook unregisters the session-end callback (unhookSession);
	// set once, by newOwned.
	sessionHook atomic.Pointer[func() bool]
}

var _ persistence.Catalog = (*Owned)(nil)

// newOwned starts watching the owner key. Should the catalog have closed
// meanwhile, it gives the ownership up again.
func (c *Catalog) newOwned(ctx context.Context, pchannel, key, token string, session *concurrency.Session, term int64) (*Owned, error) {
	watchCtx, cancel := context.WithCancel(context.Background())
	ownedCtx, endCtx := context.WithCancelCause(context.Background())
	o := &Owned{
		c:         c,
		pchannel:  pchannel,
		ownerKey:  key,
		token:     token,
		term:      term,
		lease:     session.Lease(),
		lost:      make(chan struct{}),
		ctx:       ownedCtx,
		endCtx:    endCtx,
		stopWatch: cancel,
		watching:  make(chan struct{}),
	}
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		cancel()
		endCtx(persistence.ErrClosed)
		_ = c.deleteOwner(ctx, o) // best effort: the lease ends it anyway
		return nil, persistence.ErrClosed
	}
	c.owned[o] = struct{}{}
	c.mu.Unlock()
	unhook := context.AfterFunc(session.Ctx(), func() { o.lose(ErrSessionDone) })
	o.sessionHook.Store(&unhook)
	if o.Err() != nil { // lost before the hook was stored: lose missed it
		unhook()
	}
	go o.watch(watchCtx)
	return o, nil
}

// deleteOwner deletes the owner key if it is still o's: its term and
// lease, and the token o put there, which a later Own of the same session
// replaces (retake). Close does not end it, as it ends the catalog's other
// calls: it gives back what was taken, which would otherwise hold the
// pchannel from every other node until the session's lease ran out; it
// waits for it, up to ReleaseTimeout. Its callers bound it (Owned.Close,
// ReleaseTimeout).
func (c *Catalog) deleteOwner(ctx context.Context, o *Owned) error {
	// A closed client retries the call a hundred times before it fails
	// (about 2.5 s a release), and can send nothing.
	if c.client.Ctx().Err() != nil {
		return errClientClosed
	}
	// Sent again when no answer comes (commit): the copy that comes second
	// finds the key gone, or another Own's, whose token it does not hold.
	_, err := c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return onLeader(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return c.client.Txn(ctx).
				If(append(o.fence().holds(), clientv3.Compare(clientv3.Value(o.ownerKey), "=", o.token))...).
				Then(clientv3.OpDelete(o.ownerKey), clientv3.OpPut(c.keys.released(o.pchannel), "")).
				Commit()
		})
	})
	// One Close cut after waiting for it fails with the client's
	// closing: said to be ErrClosed.
	return c.closedErr(endedErr(ctx, err))
}

// fence is what a write of this owner compares: its term and its lease.
func (o *Owned) fence() *fence {
	return &fence{owner: o, ownerKey: o.ownerKey, term: o.term, lease: o.lease}
}

// lostError is the error of a save made once the ownership ended, with
// cause, Err's value.
func (o *Owned) lostError(pchannel string, cause error) error {
	if fe, ok := cause.(*FencedError); ok {
		return fe // the refusal that ended it (fencedCause)
	}
	return &FencedError{PChannel: pchannel, Term: uint64(o.term), Cause: cause}
}

// PChannel returns the owned pchannel.
func (o *Owned) PChannel() string { return o.pchannel }

// Term returns the owner's term: the owner key's create revision. Every new
// ownership of a pchannel has a larger term than the ones before it.
func (o *Owned) Term() uint64 { return uint64(o.term) }

// Done is closed when the ownership is known to be over: the session ended,
// the owner key was deleted or replaced, a save was fenced, the owner key
// could no longer be read or watched, or Release, Close or the catalog's
// Close was called. After it is closed, saves fail.
// Ownership can be lost some time before Done sees it (a partitioned node
// learns late); saves are fenced in etcd all the same.
func (o *Owned) Done() <-chan struct{} { return o.lost }

// Err returns nil while Done is open, then why the ownership ended.
func (o *Owned) Err() error {
	select {
	case <-o.lost:
		return o.cause
	default:
		return nil
	}
}

// Context returns a context that ends when Done closes, with Err as its
// cause (context.Cause): the form actors.WithOwnership takes, as
// concurrency.Session.Ctx is for a session. It is a plain cancellable
// context (its parent is context.Background), so context.AfterFunc on it
// costs no goroutine.
func (o *Owned) Context() context.Context { return o.ctx }

func (o *Owned) lose(cause error) (ended bool) {
	o.lostOnce.Do(func() {
		ended = true
		o.cause = cause
		close(o.lost)
		o.endCtx(cause)
		o.stopWatch()
		o.unhookSession()
	})
	return ended
}

// unhookSession unregisters the session-end callback: an ownership that
// is over needs it no more, and a session outlives many owners, each of
// which it would otherwise keep, closed or not, until it ends.
func (o *Owned) unhookSession() {
	if unhook := o.sessionHook.Load(); unhook != nil {
		(*unhook)()
	}
}

// watch closes Done as soon as the owner key is deleted or replaced: a
// revoked lease deletes it at once, while the session's keep-alive learns of
// it only at its next refresh.
//
// Each watch starts at etcd's revision when etcd creates it, and the key is
// read once it has: what changed before (since the Own, or while no watch
// ran) shows in the read, what changes after in the watch. A watch from the
// Own's revision would see both, but etcd brings a watch that starts in
// the past up to date in a loop that takes 512 of them each 100 ms,
// reading the history since the oldest: owning 100,000 pchannels at once
// kept it at that for tens of seconds, and every save waited.
//
// etcd's revision when it creates the watch is its member's, which may be
// behind the others: one cut off from its peers, or frozen and thawed,
// before the last owner's key went. It then replays that deletion, from
// before this ownership began, which the watch heard as this one's loss:
// in a trial, a node stopped the pchannels it had just owned, and its
// releases, judging the key another's, left them on its session. Events
// below the term, the key's create revision, are passed over.
func (o *Owned) watch(ctx context.Context) {
	defer close(o.watching)
	defer func() {
		o.c.mu.Lock()
		delete(o.c.owned, o)
		o.c.mu.Unlock()
	}()
	for {
		created, ended := false, error(nil)
		for wr := range o.c.client.Watch(ctx, o.ownerKey, clientv3.WithCreatedNotify()) {
			if wr.Created {
				created = true
				if !o.stillHeld(ctx) {
					return
				}
			}
			ended = wr.Err()
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision < o.term {
					continue // from before this ownership began: see above
				}
				if ev.Type == mvccpb.DELETE || !o.fence().heldBy(ev.Kv) {
					o.lose(ErrOwnerChanged)
					return
				}
			}
		}
		// The watch ended: ownership lost or released, the client closed, or
		// the server cancelled the watch. Only the last one goes on, from a
		// fresh read. A watch that ended before etcd created it will not be
		// created if asked again (the client's Watcher was closed, or etcd
		// refuses it): the ownership can no longer be watched, and asking
		// again at once would spin.
		if ctx.Err() != nil {
			return
		}
		if o.c.client.Ctx().Err() != nil {
			o.lose(persistence.ErrClosed)
			return
		}
		if !created {
			o.lose(fmt.Errorf("%w: %q: the watch ended before etcd created it (the client's Watcher closed, or etcd refused it): %w",
				errCannotWatch, o.ownerKey, cmp.Or(ended, errors.New("no error given"))))
			return
		}
		if !o.stillHeld(ctx) {
			return
		}
	}
}

// errCannotWatch is why an ownership ends when its owner key can no longer
// be watched.
var errCannotWatch = errors.New("etcdcatalog: cannot watch owner key")

// stillHeld reads the owner key, in a call slot, and reports whether it is
// still this owner's; if not, or if it cannot tell, the ownership ends.
// Unknown is treated as lost: the owner stops, and saving was fenced in
// any case.
func (o *Owned) stillHeld(ctx context.Context) bool {
	if err := o.c.acquire(ctx, "watch", o.pchannel, o.fence()); err != nil {
		if ctx.Err() == nil {
			o.lose(err)
		}
		return false
	}
	defer o.c.release()
	resp, err := o.c.etcd.Get(ctx, o.ownerKey)
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		o.lose(fmt.Errorf("etcdcatalog: re-reading owner key: %w", err))
		return false
	case len(resp.Kvs) == 0 || !o.fence().heldBy(resp.Kvs[0]):
		o.lose(ErrOwnerChanged)
		return false
	}
	return true
}

// Release ends the ownership: Done closes, and the owner key is deleted if
// it still carries this term, so that another session can own the pchannel
// at once. Releasing a released ownership, or one whose owner key was
// deleted or replaced (ErrOwnerChanged), sends nothing and returns nil
// (unless the catalog is closed): a node that lost its pchannel to another
// with etcd out of reach does not wait on etcd to let it go. A release
// whose delete failed (etcd out of reach; Close's, after ReleaseTimeout)
// leaves the owner key on the session's lease, which keeps it alive, and
// every other node off the pchannel: Release again deletes it then.
// Releasing one lost otherwise still deletes the key if it carries this term: one whose
// session ended, whose lease may keep the key for up to its TTL, and one
// fenced by a record of a higher term, whose key stays this owner's until
// then. Releasing one that a later Own of the same session took over
// deletes nothing: the ownership is that Own's then.
func (o *Owned) Release(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	// Counted before anything else, so that a Close that comes while it
	// waits for the watcher waits for it in turn.
	if !o.c.beginRelease() {
		return persistence.ErrClosed
	}
	defer o.c.releasing.Done()
	ended := o.lose(ErrReleased)
	<-o.watching
	if !ended && errors.Is(o.cause, ErrOwnerChanged) || o.keyDeleted.Load() {
		return nil // no key of this owner's is left to delete
	}
	if err := o.c.deleteOwner(ctx, o); err != nil {
		return fmt.Errorf("etcdcatalog: release %q: %w", o.pchannel, err)
	}
	o.keyDeleted.Store(true)
	return nil
}

// ReleaseTimeout bounds the Release done by Owned.Close.
const ReleaseTimeout = 5 * time.Second

// Close releases the ownership (within ReleaseTimeout); later calls fail
// with persistence.ErrClosed. It does not close the Catalog. Should the
// release fail, Release tries it again.
//
// Closing one lost with its session (ErrSessionDone) deletes nothing and
// waits for no etcd: a session ends when its lease is gone, revoked or
// expired, with the key on it, and most often with etcd out of reach,
// where a delete would hold the Close, and the stop of the pchannel it
// follows, for ReleaseTimeout. A session orphaned, or whose context was
// cancelled, leaves its lease, and the key, for up to its TTL: Release
// deletes it at once.
func (o *Owned) Close() error {
	if !o.closed.CompareAndSwap(false, true) {
		return persistence.ErrClosed
	}
	if errors.Is(o.Err(), ErrSessionDone) {
		<-o.watching
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	return o.Release(ctx)
}

// check validates a call on pchannel.
func (o *Owned) check(pchannel string) error {
	if o.closed.Load() || o.c.closed.Load() {
		return persistence.ErrClosed
	}
	if pchannel != o.pchannel {
		return fmt.Errorf("etcdcatalog: %w: pchannel %q, owned is %q", persistence.ErrInvalidArgument, pchannel, o.pchannel)
	}
	return nil
}

// Load returns the stored checkpoint of the owned pchannel.
func (o *Owned) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if err := o.check(pchannel); err != nil {
		return nil, err
	}
	return o.c.Load(ctx, pchannel)
}

// Save stores checkpoint as Catalog.Save does, and only if the ownership
// holds at the moment of the write: the transaction also compares the owner
// key's create revision with the term, and the stored record's term must not
// be above it. Otherwise it returns a *FencedError (errors.Is
// persistence.ErrFenced), writes nothing, and Done closes. An Owned of
// Batcher.Own saves through the Batcher, the same compares in a
// transaction shared with other pchannels' saves.
func (o *Owned) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if err := o.checkWrite(pchannel, checkpoint, persistence.CheckSaveArgs); err != nil {
		return err
	}
	if o.batcher != nil {
		return o.loseIfFenced(o.batcher.save(ctx, pchannel, checkpoint, o.fence()))
	}
	return o.loseIfFenced(o.c.save(ctx, pchannel, checkpoint, o.fence()))
}

// checkWrite refuses, before anything is sent, a save or a replacement
// the owner cannot make: of another pchannel, of bad arguments (checkArgs:
// the save's or the replacement's), or once the ownership is lost.
func (o *Owned) checkWrite(pchannel string, checkpoint wal.MessageID, checkArgs func(string, wal.MessageID) error) error {
	if err := o.check(pchannel); err != nil {
		return err
	}
	if err := checkArgs(pchannel, checkpoint); err != nil {
		return fmt.Errorf("etcdcatalog: %w", err)
	}
	if err := o.Err(); err != nil {
		return o.lostError(pchannel, err)
	}
	return nil
}

// loseIfFenced ends the ownership if err, of a fenced write, says that
// it is fenced, and returns err.
func (o *Owned) loseIfFenced(err error) error {
	var fe *FencedError
	if errors.As(err, &fe) {
		o.lose(fencedCause(fe))
	}
	return err
}

// fencedCause is why a fenced write ends the ownership: the owner key
// changed (ErrOwnerChanged), or a record of a higher term is stored, which
// the key does not show: the *FencedError itself says so.
func fencedCause(fe *FencedError) error {
	if fe.StoredTerm != 0 {
		return fe
	}
	return ErrOwnerChanged
}

// LoadAll returns the owned pchannel's checkpoint, if one is stored: the
// whole catalog as this owner sees it.
func (o *Owned) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	id, err := o.Load(ctx, o.pchannel)
	if err != nil {
		return nil, err
	}
	all := make(map[string]wal.MessageID, 1)
	if id != nil {
		all[o.pchannel] = id
	}
	return all, nil
}
