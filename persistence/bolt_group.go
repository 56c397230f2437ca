package persistence

import (
	"context"
	"errors"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/wal"
)

// maxGroupSaves is how many saves one group commit carries at most:
// bbolt's default MaxBatchSize. A full batch commits at once, without
// waiting out its delay.
const maxGroupSaves = 1000

// groupCommit gathers the Saves that arrive together (WithGroupCommit)
// into one write transaction and one fsync, as bbolt's DB.Batch does, with
// the same policy: a batch commits when it is full or when its delay has
// passed since its first save. It is ours rather than DB.Batch for two
// reasons:
//
//   - A batch whose delay passes commits on a timer goroutine. DB.Batch
//     runs the commit there unguarded, so a damaged page met while
//     writing panicked that goroutine and took the process down; here the
//     commit runs under the Bolt's guard, wherever it runs, and becomes
//     ErrCorruptStore like any other damage.
//   - A waiting Save costs no channel, closure or retry of its own: the
//     saves of a batch wait on one channel, and each reads its own
//     outcome. DB.Batch reran the whole transaction without a save whose
//     function failed; a save here fails alone and the others commit,
//     since a put that bbolt refuses changes nothing.
//
// Every Save still returns only once the transaction holding its write
// committed, and the never-lower check still runs inside it.
type groupCommit struct {
	delay time.Duration
	// commit writes a batch and tells its saves: the Bolt's, bound once
	// rather than on every save.
	commit func(*batch)

	mu sync.Mutex
	// open is the batch still taking saves, or nil.
	open *batch // guarded by mu
	// last is how many saves the last batch took: the next one is made
	// that large, so that under a steady load a batch is one allocation.
	last int // guarded by mu
	// spare is the saves of a batch committed and told, emptied, for the
	// next batch to take: a round of a thousand saves made one of 80 KiB.
	spare []batchedSave // guarded by mu
}

// batch is one group commit: its saves, in the order they came, and done,
// closed once every save's err is set.
type batch struct {
	saves []batchedSave
	done  chan struct{}
	timer *time.Timer
	// waiters counts the saves of Save, which read their outcome from
	// saves once done is closed: a batch that had any is not recycled.
	waiters int
	// told is set as the commit tells the batch's saves. left counts the
	// Saves whose context ended before: each returned at once, and the
	// commit ends their calls (exit), so that Close still waits for the
	// write they left in the batch.
	mu   sync.Mutex
	told bool // guarded by mu
	left int  // guarded by mu
}

type batchedSave struct {
	pchannel   string
	checkpoint wal.MessageID
	raw        []byte
	// done, if set, is StartSave's: it is told the outcome once the
	// batch is committed. A Save without it waits for the batch's done.
	done func(error)
	// replace writes raw whatever is stored (Replace).
	replace bool
	// err is the save's outcome: nil once durable, its refusal, or the
	// failure of the whole commit.
	err error
}

// join adds s to the open batch, opening one if there is none, and
// returns the batch and the index of s in it. full reports that s filled
// the batch: the caller must commit it, now that no one else will.
func (g *groupCommit) join(s *batchedSave) (bt *batch, i int, full bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		g.open = g.newBatch()
	}
	bt = g.open
	i = len(bt.saves)
	bt.saves = append(bt.saves, *s)
	if s.done == nil {
		bt.waiters++
	}
	if len(bt.saves) < maxGroupSaves {
		return bt, i, false
	}
	g.open, g.last = nil, len(bt.saves)
	bt.timer.Stop()
	return bt, i, true
}

// newBatch makes a batch that commits once its delay has passed, unless a
// save filled it first. (Apart from join so that the timer's closure
// captures a variable of its own: capturing join's result moved it to the
// heap on every save.)
func (g *groupCommit) newBatch() *batch {
	saves := g.spare
	g.spare = nil
	if cap(saves) < max(g.last, 8) {
		saves = make([]batchedSave, 0, max(g.last, 8))
	}
	bt := &batch{saves: saves, done: make(chan struct{})}
	bt.timer = time.AfterFunc(g.delay, func() {
		if g.take(bt) {
			g.commit(bt)
		}
	})
	return bt
}

