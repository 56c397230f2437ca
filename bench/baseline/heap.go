package baseline

import (
	"container/heap"
	"errors"
	"fmt"

	"github.com/lowwater/lowwater/wal"
)

// The reference's three refusals. They are plain errors: the reference only
// logs them.
var (
	errVChannelExists   = errors.New("vchannel already exists")
	errVChannelNotFound = errors.New("vchannel not found")
	errRollback         = errors.New("checkpoint rollback is not allowed")
)

// vchannels is the reference's vchannel checkpoint set: an index by name
// over a container/heap min-heap of the same entries. Not safe for
// concurrent use; the Manager's mutex guards it.
type vchannels struct {
	byName map[string]*vchannel
	heap   vchannelHeap
}

// vchannel is one heap entry. Invariant: heap[pos].pos == pos.
type vchannel struct {
	name       string
	checkpoint wal.MessageID
	pos        int
}

// newVChannels builds the set from the checkpoints given at recovery. Like
// the reference, the index map is made without a size hint and the heap
// with one.
func newVChannels(initial map[string]wal.MessageID) *vchannels {
	s := &vchannels{byName: make(map[string]*vchannel), heap: make(vchannelHeap, 0, len(initial))}
	for name, cp := range initial {
		v := &vchannel{name: name, checkpoint: cp, pos: len(s.heap)}
		s.byName[name] = v
		s.heap = append(s.heap, v)
	}
	heap.Init(&s.heap)
	return s
}

func (s *vchannels) Len() int { return len(s.heap) }

// Minimum is nil when no vchannel is tracked.
func (s *vchannels) Minimum() wal.MessageID {
	if len(s.heap) == 0 {
		return nil
	}
	return s.heap[0].checkpoint
}

func (s *vchannels) Add(name string, checkpoint wal.MessageID) error {
	if _, ok := s.byName[name]; ok {
		return fmt.Errorf("vchannel %s: %w", name, errVChannelExists)
	}
	v := &vchannel{name: name, checkpoint: checkpoint}
	heap.Push(&s.heap, v)
	s.byName[name] = v
	return nil
}

func (s *vchannels) Drop(name string) error {
	v, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("vchannel %s: %w", name, errVChannelNotFound)
	}
	heap.Remove(&s.heap, v.pos)
	delete(s.byName, name)
	return nil
}

func (s *vchannels) Update(name string, checkpoint wal.MessageID) error {
	v, ok := s.byName[name]
	if !ok {
		return fmt.Errorf("vchannel %s: %w", name, errVChannelNotFound)
	}
	if checkpoint.LT(v.checkpoint) {
		return fmt.Errorf("vchannel %s from %s to %s: %w", name, v.checkpoint, checkpoint, errRollback)
	}
	if checkpoint.EQ(v.checkpoint) {
		return nil
	}
	v.checkpoint = checkpoint
	heap.Fix(&s.heap, v.pos)
	return nil
}

// vchannelHeap implements heap.Interface, ordered by checkpoint.
type vchannelHeap []*vchannel

func (h vchannelHeap) Len() int           { return len(h) }
func (h vchannelHeap) Less(i, j int) bool { return h[i].checkpoint.LT(h[j].checkpoint) }

func (h vchannelHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}

func (h *vchannelHeap) Push(x any) {
	v := x.(*vchannel)
	v.pos = len(*h)
	*h = append(*h, v)
}

func (h *vchannelHeap) Pop() any {
	old := *h
	n := len(old) - 1
	v := old[n]
	old[n] = nil
	*h = old[:n]
	return v
}
