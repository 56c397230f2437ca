package etcdcatalog

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/internal/record"
	"github.com/lowwater/lowwater/wal"
)

var _ persistence.Inspector = (*Catalog)(nil)

// Delete removes the record of pchannel, whoever owns it: it is the
// unfenced delete of an operator. Owned.Delete is the fenced one. It
// deletes the record it reads, and reads again should it change
// meanwhile, so that a delete delivered late deletes no save made since.
func (c *Catalog) Delete(ctx context.Context, pchannel string) error {
	if c.closed.Load() {
		return persistence.ErrClosed
	}
	if pchannel == "" {
		return fmt.Errorf("etcdcatalog: %w: empty pchannel name", persistence.ErrInvalidArgument)
	}
	if err := c.acquire(ctx, "delete", pchannel, nil); err != nil {
		return err
	}
	defer c.release()
	if err := c.deleteRecord(ctx, c.keys.checkpoint(pchannel)); err != nil {
		return fmt.Errorf("etcdcatalog: delete %q: %w", pchannel, err)
	}
	return nil
}

// deleteRecord deletes the record at key as it reads it, and reads it
// again should it change before the delete. The delete compares the
// record's revision, which makes it safe to send again (commit), and
// makes a delete that reaches etcd late, held by a member that answers
// nothing, delete nothing, where a delete of whatever was there, so
// delivered after a node saved the pchannel again, lost that acknowledged
// save.
func (c *Catalog) deleteRecord(ctx context.Context, key string) error {
	for {
		resp, err := c.etcd.Get(ctx, key)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			c.forget(key)
			return nil
		}
		deleted, err := c.deleteAt(ctx, key, resp.Kvs[0].ModRevision)
		if err != nil {
			return err
		}
		if deleted {
			c.forget(key)
			return nil
		}
	}
}

// deleteAt deletes the record at key if its mod revision is still rev,
// and reports whether it did.
func (c *Catalog) deleteAt(ctx context.Context, key string, rev int64) (bool, error) {
	resp, err := c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return c.etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpDelete(key)).
			Commit()
	})
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// DeleteBadName removes the record stored under pchannel, a name no node
// takes (persistence.ValidatePChannel refuses it: empty, not UTF-8, with
// a NUL, over 512 bytes), if there is one. No lowwater writer puts one
// there (Save and Own refuse such a name), so it was written by hand or
// by another tool, or its key was damaged; Inspect shows it. Delete
// removes it too, but for the empty name, which Delete refuses as the
// Catalog contract has it: this takes every such name, the empty one
// included, and is what the lowwater tool's delete of one calls. No
// session can own such a name, so there is no owner to fence the delete
// or to ask. A name a node takes is refused with ErrInvalidArgument:
// Delete removes its record.
func (c *Catalog) DeleteBadName(ctx context.Context, pchannel string) error {
	if persistence.ValidatePChannel(pchannel) == nil {
		return fmt.Errorf("etcdcatalog: %w: pchannel %q is a name a node takes: Delete removes its record",
			persistence.ErrInvalidArgument, pchannel)
	}
	if err := c.acquire(ctx, "delete", "", nil); err != nil {
		return err
	}
	defer c.release()
	if err := c.deleteRecord(ctx, c.keys.checkpoint(pchannel)); err != nil {
		return fmt.Errorf("etcdcatalog: delete the record under %q: %w", pchannel, err)
	}
	return nil
}

// forget drops the hint of a deleted key. A concurrent save may put back
// a hint of the deleted record; that costs it one more round trip, since a
// hint is only ever compared in a transaction, never trusted.
func (c *Catalog) forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.hints, key)
}

// Delete removes the record of the owned pchannel only if the ownership
// holds at the moment of the write, fenced as Save is: the transaction
// compares the owner key's create revision with the term, and a stored
// record of a higher term fences too (a record that cannot be decoded does
// not: deleting is how it is cleared). Otherwise it returns a *FencedError
// (errors.Is persistence.ErrFenced), deletes nothing, and Done closes.
func (o *Owned) Delete(ctx context.Context, pchannel string) error {
	return o.deleteChecked(ctx, pchannel, false)
}

// DeleteAnyTerm is Delete without the refusal of a record whose term is
// above the owner's: for an operator clearing a record written before an
// etcd restore reset the terms, or copied from another cluster, which
// fences every owner's saves (the lowwater tool's delete). The ownership
// still fences it, at the moment of the write.
func (o *Owned) DeleteAnyTerm(ctx context.Context, pchannel string) error {
	return o.deleteChecked(ctx, pchannel, true)
}

