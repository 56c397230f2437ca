package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// record is everything one node's events said, per pchannel. Only the
// feed's goroutine writes it; read it after the feed closed.
type record struct {
	pchannels map[string]*pchannelRecord
	// advances counts MinimumAdvanced over all pchannels.
	advances int
}

type pchannelRecord struct {
	recovered *messages.Recovered
	stopped   *messages.Stopped
	// advancedTo and added hold every MinimumAdvanced.To and every
	// VChannelAdded checkpoint: the minima the events showed. An Add that
	// lowers the minimum publishes no MinimumAdvanced, and the persister may
	// still save that lower minimum when it is above the floor.
	advancedTo map[wal.MessageID]struct{}
	added      map[wal.MessageID]struct{}
	// persisted lists the CheckpointPersisted values in publishing order.
	persisted []wal.MessageID
	failures  int
	rejected  int
	adds      int
	drops     int
	restarts  int
	// stalls and resumed list the MinimumStalled and MinimumResumed
	// events, in order.
	stalls  []*messages.MinimumStalled
	resumed []*messages.MinimumResumed
}

func newRecord(names []string) *record {
	r := &record{pchannels: make(map[string]*pchannelRecord, len(names))}
	for _, name := range names {
		r.pchannels[name] = &pchannelRecord{
			advancedTo: make(map[wal.MessageID]struct{}),
			added:      make(map[wal.MessageID]struct{}),
		}
	}
	return r
}

// observe is the record's sink.
func (r *record) observe(ev messages.Event) {
	p := r.pchannels[ev.EventHeader().PChannel]
	if p == nil {
		return
	}
	switch e := ev.(type) {
	case *messages.Recovered:
		p.recovered = e
	case *messages.MinimumAdvanced:
		r.advances++
		p.advancedTo[e.To] = struct{}{}
	case *messages.VChannelAdded:
		p.adds++
		p.added[e.Checkpoint] = struct{}{}
	case *messages.VChannelDropped:
		p.drops++
	case *messages.CheckpointPersisted:
		p.persisted = append(p.persisted, e.Value)
	case *messages.PersistFailed:
		if !e.Late { // its attempt was counted when it overran
			p.failures++
		}
	case *messages.CommandRejected:
		p.rejected++
	case *messages.PersisterRestarted:
		p.restarts++
	case *messages.MinimumStalled:
		p.stalls = append(p.stalls, e)
	case *messages.MinimumResumed:
		p.resumed = append(p.resumed, e)
	case *messages.Stopped:
		p.stopped = e
	}
}

// lastPersisted is the last value saved in this phase, or floor.
func (p *pchannelRecord) lastPersisted(floor wal.MessageID) wal.MessageID {
	if n := len(p.persisted); n > 0 {
		return p.persisted[n-1]
	}
	return floor
}

// phase is one node's run as the checks see it: what the simulators knew
// and what the events said.
type phase struct {
	name string
	sims map[string]*simulator
	rec  *record
}

// restartView is what the restart found and what it should have found.
type restartView struct {
	// want is the last checkpoint persisted before the restart (or stored
	// before the demo), nil when none.
	want wal.MessageID
	// storedNow is the value read from the reopened catalog (a file, or etcd)
	// before respawning: the STORED column.
	storedNow wal.MessageID
	// start is the respawned pchannel's start message ID; spawnMin the
	// minimum of the vchannels it was given, its start when want is nil.
	start       wal.MessageID
	fromCatalog bool
	spawnMin    wal.MessageID
	recovered   bool
	// stopped is the Stopped event of the stop before the restart.
	stopped *messages.Stopped
}

// evidence is what the whole run observed.
type evidence struct {
	names []string
	// floor is what the file held before the demo started (an earlier run
	// with --data), nil per pchannel when nothing.
	floor   map[string]wal.MessageID
	phases  []phase
	restart map[string]restartView
	// final is what the file held after the last stop.
	final map[string]wal.MessageID
	// blocked counts events that found the feed's buffer full.
	blocked int64
	// live holds the I3 measurements of the run phase.
	live []liveness
	// stall is --stall, nil without it; interrupted is true when Ctrl-C
	// ended the run early.
	stall       *stallSpec
	interrupted bool
	// stallFrom and stallUntil are when the freeze began and ended (or
	// the updates stopped, if first); stallAfter is --stall-after.
	stallFrom, stallUntil time.Time
	stallAfter            time.Duration
}

// liveness is one I3 measurement: from a moment the catalog was healthy
// again, how long one pchannel's persisted checkpoint took to reach the
// minimum of that moment (for the end of the faults: the last minimum).
type liveness struct {
	when     string
	pchannel string
	took     time.Duration
	reached  bool
	bound    time.Duration
	// why, when set, says why the measurement is shown but not held to
	// the bound: the catalog was not healthy after all.
	why string
}

// check is one verdict; problems lists the violations, if any.
type check struct {
	name     string
	summary  string
	problems []string
	// skipped: the run gave the check nothing to judge (it holds, and
	// says so rather than "ok").
	skipped bool
}

func (c *check) failf(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c check) ok() bool { return len(c.problems) == 0 }

