package etcdcatalog

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ownerRecheck bounds how often the owner keys that Owns wait on are read
// besides being watched: every 1–2 s, which bounds how long a watch held
// by a member that answers nothing delays a wait, to that and the read's
// own time (waitDelete).
const ownerRecheck = 2 * time.Second

// ownersPerRead is how many owner keys one read reads at most: half etcd's
// default --max-txn-ops (128). A cluster that refuses so many halves it.
const ownersPerRead = 64

// ownerChecks is a catalog's one reader of the owner keys its Owns wait
// on. Each wait reading its own key, a node standing by for N pchannels
// made N/2 to N reads a second, for as long as it stood by; read together,
// a few dozen keys to a read, they cost it one read a second for each 64
// and one goroutine, which runs only while some Own waits.
type ownerChecks struct {
	mu    sync.Mutex
	waits map[*ownerWait]struct{}
	// reading is closed when the reader returns; nil while none runs.
	reading chan struct{}
	// stopped is set by Close: no reader starts again.
	stopped bool
	perRead int
}

// ownerWait is one Own's wait for an owner key, gone when a read finds it
// deleted, or created again (another owner's).
type ownerWait struct {
	key    string
	create int64
	gone   chan struct{}
}

// awaitOwner adds a wait for owner's key to those read, and starts the
// reader if none runs; the caller forgets it (forgetOwner) when it stops
// waiting. On a closed catalog it is never read: the Own's context ends
// with the catalog's closing (own).
func (c *Catalog) awaitOwner(owner *mvccpb.KeyValue) *ownerWait {
	w := &ownerWait{key: string(owner.Key), create: owner.CreateRevision, gone: make(chan struct{})}
	k := &c.ownerChecks
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return w
	}
	k.waits[w] = struct{}{}
	if k.reading == nil {
		k.reading = make(chan struct{})
		go c.readOwners(k.reading)
	}
	return w
}

func (c *Catalog) forgetOwner(w *ownerWait) {
	c.ownerChecks.mu.Lock()
	delete(c.ownerChecks.waits, w)
	c.ownerChecks.mu.Unlock()
}

// stopOwnerChecks keeps a reader from starting again and waits for the
// one running, whose reads end with the catalog's closing.
func (c *Catalog) stopOwnerChecks() {
	k := &c.ownerChecks
	k.mu.Lock()
	k.stopped = true
	reading := k.reading
	k.mu.Unlock()
	if reading != nil {
		<-reading
	}
}

// readOwners reads the keys waited on every 1–2 s, a period drawn afresh
// each time, so that the readers of nodes started together do not read
// together, until no Own waits or the catalog closes.
func (c *Catalog) readOwners(done chan struct{}) {
	defer close(done)
	k := &c.ownerChecks
	next := time.NewTimer(ownerRecheck/2 + rand.N(ownerRecheck/2))
	defer next.Stop()
	for {
		select {
		case <-c.closing.Done():
			return
		case <-next.C:
		}
		k.mu.Lock()
		if len(k.waits) == 0 {
			k.reading = nil
			k.mu.Unlock()
			return
		}
		waits := slices.Collect(maps.Keys(k.waits))
		k.mu.Unlock()
		c.readRound(waits)
		next.Reset(ownerRecheck/2 + rand.N(ownerRecheck/2))
	}
}

// readRound reads the keys of waits, as many to a read as the cluster
// takes, within ownerRecheck for the whole round: with the catalog's call
// slots all held, a round of many reads, each waiting its turn, would
// leave a wait begun meanwhile unread for as long. The waits come in a map's
// order, no set one, so that the next round first reads others than those
// this one had no time for. A wait forgotten since the round began is
// passed over.
func (c *Catalog) readRound(waits []*ownerWait) {
	ctx, cancel := context.WithTimeout(c.closing, ownerRecheck)
	defer cancel()
	k := &c.ownerChecks
	for ctx.Err() == nil {
		k.mu.Lock()
		batch := make([]*ownerWait, 0, min(k.perRead, len(waits)))
		for len(waits) > 0 && len(batch) < k.perRead {
			if _, waiting := k.waits[waits[0]]; waiting {
				batch = append(batch, waits[0])
			}
			waits = waits[1:]
		}
		k.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		err := c.readOwnersOnce(ctx, batch)
		if len(batch) > 1 && errors.Is(err, rpctypes.ErrTooManyOps) {
			k.mu.Lock()
			k.perRead = len(batch) / 2
			k.mu.Unlock()
			waits = append(batch, waits...) // again, fewer to a read
		}
	}
}

// readOwnersOnce reads the keys of waits in one transaction, within ctx
// and in a call slot, and ends the waits whose key it finds
// gone or another's. The reads are serializable: the member answers from
// its own store, with no round of its leader's, for they go on for as
// long as an Own waits; one a little behind only tells late of a deletion,
// or of a key not yet created, which the claim after it finds. It requires
// a leader as every call does (onLeader), so that a member cut off from
// its peers does not answer from a store that no longer moves. A read that
// fails tells nothing: the watches go on, and the next read comes.
func (c *Catalog) readOwnersOnce(ctx context.Context, waits []*ownerWait) error {
	if err := c.acquire(ctx, "read the owners of", waits[0].key, nil); err != nil {
		return err
	}
	defer c.release()
	reads := make([]clientv3.Op, len(waits))
	for i, w := range waits {
		reads[i] = clientv3.OpGet(w.key, clientv3.WithSerializable())
	}
	resp, err := c.readTogether(ctx, reads...)
	if err != nil {
		return err
	}
	k := &c.ownerChecks
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, w := range waits {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if _, waiting := k.waits[w]; waiting && (len(kvs) == 0 || kvs[0].CreateRevision != w.create) {
			delete(k.waits, w)
			close(w.gone)
		}
	}
	return nil
}
