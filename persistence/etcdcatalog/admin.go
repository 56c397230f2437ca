package etcdcatalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/internal/record"
)

var _ persistence.Inspector = (*Catalog)(nil)

// Delete removes the record of pchannel, whoever owns it: it is the
// unfenced delete of an operator. Owned.Delete is the fenced one.
func (c *Catalog) Delete(ctx context.Context, pchannel string) error {
	if c.closed.Load() {
		return persistence.ErrClosed
	}
	if pchannel == "" {
		return fmt.Errorf("etcdcatalog: %w: empty pchannel name", persistence.ErrInvalidArgument)
	}
	key := c.keys.checkpoint(pchannel)
	if _, err := c.client.Delete(ctx, key); err != nil {
		return fmt.Errorf("etcdcatalog: delete %q: %w", pchannel, err)
	}
	c.forget(key)
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
// holds at the moment of the write: the transaction compares the owner
// key's create revision with the term, as Save does. Otherwise it returns a
// *FencedError (errors.Is persistence.ErrFenced), deletes nothing, and Done
// closes.
func (o *Owned) Delete(ctx context.Context, pchannel string) error {
	if err := o.check(pchannel); err != nil {
		return err
	}
	if err := o.Err(); err != nil {
		return &FencedError{PChannel: pchannel, Term: uint64(o.term), Cause: err}
	}
	key := o.c.keys.checkpoint(pchannel)
	resp, err := o.c.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(o.ownerKey), "=", o.term)).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(o.ownerKey)).
		Commit()
	if err != nil {
		return fmt.Errorf("etcdcatalog: delete %q: %w", pchannel, err)
	}
	if !resp.Succeeded {
		fe := &FencedError{PChannel: pchannel, Term: uint64(o.term)}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			fe.OwnerTerm = uint64(kvs[0].CreateRevision)
		}
		o.lose(ErrOwnerChanged)
		return fe
	}
	o.c.forget(key)
	return nil
}

// Inspect implements persistence.Inspector: every record under the prefix,
// read page by page at one revision as LoadAll reads.
func (c *Catalog) Inspect(ctx context.Context) ([]persistence.Entry, error) {
	if c.closed.Load() {
		return nil, persistence.ErrClosed
	}
	for {
		entries, err := c.inspectAt(ctx)
		if errors.Is(err, rpctypes.ErrCompacted) && ctx.Err() == nil {
			continue
		}
		return entries, err
	}
}

func (c *Catalog) inspectAt(ctx context.Context) ([]persistence.Entry, error) {
	start := c.keys.pchannels()
	end := clientv3.GetPrefixRangeEnd(start)
	entries := []persistence.Entry{}
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(c.pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.client.Get(ctx, start, opts...)
		if err != nil {
			return nil, fmt.Errorf("etcdcatalog: inspect: %w", err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			pchannel, ok := c.keys.pchannelOf(string(kv.Key))
			if !ok {
				continue // an owner key
			}
			h, _, id, err := record.Decode(kv.Value)
			e := persistence.Entry{PChannel: pchannel, WAL: h.WAL, Checkpoint: id, Term: h.Term, Version: h.Version}
			if err != nil {
				e.Err = &persistence.CorruptRecordError{PChannel: pchannel,
					Err: fmt.Errorf("%w: %w", persistence.ErrCorruptRecord, err)}
			}
			entries = append(entries, e)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			// Keys sort as <prefix>/wal/<pchannel>/…, which is not quite
			// pchannel order ("a/…" sorts after "a-b/…"): sort by name.
			sortEntries(entries)
			return entries, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// OwnerTerm returns the term of the session that owns pchannel now, 0 when
// none does, for tools that must not write under a running owner.
func (c *Catalog) OwnerTerm(ctx context.Context, pchannel string) (uint64, error) {
	if c.closed.Load() {
		return 0, persistence.ErrClosed
	}
	resp, err := c.client.Get(ctx, c.keys.owner(pchannel))
	if err != nil {
		return 0, fmt.Errorf("etcdcatalog: read owner of %q: %w", pchannel, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return uint64(resp.Kvs[0].CreateRevision), nil
}

func sortEntries(entries []persistence.Entry) {
	slices.SortFunc(entries, func(a, b persistence.Entry) int { return strings.Compare(a.PChannel, b.PChannel) })
}
