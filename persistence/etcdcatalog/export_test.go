package etcdcatalog

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lowwater/lowwater/wal"
)

// Retake retakes the owner key as read in owner, as an Own of its lease
// does, and reports whether it wrote.
func Retake(ctx context.Context, c *Catalog, pchannel string, owner *mvccpb.KeyValue) (bool, error) {
	resp, err := c.retake(ctx, pchannel, owner, ownerToken(clientv3.LeaseID(owner.Lease), c.holder))
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// Watching is closed once o's watcher has returned.
func Watching(o *Owned) <-chan struct{} { return o.watching }

// SetHintCap bounds the hints c keeps to n; Hints counts them.
func SetHintCap(c *Catalog, n int) { c.hintCap = n }

func Hints(c *Catalog) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.hints)
}

// SetAwaitingReleases makes Close call f as it begins to wait for the
// releases in flight.
func SetAwaitingReleases(c *Catalog, f func()) { c.awaitingReleases = f }

// SetAfterPage makes LoadAll call f after each page it reads.
func SetAfterPage(c *Catalog, f func(page int)) { c.afterPage = f }

// SaveFenced saves as an owner of the given term would, whatever this
// process knows about ownership: it exercises the fence inside etcd alone.
func SaveFenced(ctx context.Context, c *Catalog, pchannel string, checkpoint wal.MessageID, term int64) error {
	return c.save(ctx, pchannel, checkpoint, &fence{ownerKey: c.keys.owner(pchannel), term: term})
}

// SaveFencedAs is SaveFenced for an owner holding lease too.
func SaveFencedAs(ctx context.Context, c *Catalog, pchannel string, checkpoint wal.MessageID, term int64, lease clientv3.LeaseID) error {
	return c.save(ctx, pchannel, checkpoint, &fence{ownerKey: c.keys.owner(pchannel), term: term, lease: lease})
}

// Claim makes a copy of an Own's claim of pchannel for session, as one
// made when the release mark had mod revision released (0 for none) would
// reach etcd now, and reports whether it wrote.
func Claim(ctx context.Context, c *Catalog, pchannel string, released int64, session *concurrency.Session) (bool, error) {
	lease := session.Lease()
	resp, err := c.claim(ctx, pchannel, c.keys.owner(pchannel), released, lease, ownerToken(lease, c.holder))
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// DeleteAt deletes the record of pchannel if its mod revision is still
// rev, as a delete made when it was would reach etcd now, and reports
// whether it did.
func DeleteAt(ctx context.Context, c *Catalog, pchannel string, rev int64) (bool, error) {
	return c.deleteAt(ctx, c.keys.checkpoint(pchannel), rev)
}
