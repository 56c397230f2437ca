package bench

import (
	"container/heap"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// The reference rows of BenchmarkUpdate, beside baseline and lowwater:
//
//	floor   the physical floor of an update through an actor: one hand-off
//	        over a buffered channel to a goroutine that fixes a heap
//	mutex   the plainest shared-memory design: a mutex over a map and a
//	        container/heap of int64 positions
//	sender  lowwater through actors.Sender, which coalesces updates into
//	        UpdateBatches
const (
	implFloor  = "floor"
	implMutex  = "mutex"
	implSender = "sender"
)

// posHeap is a min-heap of vchannel positions; each item knows its index.
type posHeap []*posItem

type posItem struct {
	pos   int64
	index int
}

func (h posHeap) Len() int           { return len(h) }
func (h posHeap) Less(i, j int) bool { return h[i].pos < h[j].pos }
func (h posHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *posHeap) Push(x any) { it := x.(*posItem); it.index = len(*h); *h = append(*h, it) }
func (h *posHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// positions is a vchannel map over a posHeap, with the last minimum seen.
type positions struct {
	items   map[string]*posItem
	heap    posHeap
	minimum int64
	// rose is signalled, without blocking, when the minimum rises: where a
	// saver would be woken.
	rose chan struct{}
}

func newPositions(vchannels map[string]wal.MessageID) *positions {
	p := &positions{items: make(map[string]*posItem, len(vchannels)), rose: make(chan struct{}, 1)}
	for v, id := range vchannels {
		it := &posItem{pos: int64(id.(wal.KafkaID))}
		p.items[v] = it
		heap.Push(&p.heap, it)
	}
	p.minimum = p.heap[0].pos
	return p
}

func (p *positions) update(vchannel string, pos int64) {
	it, ok := p.items[vchannel]
	if !ok || pos < it.pos {
		return // rejected
	}
	it.pos = pos
	heap.Fix(&p.heap, it.index)
	if m := p.heap[0].pos; m > p.minimum {
		p.minimum = m
		select {
		case p.rose <- struct{}{}:
		default:
		}
	}
}

// mutexFleet is one positions per pchannel, each under a mutex.
type mutexFleet []*mutexPChannel

type mutexPChannel struct {
	mu sync.Mutex
	p  *positions
}

func newMutexFleet(s spec) mutexFleet {
	f := make(mutexFleet, len(s.pchannels))
	for i := range f {
		f[i] = &mutexPChannel{p: newPositions(s.vchannels)}
	}
	return f
}

func (f mutexFleet) update(i int, vchannel string, id wal.MessageID) {
	pos := int64(id.(wal.KafkaID)) // a caller holding int64 positions
	m := f[i]
	m.mu.Lock()
	m.p.update(vchannel, pos)
	m.mu.Unlock()
}

func (f mutexFleet) updateBatch(i int, u []messages.VChannelCheckpoint) {
	for _, c := range u {
		f.update(i, c.VChannel, c.Checkpoint)
	}
}

func (mutexFleet) barrier(testing.TB) {}
func (mutexFleet) close(testing.TB)   {}

// floorFleet is one goroutine per pchannel, fed by a buffered channel.
type floorFleet []*floorPChannel

type floorPChannel struct {
	in   chan floorMsg
	done chan struct{}
}

// floorMsg is an update, or with ack set a barrier.
type floorMsg struct {
	vchannel string
	pos      int64
	ack      chan struct{}
}

func newFloorFleet(s spec) floorFleet {
	f := make(floorFleet, len(s.pchannels))
	for i := range f {
		fp := &floorPChannel{in: make(chan floorMsg, 1024), done: make(chan struct{})}
		p := newPositions(s.vchannels)
		go func() {
			defer close(fp.done)
			for m := range fp.in {
				if m.ack != nil {
					close(m.ack)
					continue
				}
				p.update(m.vchannel, m.pos)
			}
		}()
		f[i] = fp
	}
	return f
}

func (f floorFleet) update(i int, vchannel string, id wal.MessageID) {
	f[i].in <- floorMsg{vchannel: vchannel, pos: int64(id.(wal.KafkaID))}
}

func (f floorFleet) updateBatch(i int, u []messages.VChannelCheckpoint) {
	for _, c := range u {
		f.update(i, c.VChannel, c.Checkpoint)
	}
}

func (f floorFleet) barrier(tb testing.TB) {
	for _, fp := range f {
		ack := make(chan struct{})
		fp.in <- floorMsg{ack: ack}
		<-ack
	}
}

func (f floorFleet) close(testing.TB) {
	for _, fp := range f {
		close(fp.in)
		<-fp.done
	}
}

// senderFleet is an actor fleet fed through one actors.Sender per pchannel.
type senderFleet struct {
	*actorFleet
	senders []*actors.Sender
}

func newSenderFleet(tb testing.TB, s spec) *senderFleet {
	f := &senderFleet{actorFleet: newActorFleet(tb, s)}
	for _, pid := range f.pids {
		snd, err := actors.NewSender(f.sys, pid)
		if err != nil {
			f.close(tb)
			tb.Fatal(err)
		}
		f.senders = append(f.senders, snd)
	}
	return f
}

func (f *senderFleet) update(i int, vchannel string, id wal.MessageID) {
	if err := f.senders[i].Update(vchannel, id); err != nil {
		panic(err) // not in a benchmark's goroutine: b.Fatal is not allowed here
	}
}

func (f *senderFleet) updateBatch(i int, u []messages.VChannelCheckpoint) {
	for _, c := range u {
		f.update(i, c.VChannel, c.Checkpoint)
	}
}

// barrier flushes every sender: a flush returns once the actor answered
// every batch holding an update made before it.
func (f *senderFleet) barrier(tb testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, s := range f.senders {
		if err := s.Flush(ctx); err != nil {
			tb.Fatalf("flush pchannel %d: %v", i, err)
		}
	}
}

func (f *senderFleet) close(tb testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, s := range f.senders {
		if err := s.Close(ctx); err != nil {
			tb.Errorf("close sender %d: %v", i, err)
		}
	}
	f.actorFleet.close(tb)
}
