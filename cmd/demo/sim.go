package main

import (
	"fmt"
	"math"
	"math/rand"
	"slices"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// addBelowMin is the share of adds placed below the minimum, which must
// save nothing until the minimum passes the persisted value again.
const addBelowMin = 0.3

// spawnSpread is how far above the stored floor a vchannel may start, and
// maxStep the largest advance of a vchannel in a round: with the number of
// rounds they bound how far a run can carry a pchannel's checkpoints.
const (
	spawnSpread = 200
	maxStep     = 20
)

// lastOffset is where the simulated partition ends: the largest offset a
// KafkaID holds. A floor stored near it (by hand, or a run long ago) would
// otherwise carry a vchannel past it and round to a negative offset, which
// the actor rightly rejects as a rollback the simulator never meant.
const lastOffset = wal.KafkaID(math.MaxInt64)

// advance returns cp moved n (>= 0) offsets on, stopping at lastOffset as a
// consumer stops at the end of its log.
func advance(cp wal.KafkaID, n int) wal.KafkaID {
	if cp > lastOffset-wal.KafkaID(n) {
		return lastOffset
	}
	return cp + wal.KafkaID(n)
}

// room is how many offsets lie above floor up to lastOffset. It is
// unsigned: above a negative floor there are more than an int64 holds.
func room(floor wal.KafkaID) uint64 {
	return uint64(lastOffset) - uint64(floor)
}

// vchannel is the simulator's view of one vchannel: its checkpoint and how
// fast it moves.
type vchannel struct {
	name string
	cp   wal.KafkaID
	// pace is the chance to advance in a round, step the largest advance.
	pace float64
	step int
}

// simulator drives one pchannel. It is a pure model of what the pchannel
// actor holds: it decides the next commands, applies them to its own view
// and records every minimum that view had, so that the checks need not
// trust the actor's events. It starts no goroutine; run in demo.go calls
// round on a ticker and sends what it returns, in order.
type simulator struct {
	pchannel string
	rng      *rand.Rand
	live     []*vchannel // in creation order, so that a seed replays
	nextID   int
	minVCh   int

	// initialMinimum is the minimum of the vchannels given at spawn.
	initialMinimum wal.MessageID
	// minima holds every minimum the view had after a command: a persisted
	// value outside this set was never the pchannel's minimum (I1).
	minima map[wal.MessageID]struct{}

	// addOdds (and as much for a drop) and badOdds are the per-round odds
	// of the rarer commands: --churn and --bad-rate over --rate.
	addOdds, badOdds float64

	adds, drops, updates int
	// badSent counts the commands sent to be rejected.
	badSent int

	// keep is the vchannel --stall freezes, never dropped; frozen is true
	// while it stands still (set by the demo's loop before each round).
	keep   string
	frozen bool
}

// newSimulator starts cfg.vchannels vchannels a little above base (the
// checkpoint stored by an earlier run, or 0), or at lastOffset when there
// is no room above it.
func newSimulator(pchannel string, cfg config, base wal.KafkaID, seed int64) *simulator {
	n := cfg.vchannels
	s := &simulator{
		pchannel: pchannel,
		rng:      rand.New(rand.NewSource(seed)),
		minVCh:   max(1, n/2),
		minima:   make(map[wal.MessageID]struct{}),
		addOdds:  cfg.churn / cfg.rate,
		badOdds:  cfg.badRate / cfg.rate,
	}
	for range n {
		s.live = append(s.live, s.newVChannel(advance(base, 1+s.rng.Intn(spawnSpread))))
	}
	s.initialMinimum = s.minimum()
	s.minima[s.initialMinimum] = struct{}{}
	return s
}

func (s *simulator) newVChannel(cp wal.KafkaID) *vchannel {
	v := &vchannel{
		name: fmt.Sprintf("%s-v%03d", s.pchannel, s.nextID),
		cp:   cp,
		pace: laggardPace + 0.85*s.rng.Float64(),
		step: 1 + s.rng.Intn(maxStep),
	}
	s.nextID++
	return v
}

// resumed returns the view of the same vchannels for the respawned
// pchannel: its record of minima starts over at the current minimum.
func (s *simulator) resumed() *simulator {
	r := &simulator{
		pchannel: s.pchannel,
		rng:      s.rng,
		nextID:   s.nextID,
		minVCh:   s.minVCh,
		minima:   make(map[wal.MessageID]struct{}),
		addOdds:  s.addOdds,
		badOdds:  s.badOdds,
		keep:     s.keep,
	}
	for _, v := range s.live {
		c := *v
		r.live = append(r.live, &c)
	}
	r.initialMinimum = r.minimum()
	r.observe()
	return r
}

// checkpoints returns the view's vchannels and their checkpoints: what
// WithVChannels is given at spawn, and again at the restart.
func (s *simulator) checkpoints() map[string]wal.MessageID {
	m := make(map[string]wal.MessageID, len(s.live))
	for _, v := range s.live {
		m[v.name] = v.cp
	}
	return m
}

// makeLaggard turns the named vchannel into the one --stall freezes: it
// never goes, starts at the minimum and moves as slowly as the slowest a
// simulator draws, so that it holds the minimum (or nearly) when it
// freezes, and the stall shows --stall-after later rather than once every
// other vchannel happened to pass it. Call it before the spawn.
func (s *simulator) makeLaggard(name string) {
	s.keep = name
	low := s.minimum()
	for _, v := range s.live {
		if v.name == name {
			v.cp, v.pace, v.step = low.(wal.KafkaID), laggardPace, 1
		}
	}
}

// laggardPace is the smallest pace newVChannel draws.
const laggardPace = 0.05

// minimum is the smallest live checkpoint, nil when there is none.
func (s *simulator) minimum() wal.MessageID {
	if len(s.live) == 0 {
		return nil
	}
	m := s.live[0].cp
	for _, v := range s.live[1:] {
		m = min(m, v.cp)
	}
	return m
}

// round returns the commands of one tick, in the order they must be sent,
// and applies them to the view, except the bad ones (counted in badSent),
// which the actor must reject.
func (s *simulator) round() (cmds []messages.Command) {
	var batch []messages.VChannelCheckpoint
	for _, v := range s.live {
		if s.rng.Float64() < v.pace {
			if s.frozen && v.name == s.keep {
				continue
			}
			cp := advance(v.cp, 1+s.rng.Intn(v.step))
			if cp == v.cp {
				continue // at lastOffset: there is nothing past it to read
			}
			v.cp = cp
			batch = append(batch, messages.VChannelCheckpoint{VChannel: v.name, Checkpoint: v.cp})
		}
	}
	if len(batch) > 0 {
		s.updates += len(batch)
		cmds = append(cmds, &messages.UpdateBatch{Updates: batch})
		s.observe()
	}
	if s.rng.Float64() < s.addOdds {
		cmds = append(cmds, s.add())
		s.observe()
	}
	if len(s.live) > s.minVCh && s.rng.Float64() < s.addOdds {
		if cmd := s.drop(); cmd != nil {
			cmds = append(cmds, cmd)
			s.observe()
		}
	}
	if len(s.live) > 0 && s.rng.Float64() < s.badOdds {
		cmds = append(cmds, s.bad())
		s.badSent++
	}
	return cmds
}

// observe records the view's minimum after a command.
func (s *simulator) observe() {
	if m := s.minimum(); m != nil {
		s.minima[m] = struct{}{}
	}
}

func (s *simulator) add() messages.Command {
	lo := s.live[0].cp
	hi := lo
	for _, v := range s.live {
		lo, hi = min(lo, v.cp), max(hi, v.cp)
	}
	var cp wal.KafkaID
	// No add below the minimum while the laggard is frozen: it would hold
	// the minimum, and its rises would hide the stall the freeze shows.
	if s.rng.Float64() < addBelowMin && lo > 20 && !s.frozen {
		cp = lo - 1 - wal.KafkaID(s.rng.Intn(20)) // pulls the minimum down
	} else {
		cp = lo + wal.KafkaID(s.rng.Int63n(int64(hi-lo)+1))
	}
	v := s.newVChannel(cp)
	s.live = append(s.live, v)
	s.adds++
	return &messages.AddVChannel{VChannel: v.name, Checkpoint: cp}
}

// drop drops a vchannel at random, or none when that is the one kept.
func (s *simulator) drop() messages.Command {
	i := s.rng.Intn(len(s.live))
	name := s.live[i].name
	if name == s.keep {
		return nil
	}
	s.live = slices.Delete(s.live, i, i+1)
	s.drops++
	return &messages.DropVChannel{VChannel: name}
}

// bad returns a command the actor must reject; the view does not change.
func (s *simulator) bad() messages.Command {
	v := s.live[s.rng.Intn(len(s.live))]
	switch s.rng.Intn(4) {
	case 0:
		if v.cp == 0 {
			// Below 0 is no offset: refused as a sentinel, not a rollback.
			return &messages.AddVChannel{VChannel: v.name, Checkpoint: v.cp} // exists
		}
		return &messages.UpdateCheckpoint{VChannel: v.name, Checkpoint: v.cp - 1} // rollback
	case 1:
		return &messages.AddVChannel{VChannel: v.name, Checkpoint: v.cp} // exists
	case 2:
		return &messages.DropVChannel{VChannel: s.pchannel + "-ghost"} // not found
	default:
		return &messages.UpdateCheckpoint{VChannel: s.pchannel + "-ghost", Checkpoint: v.cp} // not found
	}
}