func (o *Owned) deleteChecked(ctx context.Context, pchannel string, anyTerm bool) error {
	if err := o.check(pchannel); err != nil {
		return err
	}
	if err := o.Err(); err != nil {
		return o.lostError(pchannel, err)
	}
	return o.loseIfFenced(o.delete(ctx, pchannel, anyTerm))
}

// delete reads the record and the owner key, judges the term, and deletes
// the record if neither changed meanwhile; a change means another writer
// succeeded, and the loop judges again. anyTerm deletes a record of a
// higher term too (DeleteAnyTerm).
func (o *Owned) delete(ctx context.Context, pchannel string, anyTerm bool) error {
	f := o.fence()
	if err := o.c.acquire(ctx, "delete", pchannel, f); err != nil {
		return err
	}
	defer o.c.release()
	key := o.c.keys.checkpoint(pchannel)
	for {
		resp, err := o.c.readTogether(ctx, clientv3.OpGet(key), clientv3.OpGet(o.ownerKey))
		if err != nil {
			return fmt.Errorf("etcdcatalog: delete %q: %w", pchannel, err)
		}
		if err := ownerCheck(pchannel, f, resp.Responses[1]); err != nil {
			return err
		}
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return nil // nothing to delete
		}
		if h, ok, _, _ := record.Decode(pchannel, kvs[0].Value); ok && h.Term > uint64(o.term) && !anyTerm {
			return &FencedError{PChannel: pchannel, Term: uint64(o.term), StoredTerm: h.Term}
		}
		// As in save: closed or lost since the read, nothing is written.
		if err := o.c.over(pchannel, f); err != nil {
			return err
		}
		// Its compares make it safe to send again (commit).
		del, err := o.c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return o.c.etcd.Txn(ctx).
				If(append(f.holds(), clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision))...).
				Then(clientv3.OpDelete(key)).
				Commit()
		})
		if err != nil {
			return fmt.Errorf("etcdcatalog: delete %q: %w", pchannel, err)
		}
		if del.Succeeded {
			o.c.forget(key)
			return nil
		}
	}
}

// Replace writes checkpoint as the record of pchannel whatever is stored
// there: a record above it, of another WAL, or one that cannot be read.
// It is the unfenced repair of an operator (lowwater set --force on a
// pchannel a node owns), which Save refuses by design; Owned.Replace is
// the fenced one. One transaction writes it, not a Delete and a Save, so
// that neither a crash nor a reader finds the record gone in between. The
// stored record's owner term is carried over as Save carries it.
func (c *Catalog) Replace(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if c.closed.Load() {
		return persistence.ErrClosed
	}
	if err := persistence.CheckReplaceArgs(pchannel, checkpoint); err != nil {
		return fmt.Errorf("etcdcatalog: %w", err)
	}
	return c.overwrite(ctx, pchannel, checkpoint, nil, false)
}

// Replace is Catalog.Replace, fenced as Save is: the write carries the
// owner's term and happens only if the ownership holds at that moment and
// no record of a higher term is stored. Otherwise it returns a
// *FencedError (errors.Is persistence.ErrFenced), writes nothing, and Done
// closes.
func (o *Owned) Replace(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	return o.replaceChecked(ctx, pchannel, checkpoint, false)
}

// ReplaceAnyTerm is Replace over a record of a higher term too, as
// DeleteAnyTerm deletes one: for an operator replacing a record written
// before an etcd restore reset the terms. The ownership still fences it.
func (o *Owned) ReplaceAnyTerm(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	return o.replaceChecked(ctx, pchannel, checkpoint, true)
}

func (o *Owned) replaceChecked(ctx context.Context, pchannel string, checkpoint wal.MessageID, anyTerm bool) error {
	if err := o.checkWrite(pchannel, checkpoint, persistence.CheckReplaceArgs); err != nil {
		return err
	}
	return o.loseIfFenced(o.c.overwrite(ctx, pchannel, checkpoint, o.fence(), anyTerm))
}

