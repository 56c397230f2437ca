// Package tracker keeps the checkpoints of one pchannel's vchannels and
// their minimum, the pchannel's low-water mark.
//
// It is the pure core under the PChannel actor: no goroutines, no I/O, no
// locks. The actor's mailbox is its only caller, so it needs none.
package tracker

import (
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// Tracker is an indexed min-heap of vchannel checkpoints, so that the
// minimum is O(1) and every change is O(log n) with no allocation on Update.
//
// It is laid out for memory, since a node keeps thousands of them: flat
// parallel slices and no pointer per vchannel. And for the cache, since
// with thousands of pchannels each Update finds its tracker cold: the
// slots are the hash table itself, so that finding a vchannel reads
// consecutive names, on one cache line mostly, rather than an index and
// then a name elsewhere for every probe: a sixth of an Update's time over
// 10,000 pchannels (BenchmarkUpdateCold).
//
// A vchannel has a slot s, a place in names and pos, found by hashing its
// name (open addressing, linear probing); the heap orders the
// checkpoints, each naming its slot. A slot moves only when a Drop shifts
// the probe run after the hole back, or when the table is resized.
type Tracker struct {
	wal wal.Checker
	// broken, once set, is returned by every later change (see restore).
	broken error
	// heap is a binary min-heap of checkpoints; heapSlot[i] is the slot of
	// heap[i].
	// Invariant: pos[heapSlot[i]] == i for every i, and heap and heapSlot
	// are as long.
	heap     []wal.MessageID
	heapSlot []int32
	// names is the hash table of slots: names[s] is the vchannel in slot
	// s, "" a free slot (no vchannel is named so), and pos[s] its heap
	// position. Their length is a power of two, at least 8/7 of the
	// vchannel count plus one, so that a probe always ends at a free slot.
	// Invariant: every vchannel is reachable from its hash's home slot
	// without crossing a free one.
	names []string
	pos   []int32
	// namesShared is true once ShareNames gave names away: it is copied
	// before any change in place.
	namesShared bool
	// guarded is set for a WAL registered outside package wal, whose IDs'
	// comparisons may panic: its changes run under guard.
	guarded bool
}

// seed keys the table's hash; one per process is enough, since the table
// lives only in memory.
var seed = maphash.MakeSeed()

// New returns an empty tracker for IDs of the named WAL.
func New(walName wal.Name) (*Tracker, error) {
	checker, err := wal.NewChecker(walName)
	if err != nil {
		return nil, err
	}
	size := tableSize(0)
	return &Tracker{wal: checker, guarded: !checker.BuiltIn(), names: make([]string, size), pos: make([]int32, size)}, nil
}

// NewFrom returns a tracker of the named WAL holding checkpoints, sized for
// them and heapified at once. It rejects what a sequence of Adds would
// reject, with the error of the first entry Add would refuse, and then
// returns no tracker.
func NewFrom(walName wal.Name, checkpoints []messages.VChannelCheckpoint) (*Tracker, error) {
	checker, err := wal.NewChecker(walName)
	if err != nil {
		return nil, err
	}
	n, size := len(checkpoints), tableSize(len(checkpoints))
	t := &Tracker{
		wal:      checker,
		guarded:  !checker.BuiltIn(),
		heap:     make([]wal.MessageID, 0, n),
		heapSlot: make([]int32, 0, n),
		names:    make([]string, size),
		pos:      make([]int32, size),
	}
	for _, c := range checkpoints {
		if err := t.Validate(c.VChannel, c.Checkpoint); err != nil {
			return nil, err
		}
		if _, ok := t.lookup(c.VChannel); ok {
			return nil, fmt.Errorf("%w: %s", messages.ErrVChannelExists, shorten.QuotedText(c.VChannel))
		}
		t.push(c.VChannel, c.Checkpoint)
	}
	if !t.guarded {
		t.heapify()
		return t, nil
	}
	if err := t.heapifyGuarded(); err != nil {
		return nil, err
	}
	return t, nil
}

// ShareNames returns the slots' names, without a copy: the name of every
// tracked vchannel, in an order of the tracker's, and "" for each free
// slot. The caller must not change them, and the tracker copies them
// before it changes them itself.
func (t *Tracker) ShareNames() []string {
	t.namesShared = true
	return t.names[:len(t.names):len(t.names)]
}

// Len returns the number of tracked vchannels.
func (t *Tracker) Len() int { return len(t.heap) }

// Minimum returns the smallest checkpoint, or nil when no vchannel is tracked.
func (t *Tracker) Minimum() wal.MessageID {
	if len(t.heap) == 0 {
		return nil
	}
	return t.heap[0]
}

// Holder returns the vchannel whose checkpoint is the minimum: the one
// that holds the pchannel back, "" when no vchannel is tracked. It is the
// heap's root, so it costs O(1) and no allocation. With ties at the
// minimum it is one of them, and each of them holds the minimum back
// alike (it rises only once all have moved): which one follows from the
// order of operations alone, so a replay names the same, and after the
// named one moves on another of the tie is named.
func (t *Tracker) Holder() string {
	if len(t.heap) == 0 {
		return ""
	}
	return t.names[t.heapSlot[0]]
}

// Get returns the checkpoint of one vchannel.
func (t *Tracker) Get(vchannel string) (wal.MessageID, bool) {
	s, ok := t.lookup(vchannel)
	if !ok {
		return nil, false
	}
	return t.heap[t.pos[s]], true
}

// Checkpoints returns a copy of every vchannel's checkpoint.
func (t *Tracker) Checkpoints() map[string]wal.MessageID {
	m := make(map[string]wal.MessageID, len(t.heap))
	for s, name := range t.names {
		if name != "" {
			m[name] = t.heap[t.pos[s]]
		}
	}
	return m
}

// Below returns the vchannels whose checkpoint is below x, in no order:
// the heap's nodes below it, each subtree left at its first node that is
// not (or cannot be ordered against x), so it costs O(k) for k of them.
func (t *Tracker) Below(x wal.MessageID) []string {
	var names []string
	var visit func(i int)
	visit = func(i int) {
		if i >= len(t.heap) {
			return
		}
		if c, err := wal.Compare(t.heap[i], x); err != nil || c >= 0 {
			return
		}
		names = append(names, t.names[t.heapSlot[i]])
		visit(2*i + 1)
		visit(2*i + 2)
	}
	visit(0)
	return names
}

// Validate returns the error Add or Update would reject this checkpoint
// with before looking at the vchannel's state: empty name, nil or foreign
// ID, or, for a WAL registered outside package wal, an ID that does not
// read back as marshalled (wal.Marshal): held, it would become the minimum
// one day, and a save the catalog refuses, or, stored, a misread
// checkpoint.
func (t *Tracker) Validate(vchannel string, checkpoint wal.MessageID) error {
	if vchannel == "" {
		return messages.ErrEmptyVChannel
	}
	if checkpoint == nil {
		return fmt.Errorf("%w: vchannel %s", messages.ErrNilCheckpoint, shorten.QuotedText(vchannel))
	}
	if err := t.wal.Check(checkpoint); err != nil {
		return fmt.Errorf("vchannel %s: %w", shorten.QuotedText(vchannel), err)
	}
	if t.guarded {
		if _, err := t.wal.Marshal(checkpoint); err != nil {
			return fmt.Errorf("vchannel %s: %w", shorten.QuotedText(vchannel), err)
		}
	}
	return nil
}

// Add starts tracking a vchannel. It may lower the minimum, never raise it,
// except from none to some: it reports advanced when the tracker was empty.
func (t *Tracker) Add(vchannel string, checkpoint wal.MessageID) (advanced bool, err error) {
	if err := t.Validate(vchannel, checkpoint); err != nil {
		return false, err
	}
	if t.broken != nil {
		return false, t.broken
	}
	if _, ok := t.lookup(vchannel); ok {
		return false, fmt.Errorf("%w: %s", messages.ErrVChannelExists, shorten.QuotedText(vchannel))
	}
	if size := tableSize(len(t.heap) + 1); size > len(t.names) {
		t.rehash(size)
	}
	if t.guarded {
		return t.guard(vchannel, checkpoint, func() bool {
			t.up(t.push(vchannel, checkpoint))
			return len(t.heap) == 1
		}, func() {
			s, _ := t.lookup(vchannel)
			t.removeSlot(s)
		})
	}
	t.up(t.push(vchannel, checkpoint))
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
	s, ok := t.lookup(vchannel)
	if !ok {
		return false, fmt.Errorf("%w: %s", messages.ErrVChannelNotFound, shorten.QuotedText(vchannel))
	}
	if t.broken != nil {
		return false, t.broken
	}
	pos := int(t.pos[s])
	old := t.heap[pos]
	if t.guarded {
		return t.updateGuarded(vchannel, s, checkpoint)
	}
	if checkpoint.LT(old) {
		return false, rollback(vchannel, old, checkpoint)
	}
	if checkpoint.EQ(old) {
		return false, nil
	}
	return t.raise(pos, checkpoint), nil
}

// raise sets the checkpoint at heap position pos to a higher one, and
// reports whether the minimum rose.
func (t *Tracker) raise(pos int, checkpoint wal.MessageID) bool {
	before := t.heap[0]
	t.heap[pos] = checkpoint
	t.down(pos)
	return before.LT(t.heap[0])
}

// updateGuarded is Update for a guarded tracker, past the look-up.
func (t *Tracker) updateGuarded(vchannel string, s int32, checkpoint wal.MessageID) (bool, error) {
	old := t.heap[t.pos[s]]
	c, err := wal.Compare(checkpoint, old)
	switch {
	case err != nil:
		return false, fmt.Errorf("vchannel %s: %w", shorten.QuotedText(vchannel), err)
	case c < 0:
		return false, rollback(vchannel, old, checkpoint)
	case c == 0:
		return false, nil
	}
	return t.guard(vchannel, checkpoint,
		func() bool { return t.raise(int(t.pos[s]), checkpoint) },
		func() { t.heap[t.pos[s]] = old })
}

func rollback(vchannel string, from, to wal.MessageID) error {
	return fmt.Errorf("%w: vchannel %s from %s to %s", messages.ErrCheckpointRollback, shorten.QuotedText(vchannel), wal.String(from), wal.String(to))
}

// Drop stops tracking a vchannel. It reports whether the minimum strictly
// rose; dropping the last vchannel leaves no minimum, which is not a rise.
func (t *Tracker) Drop(vchannel string) (advanced bool, err error) {
	if vchannel == "" {
		return false, messages.ErrEmptyVChannel
	}
	s, ok := t.lookup(vchannel)
	if !ok {
		return false, fmt.Errorf("%w: %s", messages.ErrVChannelNotFound, shorten.QuotedText(vchannel))
	}
	if t.broken != nil {
		return false, t.broken
	}
	if t.guarded {
		checkpoint, moved := t.heap[t.pos[s]], t.heap[len(t.heap)-1]
		rose, err := t.guard(vchannel, moved, func() bool { return t.drop(s) },
			func() { t.push(vchannel, checkpoint) })
		if err == nil {
			t.shrink()
		}
		return rose, err
	}
	rose := t.drop(s)
	t.shrink()
	return rose, nil
}

// drop takes slot s out and restores the order, and reports whether the
// minimum rose.
func (t *Tracker) drop(s int32) bool {
	before := t.heap[0]
	// Up only if down left the item in place, as container/heap.Fix does:
	// then only the item that filled the hole ever moves, which restore
	// relies on, and a drop costs one comparison less.
	if i := t.removeSlot(s); i < len(t.heap) && !t.down(i) {
		t.up(i)
	}
	return len(t.heap) > 0 && before.LT(t.heap[0])
}

// removeSlot takes slot s out of the heap and the slots, with no
// comparison: the last heap item fills its hole in the heap. It returns
// the heap position whose order the caller must restore, which is past
// the heap when there is none.
func (t *Tracker) removeSlot(s int32) int {
	i, last := int(t.pos[s]), len(t.heap)-1
	if i != last {
		t.heap[i], t.heapSlot[i] = t.heap[last], t.heapSlot[last]
		t.pos[t.heapSlot[i]] = int32(i)
	}
	t.heap[last] = nil
	t.heap, t.heapSlot = t.heap[:last], t.heapSlot[:last]
	t.free(s)
	return i
}

// Broken returns, once a change could not be undone, why: a comparison
// of the WAL's IDs panicked, and so did rebuilding the order of the
// vchannels after it. The minimum is then meaningless, and every later
// change is refused with this error. It is nil for the built-in WALs.
func (t *Tracker) Broken() error { return t.broken }

// guard runs change, a change of a guarded tracker that moves the item x,
// and reports what it does. The WAL is a third party's, whose LT may
// panic: the panic is recovered, and the change refused with
// wal.ErrCorruptID and undone (restore). One recover per change, not per
// comparison, keeps the built-in WALs' sifts free of it.
func (t *Tracker) guard(vchannel string, x wal.MessageID, change func() bool, undo func()) (rose bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			fault := fmt.Errorf("%w: ordering %s among the tracked checkpoints panicked: %s", wal.ErrCorruptID, wal.String(x), shorten.Value(r))
			rose, err = false, t.restore(vchannel, x, fault, undo)
		}
	}()
	return change(), nil
}

