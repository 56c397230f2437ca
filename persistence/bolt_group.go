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
// bbolt's default MaxBatchSize, which keeps a transaction's dirty pages
// small. A full batch is ready at once, without waiting out any delay.
const maxGroupSaves = 1000

// groupCommit gathers the Saves that arrive together (group commit)
// into one write transaction and one fsync. One committer at a time
// writes the batches, in the order they became ready; the saves that
// come while it commits gather into the next batch. With no delay (the
// default) the batch still open is ready as soon as the committer is
// free: a lone save waits for its own commit only, and under load a
// batch holds what came during the commit before it, so that commits
// follow one another as fast as the disk syncs and never wait for a
// timer. With a delay, a batch is ready once full or once its delay has
// passed since its first save, as in bbolt's DB.Batch, where a lone save
// waits out the whole delay: fewer, larger commits for whoever would
// rather trade latency for them.
//
// It is ours rather than DB.Batch for that policy and for two reasons
// more:
//
//   - DB.Batch commits a batch whose delay passed on a timer goroutine,
//     unguarded, so a damaged page met while writing panicked that
//     goroutine and took the process down; here every commit runs under
//     the Bolt's guard and becomes ErrCorruptStore like any other damage.
//   - A waiting Save costs no channel, closure or retry of its own: the
//     saves of a batch wait on one channel, and each reads its own
//     outcome. DB.Batch reran the whole transaction without a save whose
//     function failed; a save here fails alone and the others commit,
//     since a put that bbolt refuses changes nothing.
//
// Every Save still returns only once the transaction holding its write
// committed, and the never-lower check still runs inside it.
type groupCommit struct {
	// delay is how long a batch waits for more saves before it is ready
	// (0: not at all, it is ready whenever the committer is free).
	delay time.Duration
	// commit writes a batch and wakes its Saves; tell tells its started
	// saves and ends their calls: the Bolt's, bound once rather than on
	// every save.
	commit, tell func(*batch)

	mu sync.Mutex
	// open is the batch still taking saves, or nil.
	open *batch // guarded by mu
	// ready holds the batches closed to new saves (full, or their delay
	// passed) and not yet taken by the committer, oldest first.
	ready []*batch // guarded by mu
	// committing is set from the start of a committer (run) until it
	// has written its batch and handed its role on: one writes at a time.
	committing bool // guarded by mu
	// last is how many saves the last batch took: the next one is made
	// that large, so that under a steady load a batch is one allocation.
	last int // guarded by mu
	// spares are the saves of batches committed and told, emptied, for
	// the next batches to take, the larger kept: a round of a thousand
	// saves made one of 80 KiB. Two, since one batch fills while another
	// commits; with one, a batch told while the other's spare waited
	// dropped one of them, and the next batch grew a new one from 8 saves.
	spares [2][]batchedSave // guarded by mu
}

// batch is one group commit: its saves, in the order they came, and done,
// closed once every save's err is set.
type batch struct {
	saves []batchedSave
	done  chan struct{}
	// timer makes the batch ready once the delay has passed; nil without
	// a delay.
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
	// turnHeld is set by a Save that commits the batch itself
	// (commitHere): it took the file's turn before it took the batch.
	turnHeld bool
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
// returns the batch and the index of s in it. start reports that a
// committer must be started (go run): none runs, and a batch is ready.
func (g *groupCommit) join(s *batchedSave) (bt *batch, i int, start bool) {
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
	if len(bt.saves) >= maxGroupSaves {
		g.closeLocked()
		g.ready = append(g.ready, bt)
	}
	return bt, i, g.startLocked()
}

// newBatch makes a batch, which with a delay is ready once the delay has
// passed, unless it filled first. (Apart from join so that the timer's
// closure captures a variable of its own: capturing join's result moved
// it to the heap on every save.)
func (g *groupCommit) newBatch() *batch {
	if cap(g.spares[0]) < cap(g.spares[1]) {
		g.spares[0], g.spares[1] = g.spares[1], g.spares[0]
	}
	saves := g.spares[0]
	g.spares[0] = nil
	if cap(saves) < max(g.last, 8) {
		saves = make([]batchedSave, 0, max(g.last, 8))
	}
	bt := &batch{saves: saves, done: make(chan struct{})}
	if g.delay > 0 {
		bt.timer = time.AfterFunc(g.delay, func() {
			if g.expire(bt) {
				g.run()
			}
		})
	}
	return bt
}

// closeLocked closes the open batch to new saves.
func (g *groupCommit) closeLocked() {
	bt := g.open
	g.open, g.last = nil, len(bt.saves)
	if bt.timer != nil {
		bt.timer.Stop()
	}
}

// startLocked reports whether a committer must be started, and if so
// marks it running: none runs, and there is a batch to take.
func (g *groupCommit) startLocked() bool {
	if g.committing || len(g.ready) == 0 && (g.delay > 0 || g.open == nil) {
		return false
	}
	g.committing = true
	return true
}

// expire makes bt ready once its delay has passed, if it still takes
// saves, and reports whether a committer must be started for it. A batch
// that filled first is ready already (a stopped timer whose function has
// started runs all the same).
func (g *groupCommit) expire(bt *batch) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == bt {
		g.closeLocked()
		g.ready = append(g.ready, bt)
	}
	return g.startLocked()
}

// next takes the batch to commit next: the oldest ready one, or without a
// delay the one open. With none it ends the committer and returns nil.
func (g *groupCommit) next() *batch {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.ready) > 0 {
		bt := g.ready[0]
		g.ready[0] = nil
		g.ready = g.ready[1:]
		return bt
	}
	if g.delay == 0 && g.open != nil {
		bt := g.open
		g.closeLocked()
		return bt
	}
	g.committing = false
	return nil
}

