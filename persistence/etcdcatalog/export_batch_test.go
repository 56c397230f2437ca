package etcdcatalog

import (
	"context"

	"github.com/lowwater/lowwater/wal"
)

// CommitBatch commits saves as one batch of b, as if they had queued
// together, and returns each one's answer.
func CommitBatch(ctx context.Context, b *Batcher, saves map[string]wal.MessageID) map[string]error {
	batch := make([]*batchedSave, 0, len(saves))
	for p, cp := range saves {
		batch = append(batch, &batchedSave{ctx: ctx, pchannel: p, checkpoint: cp, done: make(chan error, 1)})
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