// restore undoes a change that a panic broke off, so that it changes
// nothing: x goes back into the heap where the sift under way had taken
// it out (fillHole), undo puts the vchannels back as they were, and the
// order is rebuilt. Should rebuilding panic too, the order is lost: the
// tracker is broken.
func (t *Tracker) restore(vchannel string, x wal.MessageID, fault error, undo func()) error {
	t.fillHole(x)
	undo()
	if err := t.heapifyGuarded(); err != nil {
		t.broken = fmt.Errorf("tracker: the order of the vchannels is lost: %w", err)
		return t.broken
	}
	return fmt.Errorf("vchannel %s: %w", shorten.QuotedText(vchannel), fault)
}

// fillHole puts x back into the heap after a sift (up or down) stopped by
// a panic. A sift holds its item aside and moves others into its path,
// each with its pos; stopped half-way, it leaves one place whose slot
// does not point back to it (a stale copy, the hole), and the item's own
// slot pointing to where it was. With no hole, nothing had moved.
func (t *Tracker) fillHole(x wal.MessageID) {
	hole := -1
	for i, s := range t.heapSlot {
		if int(t.pos[s]) != i {
			hole = i
			break
		}
	}
	if hole < 0 {
		return
	}
	for s, i := range t.pos {
		if t.names[s] != "" && t.heapSlot[i] != int32(s) {
			t.heap[hole], t.heapSlot[hole] = x, int32(s)
			t.pos[s] = int32(hole)
			return
		}
	}
}