// take closes bt to new saves, if it still takes them, and reports
// whether it did: whoever takes a batch commits it, once.
func (g *groupCommit) take(bt *batch) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != bt {
		return false // filled, and committed by the save that filled it
	}
	g.open, g.last = nil, len(bt.saves)
	return true
}

// saveGrouped is Save under WithGroupCommit. The caller has entered, and
// exits once this returns, unless it reports that the save left its batch
// (its context ended first): the commit exits for it then, so that the
// file stays open for the write, wherever the commit runs.
func (b *Bolt) saveGrouped(ctx context.Context, s *batchedSave) (left bool, err error) {
	bt, i, full := b.group.join(s)
	if full {
		b.commit(bt)
	}
	select {
	case <-bt.done:
		return false, bt.saves[i].err
	case <-ctx.Done():
	}
	bt.mu.Lock()
	if bt.told {
		bt.mu.Unlock()
		<-bt.done // being closed
		return false, bt.saves[i].err
	}
	bt.left++
	bt.mu.Unlock()
	return true, ctx.Err()
}

// startGrouped is StartSave under WithGroupCommit. A batch it fills is
// committed on a goroutine of its own: the caller does not wait for it.
func (b *Bolt) startGrouped(pchannel string, checkpoint wal.MessageID, raw []byte, done func(error)) {
	bt, _, full := b.group.join(&batchedSave{pchannel: pchannel, checkpoint: checkpoint, raw: raw, done: done})
	if full {
		go b.commit(bt)
	}
}

// errNothingWritten rolls back a batch whose every save was refused.
var errNothingWritten = errors.New("persistence: nothing written")

// commit writes a batch in one transaction and tells its saves: those of
// Save through the batch's done, those of StartSave through their own, in
// the order they came, on this goroutine. It waits for its turn without
// a bound: its saves have started, and a call holds the turn for one
// transaction at most.
func (b *Bolt) commit(bt *batch) {
	_ = b.takeTurn(context.Background())
	err := b.guard("save", func() error {
		return b.db.Update(func(tx *bolt.Tx) error {
			// One key buffer and one cursor for the whole batch: a
			// save's own made three allocations, a tenth of its cost.
			w := b.newWriter(tx)
			var key []byte
			wrote := false
			for i := range bt.saves {
				s := &bt.saves[i]
				key = append(key[:0], s.pchannel...)
				if s.replace {
					s.err = w.bucket.Put(key, s.raw)
				} else {
					refused, err := w.put(key, s.pchannel, s.checkpoint, s.raw)
					if err == nil {
						err = refused
					}
					s.err = err
				}
				wrote = wrote || s.err == nil
			}
			if !wrote {
				// Every save refused: no commit, which would write a
				// meta page and sync the file for nothing.
				return errNothingWritten
			}
			return nil
		})
	})
	b.releaseTurn()
	if errors.Is(err, errNothingWritten) {
		err = nil
	}
	if err != nil {
		err = b.writeFailed("save", err)
		for i := range bt.saves {
			bt.saves[i].err = err
		}
	}
	// Here, not in Replace: one whose context ended has returned already.
	for i := range bt.saves {
		if s := &bt.saves[i]; s.replace && s.err == nil {
			b.forgetMisplaced(s.pchannel) // its key holds a record that reads now
		}
	}
	bt.mu.Lock()
	bt.told = true
	left := bt.left
	bt.mu.Unlock()
	close(bt.done)
	for i := range bt.saves {
		if s := &bt.saves[i]; s.done != nil {
			b.answer(s.done, s.err)
		}
	}
	for range left {
		b.exit()
	}
	if bt.waiters == 0 {
		b.group.recycle(bt.saves)
	}
}

// recycle keeps the saves of a batch committed and told for the next one.
func (g *groupCommit) recycle(saves []batchedSave) {
	clear(saves)
	g.mu.Lock()
	g.spare = saves[:0]
	g.mu.Unlock()
}

// answer tells a started save its outcome, which ends its call. A done
// that panics is taken as told: the panic goes no further than this,
// where it would end the process (this may be a timer's goroutine), leave
// the saves after it untold and Close waiting for them.
func (b *Bolt) answer(done func(error), err error) {
	defer b.exit()
	defer func() { _ = recover() }()
	done(err)
}