// verify runs every check on the evidence.
func verify(ev *evidence) []check {
	checks := []check{checkSafe(ev), checkMonotonic(ev), checkLive(ev), checkRestart(ev), checkRejections(ev), checkStopped(ev)}
	if ev.stall != nil {
		checks = append(checks, checkStall(ev))
	}
	return checks
}

// checkStall: with --stall, the run published a MinimumStalled naming the
// frozen vchannel, on its pchannel, that the freeze explains: published
// during the freeze, not resumed before it ended, and in force for at
// least half of the freeze past --stall-after. The slow laggard stalls by
// chance now and then, and such a stall resumes as soon as it moves: a
// freeze that did not happen would show only those (or, rarely, one long
// enough to pass). Not held when Ctrl-C ended the run.
func checkStall(ev *evidence) check {
	c := check{name: "stall"}
	s := ev.stall
	run := ev.phases[0].rec
	all := 0
	var named *messages.MinimumStalled
	for _, name := range ev.names {
		p := run.pchannels[name]
		for _, st := range p.stalls {
			all++
			if named == nil && name == s.pchannel && st.Holder == s.vchannel && frozenStall(ev, p.resumed, st) {
				named = st
			}
		}
	}
	switch {
	case named != nil:
		c.summary = fmt.Sprintf("%s froze at %v: MinimumStalled named it, holding %s at %s for %v; %d stall(s) in all",
			s.vchannel, s.start, s.pchannel, named.Checkpoint, named.For.Round(time.Millisecond), all)
	case ev.interrupted:
		c.summary = fmt.Sprintf("not held: the run was interrupted; no MinimumStalled named %s", s.vchannel)
	default:
		c.failf("%s froze at %v, and no MinimumStalled named it (%d stall(s) in all)", s.vchannel, s.start, all)
		c.summary = "no stall of the frozen vchannel"
	}
	return c
}

// checkSafe is I1: every persisted value was a minimum the pchannel had at
// some moment. Checked twice: against the simulator's own view (no vchannel
// live when that minimum was computed was behind it), and against the
// events (it was published as a MinimumAdvanced.To, was the initial
// minimum, or was the checkpoint of an Add that lowered the minimum).
func checkSafe(ev *evidence) check {
	c := check{name: "I1 safe"}
	saves := 0
	for _, ph := range ev.phases {
		for _, name := range ev.names {
			sim, p := ph.sims[name], ph.rec.pchannels[name]
			for _, v := range p.persisted {
				saves++
				if _, ok := sim.minima[v]; !ok {
					c.failf("%s %s: persisted %s was never the minimum of the simulator's view", ph.name, name, v)
				}
				_, advanced := p.advancedTo[v]
				_, added := p.added[v]
				if !advanced && !added && !sameID(v, sim.initialMinimum) {
					c.failf("%s %s: persisted %s was never published as a minimum", ph.name, name, v)
				}
			}
		}
	}
	each := "each a minimum"
	if saves == 1 {
		each = "a minimum"
	}
	c.summary = fmt.Sprintf("%s, %s of the simulator's view and of the events", count(saves, "save"), each)
	return c
}

// checkMonotonic is I2: per pchannel, the stored floor and then every
// persisted value of every phase strictly increase, across the restart.
func checkMonotonic(ev *evidence) check {
	c := check{name: "I2 monotonic"}
	values := 0
	for _, name := range ev.names {
		prev, prevAt := ev.floor[name], "stored before the demo"
		for _, ph := range ev.phases {
			for i, v := range ph.rec.pchannels[name].persisted {
				values++
				if prev != nil && !prev.LT(v) {
					c.failf("%s: %s save #%d persisted %s, not above %s (%s)", name, ph.name, i+1, v, prev, prevAt)
				}
				prev, prevAt = v, fmt.Sprintf("%s save #%d", ph.name, i+1)
			}
		}
		last := ev.phases[len(ev.phases)-1].rec.pchannels[name]
		if !storedAgrees(prev, ev.final[name], last.stopped) {
			c.failf("%s: the catalog holds %s at the end, the last persisted was %s", name, wal.String(ev.final[name]), wal.String(prev))
		}
	}
	c.summary = fmt.Sprintf("%s, strictly increasing per pchannel, from the stored floor through the restart; the catalog ends at the last of them", count(values, "value"))
	return c
}