// heapifyGuarded is heapify for a guarded tracker; it reports a panic.
func (t *Tracker) heapifyGuarded() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: comparing IDs panicked: %s", wal.ErrCorruptID, shorten.Value(r))
		}
	}()
	t.heapify()
	return nil
}

// heapify orders the whole heap.
func (t *Tracker) heapify() {
	for i := len(t.heap)/2 - 1; i >= 0; i-- {
		t.down(i)
	}
}

// shrinkFloor is the slot capacity a tracker may always keep: below it,
// returning memory is not worth the copies.
const shrinkFloor = 64

// shrink returns memory after a mass drop, so that a tracker does not keep
// its peak size forever. When the vchannels fill less than a quarter of
// the heap's capacity, its two slices move to ones of twice the count;
// when the slots are at least four times as many as twice the count
// needs, they are rebuilt at that size. Either way at least as many Adds
// or Drops as there are vchannels come before the next grow or shrink, so
// each costs O(1) amortised. Update never shrinks, so it never allocates.
func (t *Tracker) shrink() {
	n := len(t.heap)
	if c := cap(t.heap); c > shrinkFloor && n < c/4 {
		c = max(2*n, shrinkFloor)
		t.heap = append(make([]wal.MessageID, 0, c), t.heap...)
		t.heapSlot = append(make([]int32, 0, c), t.heapSlot...)
	}
	if size := tableSize(max(2*n, shrinkFloor)); 4*size <= len(t.names) {
		t.rehash(size)
	}
}

