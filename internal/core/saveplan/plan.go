// Package saveplan decides when the persister saves, and what.
//
// It is the persister actor's pure core, as raft.go is etcd's: inputs are
// method calls (a new minimum, a save's outcome, a timer), outputs are Steps
// (start a save of this value; arm a timer). It starts no goroutine, does no
// I/O and reads no clock, so every schedule can be tested step by step. The
// one thing it does not decide alone is the jitter of its waits, which
// cenkalti/backoff draws from math/rand: a test that needs exact waits
// gives it a Backoff without jitter.
package saveplan

import (
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/lowwater/lowwater/wal"
)

// Step is what the caller must do next. The zero Step means nothing.
type Step struct {
	// Save, when non-nil, asks for a save of this value to start now.
	Save wal.MessageID
	// Wait, when positive, asks for a timer; call TimerFired when it fires.
	Wait time.Duration
}

// Plan holds O(1) state however long the catalog is down: the last value
// acknowledged, the latest minimum offered, and the one save in flight.
// Intermediate minima are never queued, only replaced.
type Plan struct {
	// persisted is the last value the catalog acknowledged (or the floor
	// read at recovery). Invariant: it never decreases.
	persisted wal.MessageID
	// target is the latest minimum offered; saving it is the goal.
	target wal.MessageID
	// inFlight is the value being saved, nil when none.
	// Invariant: inFlight == nil || persisted < inFlight.
	inFlight wal.MessageID
	// attempt counts attempts since the last success.
	attempt int
	// waiting is true while a retry or throttle timer is armed; no save
	// starts before it fires.
	waiting bool
	// fenced is true once the catalog said another owner holds the
	// pchannel: no save will ever start again.
	fenced bool
	// closed is true once the catalog said it is closed, which is for
	// good: no save will ever start again.
	closed bool
	// flushing is true once a graceful stop asked for the pending value:
	// the min save interval no longer spaces saves (it spares the catalog
	// load over time; there is no later to spare it for). Failures still
	// back off. Invariant: once set, it stays set.
	flushing bool

	backoff backoff.BackOff
	// backedOff is set once the backoff has given an interval since it was
	// last reset: a success resets it only then, so that the common case,
	// a save that succeeds at once, never touches it.
	backedOff   bool
	minInterval time.Duration
}

// New returns a plan whose floor is persisted: nothing at or below it is
// ever saved. b paces retries; minInterval, if positive, spaces successes.
func New(persisted wal.MessageID, b backoff.BackOff, minInterval time.Duration) *Plan {
	b.Reset()
	return &Plan{persisted: persisted, backoff: b, minInterval: minInterval}
}

// Persisted returns the last acknowledged value.
func (p *Plan) Persisted() wal.MessageID { return p.persisted }

// Target returns the latest minimum offered.
func (p *Plan) Target() wal.MessageID { return p.target }

// InFlight returns the value being saved, or nil.
func (p *Plan) InFlight() wal.MessageID { return p.inFlight }

// Attempt returns the number of attempts since the last success.
func (p *Plan) Attempt() int { return p.attempt }

// Fenced reports whether saving has stopped for good: another owner.
func (p *Plan) Fenced() bool { return p.fenced }

// Closed reports whether saving has stopped for good: the catalog closed.
func (p *Plan) Closed() bool { return p.closed }

// Pending reports whether the latest minimum is above what is persisted
// and may still be saved.
func (p *Plan) Pending() bool { return !p.fenced && !p.closed && above(p.target, p.persisted) }

// Settled reports whether nothing is in flight and nothing is pending: the
// moment a graceful stop is waiting for.
func (p *Plan) Settled() bool { return p.inFlight == nil && !p.Pending() }

// Offer records a new minimum. The latest one replaces any earlier one, so
// a retry always saves the newest value, not the one that failed.
func (p *Plan) Offer(minimum wal.MessageID) Step {
	p.target = minimum
	return p.next()
}

// Succeeded records that the save in flight was acknowledged.
func (p *Plan) Succeeded() Step {
	p.raiseFloor(p.inFlight)
	p.inFlight = nil
	p.attempt = 0
	p.resetBackoff()
	if p.minInterval > 0 && !p.flushing {
		p.waiting = true
		return Step{Wait: p.minInterval}
	}
	return p.next()
}