// checkLive is I3: once the catalog is healthy again, persisted reaches
// the minimum within one backoff cap plus one save. Measurements taken
// while the catalog was not healthy after all (random failures go on after
// an outage) are summarised but not held to the bound.
func checkLive(ev *evidence) check {
	c := check{name: "I3 live"}
	type agg struct {
		n, reached int
		worst      time.Duration
		bound      time.Duration
		why        string
	}
	var order []string
	byWhen := map[string]*agg{}
	for _, l := range ev.live {
		a := byWhen[l.when]
		if a == nil {
			a = &agg{bound: l.bound}
			byWhen[l.when] = a
			order = append(order, l.when)
		}
		a.n++
		if l.reached {
			a.reached++
			a.worst = max(a.worst, l.took)
		}
		if l.why != "" {
			a.why = l.why
			continue
		}
		switch {
		case !l.reached:
			c.failf("%s: %s never reached the minimum", l.when, l.pchannel)
		case l.took > l.bound:
			c.failf("%s: %s reached the minimum after %v, bound %v", l.when, l.pchannel, l.took.Round(time.Millisecond), l.bound)
		}
	}
	if len(order) == 0 {
		c.summary = "nothing to measure"
		return c
	}
	var parts []string
	for _, when := range order {
		a := byWhen[when]
		within := "within " + a.worst.Round(time.Millisecond).String()
		if a.worst < time.Millisecond {
			within = "at once"
		}
		part := fmt.Sprintf("%s: %d/%d caught up %s", when, a.reached, a.n, within)
		if a.why != "" {
			part += fmt.Sprintf(" (not held to the bound: %s)", a.why)
		}
		parts = append(parts, part)
	}
	c.summary = fmt.Sprintf("bound %v; %s", byWhen[order[0]].bound, strings.Join(parts, "; "))
	return c
}

// frozenStall reports whether the freeze explains the stall st (see
// checkStall).
func frozenStall(ev *evidence, resumed []*messages.MinimumResumed, st *messages.MinimumStalled) bool {
	from, until := ev.stallFrom, ev.stallUntil
	if st.At.Before(from) || !st.At.Before(until) {
		return false
	}
	for _, r := range resumed {
		if r.Holder == st.Holder && r.At.After(st.At) {
			if r.At.Before(until) {
				return false
			}
			break
		}
	}
	return until.Sub(st.At) >= (until.Sub(from)-ev.stallAfter)/2
}

// checkRestart: after the graceful stop and the reopen, each pchannel
// starts from the last persisted checkpoint, which the file
// holds.
func checkRestart(ev *evidence) check {
	c := check{name: "restart"}
	for _, name := range ev.names {
		r := ev.restart[name]
		want := r.storedNow
		if want == nil {
			want = r.spawnMin // nothing stored: the vchannels' minimum
		}
		switch {
		case !r.recovered:
			c.failf("%s: not recovered", name)
		case !storedAgrees(r.want, r.storedNow, r.stopped):
			c.failf("%s: the reopened catalog holds %s, the last persisted was %s", name, wal.String(r.storedNow), wal.String(r.want))
		case !sameID(r.start, want):
			c.failf("%s: recovered start %s, want %s", name, wal.String(r.start), wal.String(want))
		case r.fromCatalog != (r.storedNow != nil):
			c.failf("%s: recovered start from catalog=%t, want %t", name, r.fromCatalog, r.storedNow != nil)
		}
	}
	ids := "start IDs equal"
	if len(ev.names) == 1 {
		ids = "start ID equals"
	}
	c.summary = fmt.Sprintf("%d/%d recovered %s the last persisted, as read back from the catalog", len(ev.names)-len(c.problems), len(ev.names), ids)
	return c
}

// checkRejections: the actors rejected exactly the bad commands sent.
func checkRejections(ev *evidence) check {
	c := check{name: "rejections"}
	sent, got := 0, 0
	for _, ph := range ev.phases {
		for _, name := range ev.names {
			s, r := ph.sims[name].badSent, ph.rec.pchannels[name].rejected
			sent, got = sent+s, got+r
			if s != r {
				c.failf("%s %s: %s sent, %d rejected", ph.name, name, count(s, "bad command"), r)
			}
		}
	}
	c.summary = fmt.Sprintf("%s sent, %d rejected", count(sent, "bad command"), got)
	if sent == 0 && got == 0 {
		c.skipped = true
		c.summary = "no bad command was sent in this run: they are sent at random, at --bad-rate"
	}
	return c
}

// checkStopped: every pchannel published Stopped after its graceful stop.
func checkStopped(ev *evidence) check {
	c := check{name: "stopped"}
	flushed := 0
	for _, ph := range ev.phases {
		for _, name := range ev.names {
			s := ph.rec.pchannels[name].stopped
			switch {
			case s == nil:
				c.failf("%s %s: no Stopped event", ph.name, name)
			case !s.Graceful:
				c.failf("%s %s: stop was not graceful", ph.name, name)
			case s.Flushed:
				flushed++
			}
		}
	}
	c.summary = fmt.Sprintf("%s, %d with nothing left unsaved", count(len(ev.phases)*len(ev.names), "graceful stop"), flushed)
	return c
}

// storedAgrees reports whether a catalog holding storedNow agrees with events whose
// last CheckpointPersisted was last: it holds last, or the graceful stop
// timed out with a save in flight (Stopped.Flushed false) that committed
// unseen, so it holds a value above last and at most the minimum the stop
// could not confirm (Stopped.Dropped).
func storedAgrees(last, storedNow wal.MessageID, stopped *messages.Stopped) bool {
	if sameID(last, storedNow) {
		return true
	}
	return stopped != nil && !stopped.Flushed && stopped.Dropped != nil &&
		storedNow != nil && wal.Less(last, storedNow) && storedNow.LTE(stopped.Dropped)
}

func sameID(a, b wal.MessageID) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.EQ(b)
}