// push appends a vchannel, not tracked, at the end of the heap, in a
// new slot, and returns its heap position. There must be a free slot
// besides the one it takes.
func (t *Tracker) push(vchannel string, checkpoint wal.MessageID) int {
	i := len(t.heap)
	s := t.insert(vchannel)
	t.pos[s] = int32(i)
	t.heap = append(t.heap, checkpoint)
	t.heapSlot = append(t.heapSlot, s)
	return i
}

// up moves the item at i toward the root while it is below its parent.
func (t *Tracker) up(i int) {
	h, hs := t.heap, t.heapSlot
	x, xs := h[i], hs[i]
	for i > 0 {
		parent := (i - 1) / 2
		if !x.LT(h[parent]) {
			break
		}
		h[i], hs[i] = h[parent], hs[parent]
		t.pos[hs[i]] = int32(i)
		i = parent
	}
	h[i], hs[i] = x, xs
	t.pos[xs] = int32(i)
}

// down moves the item at i toward the leaves while a child is below it,
// following the smaller child (the left one on a tie).
func (t *Tracker) down(i int) (moved bool) {
	h, hs := t.heap, t.heapSlot
	n := len(h)
	i0 := i
	x, xs := h[i], hs[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h[r].LT(h[c]) {
			c = r
		}
		if !h[c].LT(x) {
			break
		}
		h[i], hs[i] = h[c], hs[c]
		t.pos[hs[i]] = int32(i)
		i = c
	}
	h[i], hs[i] = x, xs
	t.pos[xs] = int32(i)
	return i != i0
}

