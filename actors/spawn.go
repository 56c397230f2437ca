package actors

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lowwater/lowwater/internal/core/tracker"
	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// spawn is what every incarnation of a pchannel actor starts from: the
// vchannels given at spawn (WithVChannels) for the first, and for one
// restarted after a panic, the tracker of the incarnation before it
// (handOn), so that a restart forgets no vchannel added, dropped or moved
// since. The tracker's changes are whole or nothing, a comparison's panic
// included (see tracker.Broken), so the tracker handed on is consistent.
//
// What an incarnation hands on is kept for its own actor, by PID: protoactor
// runs the Props' producer before it checks a name, so a SpawnNamed that
// fails (the name is taken: a "make sure it runs" loop) makes an actor
// that never starts, and one spawned again from the same Props is another
// actor. Neither must take a restart's tracker: the restarted actor would
// start from the vchannels given at spawn, and could save a minimum above
// a vchannel added since.
type spawn struct {
	walName wal.Name
	set     spawnSet

	mu sync.Mutex
	// first is the tracker newSpawn built, which validated the vchannels,
	// for the first actor to start from the Props; nil once taken.
	first *tracker.Tracker // guarded by mu
	// handed holds what each restarting actor handed on, by PID, until its
	// next incarnation starts.
	handed map[string]*handedOn // guarded by mu
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
	// recovered is set once an incarnation read the stored checkpoint:
	// Stopped.Recovered, whichever incarnation stops.
	recovered bool
	// stop is the stop under way when the actor restarted, if one was:
	// protoactor restarts a stopping actor (its supervisor's decision, or
	// a sibling's failure under AllForOne) and forgets the stop, which the
	// next incarnation then ends.
	stop *stopUnderWay
	// stopWatchers are told the Stopped event of whichever incarnation
	// stops (Poison).
	stopWatchers []*actor.PID
}

// stopUnderWay is what an incarnation that began stopping hands on: how
// the stop was asked for, and what its flush left unsaved (nil: nothing).
type stopUnderWay struct {
	graceful  bool
	unflushed error
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
	if checker, _ := wal.NewChecker(walName); !checker.BuiltIn() {
		// A restart with nothing handed on rebuilds the tracker from the
		// set (take), where a failure has no caller to go to: it is tried
		// here once. wal.Marshal checked that each ID reads back at its
		// position; a codec may still decode a value it cannot encode.
		cps, err := set.checkpoints(walName)
		if err == nil {
			_, err = tracker.NewFrom(walName, cps)
		}
		if err != nil {
			return nil, fmt.Errorf("the vchannels given do not read back as marshalled: %w", err)
		}
	}
	return &spawn{walName: walName, set: set, first: t}, nil
}

// handOn keeps what the next incarnation of the actor at pid starts from:
// it restarts. It returns what it kept, for forget.
func (s *spawn) handOn(pid *actor.PID, h handedOn) *handedOn {
	h.restarted = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handed == nil {
		s.handed = make(map[string]*handedOn, 1)
	}
	s.handed[pidKey(pid)] = &h
	return &h
}

// forget drops h if the next incarnation of the actor at pid has not taken
// it: the actor stopped after all (a stop came while its restart waited
// for its children).
func (s *spawn) forget(pid *actor.PID, h *handedOn) {
	if h == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handed[pidKey(pid)] == h {
		delete(s.handed, pidKey(pid))
	}
}

// pidKey is a PID as a map key: its address and id.
func pidKey(pid *actor.PID) string { return pid.Address + "/" + pid.Id }

// take returns what the incarnation of the actor at pid starts from, as
// it starts: what its incarnation before handed on; else, for an actor
// that starts afresh, the first tracker, or once that is taken, a new one
// holding the vchannels given at spawn.
func (s *spawn) take(pid *actor.PID) handedOn {
	if h, ok := s.takeHanded(pid); ok {
		return h
	}
	s.mu.Lock()
	first := s.first
	s.first = nil
	s.mu.Unlock()
	if first != nil {
		return handedOn{tracker: first}
	}
	cps, err := s.set.checkpoints(s.walName)
	if err == nil {
		var t *tracker.Tracker
		if t, err = tracker.NewFrom(s.walName, cps); err == nil {
			return handedOn{tracker: t}
		}
	}
	// newSpawn rebuilt a tracker from this very set: unreachable, unless a
	// third party's codec reads the same bytes differently from one call
	// to the next. The panic then fails the actor on its Started, which
	// its supervisor sees and Stopped tells (Failure); it reaches no caller.
	panic(fmt.Sprintf("lowwater: rebuilding the vchannels given at spawn: %v", err))
}

// takeHanded returns what the incarnation before the actor's at pid
// handed on, if it did, and forgets it.
func (s *spawn) takeHanded(pid *actor.PID) (handedOn, bool) {
	s.mu.Lock()
	h := s.handed[pidKey(pid)]
	delete(s.handed, pidKey(pid))
	s.mu.Unlock()
	if h == nil {
		return handedOn{}, false
	}
	if h.status != nil {
		h.persisted = h.status.load().persisted
	}
	return *h, true
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
// in that order, among "". An ID that wal.Marshal refuses (a registered
// type's that panics, does not read back or cannot be ordered) is refused,
// wrapping wal.ErrCorruptID.
func newSpawnSet(names []string, vchannels map[string]wal.MessageID) (spawnSet, error) {
	ids := make([][]byte, 0, len(vchannels))
	n := 0
	for _, name := range names {
		if name == "" {
			continue
		}
		id, err := wal.Marshal(vchannels[name])
		if err != nil {
			return spawnSet{}, fmt.Errorf("vchannel %s: %w", shorten.QuotedText(name), err)
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

// checkpoints decodes the set: IDs at the positions of those given.
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
