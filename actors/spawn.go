package actors

import (
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
	// next is the tracker the next incarnation takes: the one newSpawn
	// built, which validated the vchannels, or the one handed on.
	next atomic.Pointer[tracker.Tracker]
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
	s := &spawn{walName: walName, set: newSpawnSet(t.ShareNames(), cps)}
	s.next.Store(t)
	return s, nil
}

// handOn keeps t for the next incarnation: the actor restarts.
func (s *spawn) handOn(t *tracker.Tracker) { s.next.Store(t) }

// tracker returns the tracker an incarnation starts from: the one handed
// on, or the first; else (never, while every restart hands one on) a new
// one holding the vchannels given at spawn.
func (s *spawn) tracker() *tracker.Tracker {
	if t := s.next.Swap(nil); t != nil {
		return t
	}
	cps, err := s.set.checkpoints(s.walName)
	if err == nil {
		var t *tracker.Tracker
		if t, err = tracker.NewFrom(s.walName, cps); err == nil {
			return t
		}
	}
	// newSpawn validated these very checkpoints: unreachable.
	panic(fmt.Sprintf("lowwater: rebuilding the vchannels given at spawn: %v", err))
}

// spawnSet keeps the vchannels given at spawn for the actor's restarts, in
// less memory than a map: their names, which the first tracker shares until
// a vchannel is added or dropped (tracker.ShareNames), and their IDs
// marshalled back to back, each after its length in one byte.
type spawnSet struct {
	names []string
	ids   []byte
}

// newSpawnSet keeps cps; names are cps' names in the same order.
func newSpawnSet(names []string, cps []messages.VChannelCheckpoint) spawnSet {
	n := 0
	for _, c := range cps {
		n += 1 + len(c.Checkpoint.Marshal())
	}
	s := spawnSet{names: names, ids: make([]byte, 0, n)}
	for _, c := range cps {
		id := c.Checkpoint.Marshal()
		s.ids = append(append(s.ids, byte(len(id))), id...)
	}
	return s
}

// checkpoints decodes the set: IDs equal to those given, by value.
func (s spawnSet) checkpoints(walName wal.Name) ([]messages.VChannelCheckpoint, error) {
	cps := make([]messages.VChannelCheckpoint, len(s.names))
	rest := s.ids
	for i, name := range s.names {
		n := int(rest[0])
		id, err := wal.Unmarshal(walName, rest[1:1+n])
		if err != nil {
			return nil, err
		}
		rest = rest[1+n:]
		cps[i] = messages.VChannelCheckpoint{VChannel: name, Checkpoint: id}
	}
	return cps, nil
}
