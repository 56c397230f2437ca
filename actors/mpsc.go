package actors

import "sync/atomic"

// mpsc is an unbounded multi-producer, single-consumer queue: a linked
// list of fixed segments. A producer claims a cell with one atomic add on
// its segment and publishes it with one atomic store; the consumer reads
// cells in order. Segments are never reused, so no producer can ever write
// into a segment that has taken a new place in the list.
//
// A mailbox queues its user messages in one; the pool queues its tasks in
// another, whose consumer is whoever holds the pool's lock.
type mpsc[T any] struct {
	tail atomic.Pointer[segment[T]]
	// segments counts the segments linked so far, for len.
	segments atomic.Int64
	// The producers' fields above are read on every push, the consumer's
	// below written on every pop: on one cache line, each pop would take
	// the line from the producers' cores.
	_ [cacheLine - 16]byte
	// popped counts messages taken, for len, up to the last settle: an
	// atomic add per pop stalled the consumer on every message, and len
	// is an estimate. taken counts the pops since, the consumer's own.
	popped atomic.Int64
	taken  int64
	// head and at are the consumer's: the segment and cell it reads next.
	// Cells of head from cleared to at still hold messages taken: pop
	// leaves them (see settle).
	head    *segment[T]
	at      int
	cleared int
}

const segmentCells = 8

// cacheLine is the size of a cache line on amd64 and arm64 servers.
const cacheLine = 64

type segment[T any] struct {
	next    atomic.Pointer[segment[T]]
	claimed atomic.Uint32
	cells   [segmentCells]cell[T]
}

type cell[T any] struct {
	msg   T
	ready atomic.Bool
}

func (q *mpsc[T]) init() {
	s := new(segment[T])
	q.head = s
	q.tail.Store(s)
	q.segments.Store(1)
}

// push appends msg; it is safe for concurrent use.
func (q *mpsc[T]) push(msg T) {
	s := q.tail.Load()
	for {
		if i := s.claimed.Add(1) - 1; i < segmentCells {
			c := &s.cells[i]
			c.msg = msg
			c.ready.Store(true)
			return
		}
		// Full: link a next segment, unless another sender did, and move
		// the tail to it, unless another sender did.
		next := s.next.Load()
		if next == nil {
			fresh := new(segment[T])
			if s.next.CompareAndSwap(nil, fresh) {
				q.segments.Add(1)
				next = fresh
			} else {
				next = s.next.Load()
			}
		}
		q.tail.CompareAndSwap(s, next)
		s = q.tail.Load()
	}
}

// pop takes the next message, if it has been published. Only the consumer
// may call it.
func (q *mpsc[T]) pop() (T, bool) {
	if q.at == segmentCells {
		next := q.head.next.Load()
		if next == nil {
			var zero T
			return zero, false
		}
		q.head, q.at, q.cleared = next, 0, 0
	}
	c := &q.head.cells[q.at]
	if !c.ready.Load() {
		var zero T
		return zero, false
	}
	msg := c.msg
	q.at++
	q.taken++
	return msg, true
}

// settle makes the pops so far count in len, and lets go of the messages
// they took that the head segment still holds (older segments are
// garbage already). pop leaves them: clearing a cell took the cache line
// the producers write next from their core on every message, about a
// seventh of a single update. So while a handler runs, up to
// segmentCells-1 messages it has handled stay reachable; none do once
// the run ends or yields. Only the consumer may call it: the mailbox does
// then, and the pool when its queue runs empty, so that up to
// segmentCells tasks that ran stay reachable until then.
func (q *mpsc[T]) settle() {
	if q.taken != 0 {
		q.popped.Add(q.taken)
		q.taken = 0
	}
	for ; q.cleared < q.at; q.cleared++ {
		var zero T
		q.head.cells[q.cleared].msg = zero
	}
}

// ready reports whether pop would return a message. Only the consumer may
// call it.
func (q *mpsc[T]) ready() bool { return q.next().ready() }

// next returns where the next message will appear. Only the consumer may
// call it; the place may then be watched by anyone.
func (q *mpsc[T]) next() place[T] {
	if q.at == segmentCells {
		return place[T]{link: &q.head.next}
	}
	return place[T]{cell: &q.head.cells[q.at]}
}

// place is either a cell or, when the consumer's segment is used up, the
// link to the segment after it.
type place[T any] struct {
	cell *cell[T]
	link *atomic.Pointer[segment[T]]
}

// ready reports whether a message has appeared there; it is safe for
// concurrent use.
func (p place[T]) ready() bool {
	if p.cell != nil {
		return p.cell.ready.Load()
	}
	if s := p.link.Load(); s != nil {
		return s.cells[0].ready.Load()
	}
	return false
}

// len estimates how many messages wait; it is safe for concurrent use.
func (q *mpsc[T]) len() int {
	pushed := (q.segments.Load()-1)*segmentCells + int64(min(q.tail.Load().claimed.Load(), segmentCells))
	return int(max(pushed-q.popped.Load(), 0))
}