// overwrite is the loop behind Replace: it reads the record (and the owner
// key, when fenced), and writes checkpoint in its place if neither changed
// meanwhile, comparing the stored bytes as save does. A change means
// another writer succeeded, and the loop reads again.
func (c *Catalog) overwrite(ctx context.Context, pchannel string, checkpoint wal.MessageID, f *fence, anyTerm bool) error {
	if err := c.acquire(ctx, "replace", pchannel, f); err != nil {
		return err
	}
	defer c.release()
	key := c.keys.checkpoint(pchannel)
	reads := []clientv3.Op{clientv3.OpGet(key)}
	if f != nil {
		reads = append(reads, clientv3.OpGet(f.ownerKey))
	}
	for {
		resp, err := c.readTogether(ctx, reads...)
		if err != nil {
			return fmt.Errorf("etcdcatalog: replace %q: %w", pchannel, err)
		}
		if f != nil {
			if err := ownerCheck(pchannel, f, resp.Responses[1]); err != nil {
				return err
			}
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		var stored, term uint64
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			cmp = clientv3.Compare(clientv3.Value(key), "=", string(kvs[0].Value))
			if h, ok, _, _ := record.Decode(pchannel, kvs[0].Value); ok {
				stored, term = h.Term, carriedTerm(h.Term, kvs[0].ModRevision)
			}
		}
		if f != nil {
			if stored > uint64(f.term) && !anyTerm {
				return &FencedError{PChannel: pchannel, Term: uint64(f.term), StoredTerm: stored}
			}
			term = uint64(f.term)
		}
		rec := persistence.Record{Checkpoint: checkpoint, Term: term}
		val, err := persistence.EncodeRecord(pchannel, rec)
		if err != nil {
			return fmt.Errorf("etcdcatalog: %w", err)
		}
		// As in save: closed or lost since the read, nothing is written.
		if err := c.over(pchannel, f); err != nil {
			return err
		}
		cmps := []clientv3.Cmp{cmp}
		if f != nil {
			cmps = append(cmps, f.holds()...)
		}
		// Its compare, the record as read, makes it safe to send again
		// (commit).
		put, err := c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
			return c.etcd.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(val))).Commit()
		})
		if err != nil {
			// The write may have committed: only a read tells.
			return fmt.Errorf("etcdcatalog: replace %q: %w", pchannel, err)
		}
		if put.Succeeded {
			c.remember(key, hint{rev: put.Header.Revision, rec: rec, raw: val})
			return nil
		}
	}
}

// Inspect implements persistence.Inspector: every record under the prefix,
// read page by page at one revision as LoadAll reads. A record under the
// empty pchannel name, which LoadAll leaves out, is an Entry too: what an
// operator cannot see, an operator cannot clear (DeleteBadName).
func (c *Catalog) Inspect(ctx context.Context) ([]persistence.Entry, error) {
	if err := c.over("", nil); err != nil {
		return nil, err
	}
	var entries []persistence.Entry
	err := c.scan(ctx, "inspect", func() { entries = []persistence.Entry{} },
		func(pchannel string, kv *mvccpb.KeyValue) error {
			entries = append(entries, persistence.InspectRecord(pchannel, kv.Value))
			return nil
		})
	if err != nil {
		return nil, err
	}
	// Keys sort as <prefix>/wal/<pchannel>/…, which is not quite pchannel
	// order ("a/…" sorts after "a-b/…"): sort by name.
	sortEntries(entries)
	return entries, nil
}

// OwnerTerm returns the term of the session that owns pchannel now, 0 when
// none does, for tools that must not write under a running owner. An
// owner key under no lease has a term too: see OwnerOf.
func (c *Catalog) OwnerTerm(ctx context.Context, pchannel string) (uint64, error) {
	o, err := c.OwnerOf(ctx, pchannel)
	return o.Term, err
}

// Owner is a pchannel's owner key as a tool reads it.
type Owner struct {
	// Term is the key's create revision, 0 when there is no key.
	Term uint64
	// Holder is who put the key, as its Own names it (WithHolder): "" for
	// a key that names none, or has no lease.
	Holder string
	// Lease is the lease the key is bound to. Own always binds it to the
	// session's, which is never 0, so that the key goes when the session
	// does. 0 with a Term is a key put without a lease, by hand or by
	// another tool: no session holds it, it never expires, and no session
	// can own the pchannel while it is there (Own and TryOwn fail with
	// ErrOwnerWithoutLease at once). DeleteLeaselessOwner removes it.
	Lease clientv3.LeaseID
	// Foreign says that the key has a lease but not the value Own puts
	// (its lease, its term, its holder): another program's, or put by
	// hand with a lease. It keeps every node off the pchannel until its
	// lease ends, and no node renews that lease.
	Foreign bool
}

// Leaseless reports an owner key that carries no lease.
func (o Owner) Leaseless() bool { return o.Term != 0 && o.Lease == 0 }