// tableSize is the number of slots for n vchannels: the smallest power of
// two that keeps the load at or below 7/8 (as Go's own maps do), with room
// for one more.
func tableSize(n int) int {
	size := 8
	for size*7 < (n+1)*8 {
		size *= 2
	}
	return size
}

func hash(vchannel string) uint64 { return maphash.String(seed, vchannel) }

// lookup returns the slot of a vchannel.
func (t *Tracker) lookup(vchannel string) (int32, bool) {
	mask := uint64(len(t.names) - 1)
	for i := hash(vchannel) & mask; ; i = (i + 1) & mask {
		switch t.names[i] {
		case "":
			return 0, false
		case vchannel:
			return int32(i), true
		}
	}
}

// insert puts vchannel, not tracked, in the first free slot from its
// home, and returns it; its pos is the caller's to set.
func (t *Tracker) insert(vchannel string) int32 {
	t.own()
	mask := uint64(len(t.names) - 1)
	i := hash(vchannel) & mask
	for t.names[i] != "" {
		i = (i + 1) & mask
	}
	t.names[i] = vchannel
	return int32(i)
}

// free empties slot s, shifting back the slots after it that would
// otherwise become unreachable, each with its heap item's slot.
func (t *Tracker) free(s int32) {
	t.own()
	mask := uint64(len(t.names) - 1)
	hole := uint64(s)
	for j := (hole + 1) & mask; t.names[j] != ""; j = (j + 1) & mask {
		home := hash(t.names[j]) & mask
		// The slot at j may fill the hole unless its home lies
		// cyclically in (hole, j]: then it is reachable already.
		if (j-home)&mask < (j-hole)&mask {
			continue
		}
		t.names[hole], t.pos[hole] = t.names[j], t.pos[j]
		t.heapSlot[t.pos[hole]] = int32(hole)
		hole = j
	}
	t.names[hole], t.pos[hole] = "", 0
}

// own copies the names before a change if ShareNames gave them away.
func (t *Tracker) own() {
	if t.namesShared {
		t.names = slices.Clone(t.names)
		t.namesShared = false
	}
}

// rehash moves the slots to a table of the given size.
func (t *Tracker) rehash(size int) {
	names, pos := t.names, t.pos
	t.names, t.pos, t.namesShared = make([]string, size), make([]int32, size), false
	for j, name := range names {
		if name != "" {
			s := t.insert(name)
			t.pos[s] = pos[j]
			t.heapSlot[pos[j]] = s
		}
	}
}
