package persistence

import (
	"context"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/wal"
)

var _ Inspector = (*Bolt)(nil)

// Delete implements Catalog, in one write transaction.
func (b *Bolt) Delete(ctx context.Context, pchannel string) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	defer b.exit()
	if err := b.writable("delete", pchannel); err != nil {
		return err
	}
	if err := checkDeleteArgs(pchannel); err != nil {
		return err
	}
	if err := b.takeTurn(ctx); err != nil {
		return err
	}
	defer b.releaseTurn()
	err := b.guard("delete", func() error {
		return b.update(func(tx *bolt.Tx) error {
			return tx.Bucket(b.bucket).Delete([]byte(pchannel)) // nil when absent
		})
	})
	if err != nil {
		return b.writeFailed("delete", err)
	}
	b.forgetMisplaced(pchannel)
	return nil
}

// Replace writes checkpoint as the record of pchannel whatever is stored
// there: a record above it, of another WAL, or one that cannot be read.
// It is an operator's repair (lowwater set --force), which Save refuses
// by design. One write transaction does it, not a Delete and a Save, so
// that neither a crash nor a reader finds the record gone in between;
// under group commit it joins a batch as a Save does, and a restore's
// many replacements share commits.
func (b *Bolt) Replace(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	if err := b.enter(ctx); err != nil {
		return err
	}
	raw, err := b.checkSave("replace", pchannel, checkpoint)
	if err != nil {
		b.exit()
		return err
	}
	if b.group != nil {
		// The commit forgets the misplaced record, and exits for a
		// Replace whose context ended first.
		left, err := b.saveGrouped(ctx, &batchedSave{pchannel: pchannel, checkpoint: checkpoint, raw: raw, replace: true})
		if !left {
			b.exit()
		}
		return err
	}
	defer b.exit()
	if err := b.replaceAlone(ctx, pchannel, raw); err != nil {
		return err
	}
	b.forgetMisplaced(pchannel) // its key holds a record that reads now
	return nil
}

// replaceAlone is Replace in a write transaction of its own.
func (b *Bolt) replaceAlone(ctx context.Context, pchannel string, raw []byte) error {
	if err := b.takeTurn(ctx); err != nil {
		return err
	}
	defer b.releaseTurn()
	err := b.guard("replace", func() error {
		return b.update(func(tx *bolt.Tx) error {
			return tx.Bucket(b.bucket).Put([]byte(pchannel), raw)
		})
	})
	if err != nil {
		return b.writeFailed("replace", err)
	}
	return nil
}

// Inspect implements Inspector, in one read transaction.
func (b *Bolt) Inspect(ctx context.Context) ([]Entry, error) {
	if err := b.enter(ctx); err != nil {
		return nil, err
	}
	defer b.exit()
	if err := b.takeTurn(ctx); err != nil {
		return nil, err
	}
	defer b.releaseTurn()
	entries := []Entry{}
	err := b.guard("inspect", func() error {
		return b.view(func(tx *bolt.Tx) error {
			return tx.Bucket(b.bucket).ForEach(func(k, raw []byte) error {
				// Hundreds of thousands of records take seconds to read.
				if len(entries)%4096 == 4095 && ctx.Err() != nil {
					return ctx.Err()
				}
				entries = append(entries, InspectRecord(string(k), raw))
				return nil
			})
		})
	})
	if err != nil {
		return nil, err
	}
	return entries, nil // bbolt iterates keys in byte order: sorted
}

// ErrNoBucket is the error of opening a bbolt file without the catalog's
// bucket for reading (WithReadOnly) or WithExistingBucket. It wraps
// ErrInvalidArgument, and names the buckets the file has.
var ErrNoBucket = fmt.Errorf("%w: no such bucket", ErrInvalidArgument)

// checkBucket fails a read-only open of a file without the bucket, which no
// catalog ever wrote (OpenBolt creates it on the first open), so that Load
// never meets a missing bucket; and a writing one WithExistingBucket. The
// error names the buckets the file has: a catalog kept under another name
// (WithBucket) is then found, not taken for no catalog at all.
func (b *Bolt) checkBucket(path string) error {
	err := b.guard("open", func() error {
		return b.view(func(tx *bolt.Tx) error {
			if tx.Bucket(b.bucket) != nil {
				return nil
			}
			// Only a marked one is telling: a reader has no name to
			// leave free for a sibling.
			if damaged, how := damagedBucket(tx, b.bucket); how == markedAsWant || how == markedAsNone {
				return damagedBucketError(path, b.bucket, damaged, how)
			}
			var names []string
			_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				names = append(names, shorten.QuotedText(string(name)))
				return nil
			})
			if len(names) == 0 {
				return fmt.Errorf("%w: %s has no bucket %s, nor any other: not a lowwater catalog", ErrNoBucket, path, shorten.QuotedText(string(b.bucket)))
			}
			return fmt.Errorf("%w: %s has no bucket %s, only %s: not a lowwater catalog under that bucket name (WithBucket)",
				ErrNoBucket, path, shorten.QuotedText(string(b.bucket)), strings.Join(names, ", "))
		})
	})
	if err != nil {
		_ = b.closeDB()
		return err
	}
	return nil
}
