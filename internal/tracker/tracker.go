// Package tracker keeps the checkpoints of one pchannel's vchannels and
// their minimum, the pchannel's low-water mark.
//
// It is the pure core under the PChannel actor: no goroutines, no I/O, no
// locks. The actor's mailbox is its only caller, so it needs none.
package tracker

import (
	"fmt"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// Tracker is a map of vchannel checkpoints plus an indexed min-heap over
// them, so that the minimum is O(1) and every change is O(log n) with no
// allocation on Update.
type Tracker struct {
	wal    wal.Checker
	byName map[string]*entry
	// heap is a binary min-heap ordered by checkpoint.
	// Invariant: heap[i].index == i, and byName[e.vchannel] == e for every e in heap.
	heap []*entry
}

type entry struct {
	vchannel   string
	checkpoint wal.MessageID
	index      int
}

// New returns an empty tracker for IDs of the named WAL.
func New(walName string) (*Tracker, error) {
	checker, err := wal.NewChecker(walName)
	if err != nil {
		return nil, err
	}
	return &Tracker{wal: checker, byName: make(map[string]*entry)}, nil
}

// Len returns the number of tracked vchannels.
func (t *Tracker) Len() int { return len(t.heap) }

// Minimum returns the smallest checkpoint, or nil when no vchannel is tracked.
func (t *Tracker) Minimum() wal.MessageID {
	if len(t.heap) == 0 {
		return nil
	}
	return t.heap[0].checkpoint
}

// Get returns the checkpoint of one vchannel.
func (t *Tracker) Get(vchannel string) (wal.MessageID, bool) {
	e, ok := t.byName[vchannel]
	if !ok {
		return nil, false
	}
	return e.checkpoint, true
}

// Checkpoints returns a copy of every vchannel's checkpoint.
func (t *Tracker) Checkpoints() map[string]wal.MessageID {
	m := make(map[string]wal.MessageID, len(t.heap))
	for _, e := range t.heap {
		m[e.vchannel] = e.checkpoint
	}
	return m
}

// Validate returns the error Add or Update would reject this checkpoint
// with before looking at the vchannel's state: empty name, nil or foreign ID.
func (t *Tracker) Validate(vchannel string, checkpoint wal.MessageID) error {
	if vchannel == "" {
		return messages.ErrEmptyVChannel
	}
	if checkpoint == nil {
		return fmt.Errorf("%w: vchannel %q", messages.ErrNilCheckpoint, vchannel)
	}
	if err := t.wal.Check(checkpoint); err != nil {
		return fmt.Errorf("vchannel %q: %w", vchannel, err)
	}
	return nil
}

// Add starts tracking a vchannel. It may lower the minimum, never raise it,
// except from none to some: it reports advanced when the tracker was empty.
func (t *Tracker) Add(vchannel string, checkpoint wal.MessageID) (advanced bool, err error) {
	if err := t.Validate(vchannel, checkpoint); err != nil {
		return false, err
	}
	if _, ok := t.byName[vchannel]; ok {
		return false, fmt.Errorf("%w: %q", messages.ErrVChannelExists, vchannel)
	}
	e := &entry{vchannel: vchannel, checkpoint: checkpoint, index: len(t.heap)}
	t.byName[vchannel] = e
	t.heap = append(t.heap, e)
	t.up(e.index)
	return len(t.heap) == 1, nil
}

// Update moves a vchannel's checkpoint forward. An equal checkpoint is
// accepted and changes nothing; a lower one is a rollback and is rejected.
// It reports whether the minimum strictly rose: with ties at the minimum it
// rises only once every vchannel at it has moved.
func (t *Tracker) Update(vchannel string, checkpoint wal.MessageID) (advanced bool, err error) {
	if err := t.Validate(vchannel, checkpoint); err != nil {
		return false, err
	}
	e, ok := t.byName[vchannel]
	if !ok {
		return false, fmt.Errorf("%w: %q", messages.ErrVChannelNotFound, vchannel)
	}
	if checkpoint.LT(e.checkpoint) {
		return false, fmt.Errorf("%w: vchannel %q from %s to %s",
			messages.ErrCheckpointRollback, vchannel, e.checkpoint, checkpoint)
	}
	if checkpoint.EQ(e.checkpoint) {
		return false, nil
	}
	before := t.heap[0].checkpoint
	e.checkpoint = checkpoint
	t.down(e.index)
	return before.LT(t.heap[0].checkpoint), nil
}

// Drop stops tracking a vchannel. It reports whether the minimum strictly
// rose; dropping the last vchannel leaves no minimum, which is not a rise.
func (t *Tracker) Drop(vchannel string) (advanced bool, err error) {
	if vchannel == "" {
		return false, messages.ErrEmptyVChannel
	}
	e, ok := t.byName[vchannel]
	if !ok {
		return false, fmt.Errorf("%w: %q", messages.ErrVChannelNotFound, vchannel)
	}
	before := t.heap[0].checkpoint
	delete(t.byName, vchannel)
	i, last := e.index, len(t.heap)-1
	if i != last {
		t.swap(i, last)
	}
	t.heap[last] = nil
	t.heap = t.heap[:last]
	if i < last {
		t.down(i)
		t.up(i)
	}
	return last > 0 && before.LT(t.heap[0].checkpoint), nil
}

func (t *Tracker) less(i, j int) bool { return t.heap[i].checkpoint.LT(t.heap[j].checkpoint) }

func (t *Tracker) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.heap[i].index = i
	t.heap[j].index = j
}

func (t *Tracker) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !t.less(i, parent) {
			return
		}
		t.swap(i, parent)
		i = parent
	}
}

func (t *Tracker) down(i int) {
	n := len(t.heap)
	for {
		smallest := i
		if l := 2*i + 1; l < n && t.less(l, smallest) {
			smallest = l
		}
		if r := 2*i + 2; r < n && t.less(r, smallest) {
			smallest = r
		}
		if smallest == i {
			return
		}
		t.swap(i, smallest)
		i = smallest
	}
}
