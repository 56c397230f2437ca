package etcdcatalog

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/wal"
)

// CommitBatch commits saves as one batch of b, as if they had queued
// together, and returns each one's answer.
func CommitBatch(ctx context.Context, b *Batcher, saves map[string]wal.MessageID) map[string]error {
	batch := make([]*batchedSave, 0, len(saves))
	for p, cp := range saves {
		batch = append(batch, &batchedSave{ctx: ctx, pchannel: p, checkpoint: cp})
	}
	return commitAll(b, batch)
}

// CommitOwnedBatch is CommitBatch for saves of owners, as their Owned.Save
// would make them through b.
func CommitOwnedBatch(ctx context.Context, b *Batcher, saves map[*Owned]wal.MessageID) map[string]error {
	batch := make([]*batchedSave, 0, len(saves))
	owners := make(map[string]*Owned, len(saves))
	for o, cp := range saves {
		owners[o.pchannel] = o
		batch = append(batch, &batchedSave{ctx: ctx, pchannel: o.pchannel, checkpoint: cp, fence: o.fence()})
	}
	out := commitAll(b, batch)
	for p, err := range out {
		out[p] = owners[p].loseIfFenced(err)
	}
	return out
}

// CommitFencedBatch is CommitBatch for saves fenced by term and lease,
// whatever this process knows about ownership: the fence inside etcd
// alone decides.
func CommitFencedBatch(ctx context.Context, b *Batcher, saves map[string]FencedSave) map[string]error {
	batch := make([]*batchedSave, 0, len(saves))
	for p, s := range saves {
		f := &fence{ownerKey: b.c.keys.owner(p), term: s.Term, lease: s.Lease}
		batch = append(batch, &batchedSave{ctx: ctx, pchannel: p, checkpoint: s.Checkpoint, fence: f})
	}
	return commitAll(b, batch)
}

// FencedSave is a save of CommitFencedBatch.
type FencedSave struct {
	Checkpoint wal.MessageID
	Term       int64
	Lease      clientv3.LeaseID
}

// commitAll commits batch, its saves of distinct pchannels, and returns
// each one's answer.
func commitAll(b *Batcher, batch []*batchedSave) map[string]error {
	for _, s := range batch {
		s.done = make(chan error, 1)
	}
	b.commit(batch)
	out := make(map[string]error, len(batch))
	for _, s := range batch {
		out[s.pchannel] = <-s.done
	}
	return out
}

// Bounds returns what b's next transaction takes at most: saves and bytes.
func Bounds(b *Batcher) (saves, bytes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.saves.limit, b.bytes.limit
}