// OwnerOf returns the owner key of pchannel, the zero Owner when there is
// none.
func (c *Catalog) OwnerOf(ctx context.Context, pchannel string) (Owner, error) {
	if err := c.over(pchannel, nil); err != nil {
		return Owner{}, err
	}
	if ctx == nil {
		return Owner{}, errNilContext
	}
	resp, err := c.etcd.Get(ctx, c.keys.owner(pchannel))
	if err != nil {
		return Owner{}, fmt.Errorf("etcdcatalog: read owner of %q: %w", pchannel, err)
	}
	if len(resp.Kvs) == 0 {
		return Owner{}, nil
	}
	return ownerOf(resp.Kvs[0]), nil
}

// Owners returns every owner key under the prefix, by pchannel, read page
// by page at one revision as LoadAll reads: for a tool that looks for
// keys with no lease (Owner.Leaseless), which keep every node off their
// pchannel for good. It reads the values too: a keys-only read, which
// etcd serves from its index, carries no lease, and every key would look
// leaseless.
func (c *Catalog) Owners(ctx context.Context) (map[string]Owner, error) {
	if err := c.over("", nil); err != nil {
		return nil, err
	}
	var owners map[string]Owner
	err := c.scanKeys(ctx, "read owners", c.keys.pchannelOfOwner, false, func() { owners = make(map[string]Owner) },
		func(pchannel string, kv *mvccpb.KeyValue) error {
			owners[pchannel] = ownerOf(kv)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return owners, nil
}

// StrayKeys returns, in key order, the keys under <prefix>/wal/ that are
// neither a record's, an owner's nor a release mark (keys). No lowwater
// writer puts one there, and LoadAll, Inspect and Owners pass them over,
// so only this says that something else writes among the catalog's keys:
// another tool given the same prefix, a hand edit, a later version's
// layout. It reads keys only, page by page at one revision as LoadAll
// reads. Keys outside <prefix>/wal/ are not the catalog's, and not looked
// at.
func (c *Catalog) StrayKeys(ctx context.Context) ([]string, error) {
	if err := c.over("", nil); err != nil {
		return nil, err
	}
	var stray []string
	err := c.scanKeys(ctx, "read stray keys", c.keys.stray, true, func() { stray = nil },
		func(key string, _ *mvccpb.KeyValue) error {
			stray = append(stray, key)
			return nil
		})
	if err != nil {
		return nil, err
	}
	return stray, nil
}

// DeleteLeaselessOwner removes the owner key of pchannel if it is still
// the one of term and carries no lease (Owner.Leaseless), in one
// transaction, and reports whether it did. A key bound to a lease is a
// session's, and is never removed here: it goes when its session ends,
// and removing it would end a running owner's ownership under it.
func (c *Catalog) DeleteLeaselessOwner(ctx context.Context, pchannel string, term uint64) (bool, error) {
	if term == 0 || term > math.MaxInt64 {
		return false, fmt.Errorf("etcdcatalog: %w: owner term %d", persistence.ErrInvalidArgument, term)
	}
	if err := c.acquire(ctx, "delete owner", pchannel, nil); err != nil {
		return false, err
	}
	defer c.release()
	key := c.keys.owner(pchannel)
	resp, err := c.commit(ctx, func(ctx context.Context) (*clientv3.TxnResponse, error) {
		return c.etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", int64(term)),
				clientv3.Compare(clientv3.LeaseValue(key), "=", clientv3.NoLease)).
			Then(clientv3.OpDelete(key)).
			Commit()
	})
	if err != nil {
		return false, fmt.Errorf("etcdcatalog: delete owner of %q: %w", pchannel, err)
	}
	return resp.Succeeded, nil
}

func sortEntries(entries []persistence.Entry) {
	slices.SortFunc(entries, func(a, b persistence.Entry) int { return strings.Compare(a.PChannel, b.PChannel) })
}

// ownerCheck fences a writer whose term is not the owner key's, read in
// ownerRead.
func ownerCheck(pchannel string, f *fence, ownerRead *etcdserverpb.ResponseOp) error {
	owner := ownerRead.GetResponseRange().GetKvs()
	if len(owner) > 0 && f.heldBy(owner[0]) {
		return nil
	}
	fe := &FencedError{PChannel: pchannel, Term: uint64(f.term)}
	if len(owner) > 0 {
		fe.OwnerTerm = uint64(owner[0].CreateRevision)
	}
	return fe
}
