package actors

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/lowwater/lowwater/internal/core/tracker"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// spawn is what every incarnation of a pchannel actor starts from: the
// vchannels given at spawn (WithVChannels) for the first, and for one
// restarted after a panic, the tracker of the incarnation before it
// (handOn), so that a restart forgets no vchannel added, dropped or moved
// since. The tracker's changes are whole or nothing, a comparison's panic
// included (see tracker.Broken), so the tracker handed on is consistent.
type spawn struct {
	walName wal.Name
	set     spawnSet
	// next is what the next incarnation takes: the tracker newSpawn built,
	// which validated the vchannels, or what the one before handed on.
	next atomic.Pointer[handedOn]
}

// handedOn is what an incarnation hands the next: its tracker, and the
// last checkpoint the catalog acknowledged, which the next reports until
// it has read the stored one again. That is status's, read when the next
// incarnation is made (every child has stopped by then, so it is final),
// else persisted. restarted tells a handed-on start from the first.
type handedOn struct {
	tracker   *tracker.Tracker
	status    *saveStatus
	persisted wal.MessageID
	restarted bool
}

// newSpawn validates the vchannels given at spawn by building the first
// tracker from them, and keeps them in a spawnSet rather than a copy of
// the map, for a tracker lost with no incarnation to hand it on.
func newSpawn(walName wal.Name, vchannels map[string]wal.MessageID) (*spawn, error) {
	cps := make([]messages.VChannelCheckpoint, 0, len(vchannels))
	for name, cp := range vchannels {
		if err := validVChannel(name); err != nil {
			return nil, err
		}
		cps = append(cps, messages.VChannelCheckpoint{VChannel: name, Checkpoint: cp})
	}
	t, err := tracker.NewFrom(walName, cps)
	if err != nil {
		return nil, err
	}
	set, err := newSpawnSet(t.ShareNames(), vchannels)
	if err != nil {
		return nil, err
	}
	s := &spawn{walName: walName, set: set}
	s.next.Store(&handedOn{tracker: t})
	return s, nil
}

// handOn keeps what the next incarnation starts from: the actor restarts.
// It returns what it kept, for forget.
func (s *spawn) handOn(h handedOn) *handedOn {
	h.restarted = true
	s.next.Store(&h)
	return &h
}

// forget drops h if the next incarnation has not taken it: the actor
// stopped after all (a stop came while its restart waited for its
// children), and a later actor spawned from the same Props must start
// from the vchannels given at spawn, not from this one's.
func (s *spawn) forget(h *handedOn) {
	if h != nil {
		s.next.CompareAndSwap(h, nil)
	}
}

// take returns what an incarnation starts from: what was handed on, or the
// first tracker; else (never, while every restart hands one on) a new
// tracker holding the vchannels given at spawn.
func (s *spawn) take() handedOn {
	if h := s.next.Swap(nil); h != nil {
		if h.status != nil {
			h.persisted = h.status.load().persisted
		}
		return *h
	}
	cps, err := s.set.checkpoints(s.walName)
	if err == nil {
		var t *tracker.Tracker
		if t, err = tracker.NewFrom(s.walName, cps); err == nil {
			return handedOn{tracker: t}
		}
	}
	// newSpawn validated these very checkpoints: unreachable.
	panic(fmt.Sprintf("lowwater: rebuilding the vchannels given at spawn: %v", err))
}

// spawnSet keeps the vchannels given at spawn for the actor's restarts, in
// less memory than a map: their names, which the first tracker shares until
// a vchannel is added or dropped (tracker.ShareNames, where "" is a free
// slot), and the IDs of the names in that order, marshalled back to back,
// each after its length as a uvarint.
type spawnSet struct {
	names []string
	ids   []byte
}

// newSpawnSet keeps the checkpoints of vchannels, whose names are names,
// in that order, among "". An ID whose Marshal panics (a registered
// type's) is refused, wrapping wal.ErrCorruptID.
func newSpawnSet(names []string, vchannels map[string]wal.MessageID) (spawnSet, error) {
	ids := make([][]byte, 0, len(vchannels))
	n := 0
	for _, name := range names {
		if name == "" {
			continue
		}
		id, err := wal.Marshal(vchannels[name])
		if err != nil {
			return spawnSet{}, fmt.Errorf("vchannel %q: %w", name, err)
		}
		ids = append(ids, id)
		n += uvarintLen(len(id)) + len(id)
	}
	// Sized exactly: it is kept for the actor's life, per pchannel.
	s := spawnSet{names: names, ids: make([]byte, 0, n)}
	for _, id := range ids {
		s.ids = append(binary.AppendUvarint(s.ids, uint64(len(id))), id...)
	}
	return s, nil
}

// uvarintLen is the length of n as a uvarint.
func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// checkpoints decodes the set: IDs equal to those given, by value.
func (s spawnSet) checkpoints(walName wal.Name) ([]messages.VChannelCheckpoint, error) {
	cps := make([]messages.VChannelCheckpoint, 0, len(s.names))
	rest := s.ids
	for _, name := range s.names {
		if name == "" {
			continue
		}
		n, k := binary.Uvarint(rest)
		id, err := wal.Unmarshal(walName, rest[k:k+int(n)])
		if err != nil {
			return nil, err
		}
		rest = rest[k+int(n):]
		cps = append(cps, messages.VChannelCheckpoint{VChannel: name, Checkpoint: id})
	}
	return cps, nil
}