// run is the committer: it commits the next batch ready, if any, then
// hands its role on before it tells the batch's started saves, and so
// one committer follows another, a goroutine each, until no batch is
// ready. A done that saves to this Bolt again, or is slow, then delays
// no commit: its save joins the next batch, which the next committer
// takes. It runs on a goroutine of its own (a timer's, or one a save
// started); a Save's caller that finds no committer commits one batch
// itself instead (commitHere).
func (g *groupCommit) run() {
	if bt := g.commitNext(false); bt != nil {
		g.tell(bt)
	}
}

// commitNext commits the next batch ready, if any, and hands the
// committer's role on: to a new goroutine when another batch is ready,
// which takes the batches after this one. It returns the batch
// committed, for its caller to tell. turnHeld says the caller holds the
// file's turn already.
func (g *groupCommit) commitNext(turnHeld bool) *batch {
	bt := g.next()
	if bt == nil {
		return nil
	}
	bt.turnHeld = turnHeld
	g.commit(bt)
	g.mu.Lock()
	g.committing = false
	next := g.startLocked()
	g.mu.Unlock()
	if next {
		go g.run()
	}
	return bt
}

// commitHere is the committer on a Save's caller that found none
// running, and took the file's turn without waiting: it commits the
// batch ready, its own, and no other, and reports whether it did, its
// commit giving the turn back. (join made the caller the committer with
// a batch to take: there is always one.) Starting a committer and
// waiting for it cost a lone save a sixth of its time (a goroutine's
// wake-up and back, about 40 µs against a 200 µs fsync); the commit,
// once begun, runs to its end, as a transaction of its own does. The
// batch's started saves are told on a new goroutine, if it holds any,
// so that no done delays the Save.
func (g *groupCommit) commitHere() bool {
	bt := g.commitNext(true)
	switch {
	case bt == nil:
		return false
	case len(bt.saves) > bt.waiters:
		go g.tell(bt)
	default:
		g.tell(bt) // ends the calls of the Saves that left it
	}
	return true
}

// saveGrouped is Save under group commit. The caller has entered, and
// exits once this returns, unless it reports that the save left its batch
// (its context ended first): the commit exits for it then, so that the
// file stays open for the write, wherever the commit runs.
func (b *Bolt) saveGrouped(ctx context.Context, s *batchedSave) (left bool, err error) {
	bt, i, start := b.group.join(s)
	switch {
	case !start:
	case b.tryTurn():
		if !b.group.commitHere() {
			b.releaseTurn()
		}
	default:
		// Another call holds the file: wait for it within ctx, as ever.
		go b.group.run()
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

// startGrouped is StartSave under group commit: the caller does not
// wait for the commit.
func (b *Bolt) startGrouped(pchannel string, checkpoint wal.MessageID, raw []byte, done func(error)) {
	_, _, start := b.group.join(&batchedSave{pchannel: pchannel, checkpoint: checkpoint, raw: raw, done: done})
	if start {
		go b.group.run()
	}
}

// errNothingWritten rolls back a batch whose every save was refused.
var errNothingWritten = errors.New("persistence: nothing written")

// commit writes a batch in one transaction, and wakes the Saves waiting
// for it; the committer tells the others after (tell). Unless its
// committer holds the turn already (commitHere), it waits for it without
// a bound: its saves have started, and a call holds the turn for one
// transaction at most.
func (b *Bolt) commit(bt *batch) {
	if !bt.turnHeld {
		_ = b.takeTurn(context.Background())
	}
	err := b.guard("save", func() error {
		return b.update(func(tx *bolt.Tx) error {
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
	bt.mu.Unlock()
	close(bt.done)
}

// tell calls the done of each save of bt that StartSave started, from
// the from-th on, in the order they came, and then ends the calls of the
// batch's saves told (owed, those told before from) and of the Saves that
// left it (their context ended first), at once: an end per save took the
// lock that every call takes to start, and a backlog of a hundred
// thousand saves took a minute to end while callers kept trying.
//
// A done that ends its goroutine (runtime.Goexit, as t.FailNow does),
// which no recover stops, ends this call too: the rest of the batch is
// told on a new goroutine, as it would be otherwise.
func (b *Bolt) tell(bt *batch, from, owed int) {
	i, cut := from, true
	defer func() {
		if cut {
			go b.tell(bt, i+1, owed+1) // save i was told: its done ran
		}
	}()
	for ; i < len(bt.saves); i++ {
		if done := bt.saves[i].done; done != nil {
			answer(done, bt.saves[i].err)
			owed++
		}
	}
	cut = false
	bt.mu.Lock()
	left := bt.left
	bt.mu.Unlock()
	if bt.waiters == 0 {
		b.group.recycle(bt.saves)
	}
	b.exitN(owed + left)
}

// recycle keeps the saves of a batch committed and told for the next
// ones, in place of the smaller spare.
func (g *groupCommit) recycle(saves []batchedSave) {
	clear(saves)
	g.mu.Lock()
	if cap(g.spares[0]) > cap(g.spares[1]) {
		g.spares[0], g.spares[1] = g.spares[1], g.spares[0]
	}
	if cap(saves) > cap(g.spares[0]) {
		g.spares[0] = saves[:0]
	}
	g.mu.Unlock()
}

// answer tells a started save its outcome. A done that panics is taken
// as told: the panic goes no further than this, where it would end the
// process (this may be a timer's goroutine), and leave the saves after
// it untold and Close waiting for them.
func answer(done func(error), err error) {
	defer func() { _ = recover() }()
	done(err)
}
