package actors

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lowwater/lowwater/messages"
)

// A Sender holds its updates while a batch is in flight, so a Drop sent to
// the pchannel meanwhile overtakes the update of its vchannel that was
// made before it. Applied after the Drop, and after an Add of the vchannel
// again, that update raised the new vchannel to where the old one was: a
// checkpoint above the data not yet consumed, which a restart skips.
//
// So the mailbox marks, as it takes a Drop and before it queues it, the
// update of its vchannel each Sender of the pchannel holds, waiting or in
// the batch taken (senderDrops.posting). The pchannel sets the mark once
// it has applied the Drop (handled), and skips a marked update that comes
// after: made before the Drop, it counts as applied to the vchannel the
// Drop ended. A Drop refused, the vchannel still there, leaves the update
// to be applied, as it would have been. An update of the vchannel made
// after the Drop was posted replaces the marked one, unmarked, with no
// rollback check against it: the actor judges it, and should the Drop be
// refused, the marked update is lost, the vchannel kept lower (replayed,
// not skipped). Only the post is looked at: a Drop given to an actor in
// between counts from when that actor posts it, and one a middleware
// hands on as a copy is not the one posted. A pchannel on a mailbox of
// the caller's (actor.WithMailbox) has none of this.

// dropMark is set once the pchannel has applied the Drop it stands for.
type dropMark struct{ done atomic.Bool }

// staleTag marks the update of vchannel in a batch: it is skipped if the
// Drop of mark came before the batch.
type staleTag struct {
	vchannel string
	mark     *dropMark
}

// postedDrop is a Drop posted and not yet handled, with its mark.
type postedDrop struct {
	msg  *messages.DropVChannel
	mark *dropMark
}

// senderDrops is a pchannel mailbox's share of that: its Senders, the
// Drops posted and not yet handled, and the batches holding marked
// updates.
type senderDrops struct {
	mu      sync.Mutex
	senders []*Sender                            // guarded by mu
	posted  []postedDrop                         // guarded by mu
	stale   map[*messages.UpdateBatch][]staleTag // guarded by mu
	// any is set while stale holds a batch: a batch's handler looks for
	// its tags only then, with one load.
	any atomic.Bool
}

func (ds *senderDrops) addSender(s *Sender) {
	ds.mu.Lock()
	ds.senders = append(ds.senders, s)
	ds.mu.Unlock()
}

func (ds *senderDrops) removeSender(s *Sender) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if i := slices.Index(ds.senders, s); i >= 0 {
		ds.senders = slices.Delete(ds.senders, i, i+1)
	}
}

// posting marks, in each Sender, the update of d's vchannel made so far,
// as the mailbox takes d and before it queues it.
func (ds *senderDrops) posting(d *messages.DropVChannel) {
	if d == nil {
		return
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	var mark *dropMark
	for _, s := range ds.senders {
		mark = s.markDropped(d.VChannel, mark, ds)
	}
	// Every post takes its place in line, with a mark or none: handled
	// matches the posts of one pointer in order, and a Drop sent twice,
	// refused once, must not give its refusal to the other's mark. A
	// Drop that never reaches the handler (a middleware of the caller's
	// swallowed it) keeps its place; the oldest go past maxPosted.
	if len(ds.posted) == maxPosted {
		ds.posted = slices.Delete(ds.posted, 0, 1)
	}
	ds.posted = append(ds.posted, postedDrop{msg: d, mark: mark})
}

// maxPosted bounds the Drops posted and not yet handled that a mailbox
// keeps: far more than a mailbox holds in any run, unless Drops are
// swallowed on the way to the handler.
const maxPosted = 4096

// handled is the pchannel's word that it handled d: applied, or refused.
func (ds *senderDrops) handled(d *messages.DropVChannel, applied bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for i, p := range ds.posted {
		if p.msg == d {
			if p.mark != nil {
				p.mark.done.Store(applied)
			}
			ds.posted = slices.Delete(ds.posted, i, i+1)
			return
		}
	}
}

// tag records tags for batch, before it is posted.
func (ds *senderDrops) tag(batch *messages.UpdateBatch, tags []staleTag) {
	ds.mu.Lock()
	ds.tagLocked(batch, tags...)
	ds.mu.Unlock()
}

func (ds *senderDrops) tagLocked(batch *messages.UpdateBatch, tags ...staleTag) {
	if ds.stale == nil {
		ds.stale = make(map[*messages.UpdateBatch][]staleTag)
	}
	ds.stale[batch] = append(ds.stale[batch], tags...)
	ds.any.Store(true)
}

// take returns the tags of batch, as its handler begins, and forgets
// them.
func (ds *senderDrops) take(batch *messages.UpdateBatch) []staleTag {
	if !ds.any.Load() {
		return nil
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	tags := ds.stale[batch]
	ds.forgetLocked(batch)
	return tags
}

// untag forgets the tags of batch once its Sender has its answer: a
// batch never handled (refused as the pchannel stopped), or tagged by a
// Drop posted as it was handled, after take, would keep any set, and
// every batch would take the lock. With none set, it takes no lock.
func (ds *senderDrops) untag(batch *messages.UpdateBatch) {
	if !ds.any.Load() {
		return
	}
	ds.mu.Lock()
	ds.forgetLocked(batch)
	ds.mu.Unlock()
}

func (ds *senderDrops) forgetLocked(batch *messages.UpdateBatch) {
	delete(ds.stale, batch)
	ds.any.Store(len(ds.stale) > 0)
}

// stale reports whether the update of vchannel in a batch with tags was
// made before a Drop of it that came before the batch.
func stale(tags []staleTag, vchannel string) bool {
	for _, t := range tags {
		if t.vchannel == vchannel && t.mark.done.Load() {
			return true
		}
	}
	return false
}

// markDropped marks the update of vchannel s holds, waiting or in the
// batch it took, with mark, made if nil, and returns mark. ds.mu is held.
func (s *Sender) markDropped(vchannel string, mark *dropMark, ds *senderDrops) *dropMark {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.slots[vchannel]; ok && s.entries[i].gen == s.gen {
		if mark == nil {
			mark = new(dropMark)
		}
		e := &s.entries[i]
		if e.dropped == nil {
			s.marked++
		}
		e.dropped = append(e.dropped, mark)
	}
	if s.flyingMsg != nil && slices.ContainsFunc(s.flying, func(u messages.VChannelCheckpoint) bool { return u.VChannel == vchannel }) {
		// Taken and on its way, or queued ahead of the Drop, or being
		// handled: a batch handled after the Drop reads its tags as it
		// begins; one already begun never does, and is rightly applied,
		// ahead of the Drop (untag clears them).
		if mark == nil {
			mark = new(dropMark)
		}
		ds.tagLocked(s.flyingMsg, staleTag{vchannel: vchannel, mark: mark})
	}
	return mark
}

// takeMarksLocked moves the marks of the updates waiting in batch, about
// to be taken, to tags for the mailbox (senderDrops.tag).
func (s *Sender) takeMarksLocked(batch []messages.VChannelCheckpoint) []staleTag {
	if s.marked == 0 {
		return nil
	}
	var tags []staleTag
	for _, u := range batch {
		e := &s.entries[s.slots[u.VChannel]]
		for _, m := range e.dropped {
			tags = append(tags, staleTag{vchannel: u.VChannel, mark: m})
		}
		e.dropped = nil
	}
	s.marked = 0
	return tags
}