// Failed records that the save in flight failed and may succeed later: it
// asks for a retry after the next backoff interval.
func (p *Plan) Failed() Step {
	p.inFlight = nil
	p.waiting = true
	p.backedOff = true
	wait := p.backoff.NextBackOff()
	if wait == backoff.Stop || wait <= 0 {
		// A BackOff that gives up must not leave the checkpoint unsaved
		// forever; lowwater's never does, this guards a custom one.
		wait = time.Second
	}
	return Step{Wait: wait}
}

// Adopt records that the catalog holds stored, at or above the value in
// flight: another writer got ahead. Retrying the same value cannot succeed,
// so the floor rises to stored and only a higher minimum is saved. adopted
// reports whether the floor rose: the caller tells its watchers that
// stored is persisted.
//
// A stored value that does not reach the one in flight (lower, or another
// WAL's) proves nothing: a racing store's report may be stale, or the
// catalog is wrong. It is not adopted, and the value in flight is tried
// again: at once after its first attempt, on the backoff after a later
// one (the Step's Wait), so that a catalog that keeps saying so is not
// asked again and again without a pause.
func (p *Plan) Adopt(stored wal.MessageID) (step Step, adopted bool) {
	if p.inFlight != nil && !reaches(stored, p.inFlight) {
		if p.attempt > 1 {
			return p.Failed(), false
		}
		p.inFlight = nil
		return p.next(), false
	}
	adopted = p.raiseFloor(stored)
	p.inFlight = nil
	p.attempt = 0
	p.resetBackoff()
	return p.next(), adopted
}

// reaches reports whether v is at or above target, by above's rules.
func reaches(v, target wal.MessageID) bool {
	if above(v, target) {
		return true
	}
	c, err := wal.Compare(v, target)
	return err == nil && c == 0
}

func (p *Plan) resetBackoff() {
	if p.backedOff {
		p.backoff.Reset()
		p.backedOff = false
	}
}

// Fence records that this writer lost the pchannel: no save starts again.
func (p *Plan) Fence() {
	p.inFlight = nil
	p.fenced = true
}

// CatalogClosed records that the save in flight failed as the catalog is
// closed: no save starts again, and a graceful stop waits for none (a
// retry could never succeed, and the stop would wait out its flush
// timeout for nothing).
func (p *Plan) CatalogClosed() {
	p.inFlight = nil
	p.waiting = false
	p.closed = true
}

// TimerFired records that the timer asked for by a Step fired.
func (p *Plan) TimerFired() Step {
	p.waiting = false
	return p.next()
}

// Flush enters flushing mode, for a graceful stop that has little time
// left: any retry or throttle wait is cut short and the pending value is
// tried now, and from then on a success is followed at once by the next
// save (the min save interval is ignored). A failure still waits for the
// backoff, so that a failing catalog is not hammered while the stop waits.
func (p *Plan) Flush() Step {
	p.flushing = true
	p.waiting = false
	return p.next()
}

func (p *Plan) next() Step {
	if p.inFlight != nil || p.waiting || !p.Pending() {
		return Step{}
	}
	p.inFlight = p.target
	p.attempt++
	return Step{Save: p.inFlight}
}

func (p *Plan) raiseFloor(v wal.MessageID) bool {
	if above(v, p.persisted) {
		p.persisted = v
		return true
	}
	return false
}

// above reports whether v is above floor, nil being below every ID. Two
// IDs of one WAL that cannot be ordered (a registered type whose
// comparison panics; see wal.Compare) count as v above: a plan never
// panics, and the catalog, which orders them too, is the judge. It refuses
// a save it cannot order (persistence.ErrInvalidArgument), which is
// retried on the backoff as any failed save; a value it acknowledged is
// the floor from then on. A value of another WAL (a catalog's StoredAhead
// naming one) is never above.
func above(v, floor wal.MessageID) bool {
	switch {
	case v == nil:
		return false
	case floor == nil:
		return true
	}
	c, err := wal.Compare(floor, v)
	switch {
	case errors.Is(err, wal.ErrWALMismatch):
		return false
	case err != nil:
		return true
	}
	return c < 0
}
