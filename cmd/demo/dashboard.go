package main

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// recentLines is how many notable events the live view lists.
const recentLines = 8

// pchannel states, as the live view shows them.
const (
	stateRecovering = "recovering"
	stateHealthy    = "healthy"
	stateRetrying   = "retrying"
	stateStopped    = "stopped"
)

// dashboard is what the live view shows, kept current by the feed (a
// sink) and read by the view four times a second. Its methods are safe for
// concurrent use.
type dashboard struct {
	mu       sync.Mutex
	began    time.Time
	duration time.Duration
	header   []string // lines about the configuration, fixed
	phase    string
	names    []string
	rows     map[string]*dashRow
	counters func(string) *actors.Counters
	recent   []string
	// outage is the outage in progress, nil when the catalog is up.
	outage      *catalogOutage
	interrupted bool
}

type dashRow struct {
	state              string
	vchannels          int
	minimum, persisted wal.MessageID
	saves, failures    int
	// behindSince is when persisted last fell behind the minimum or last
	// moved toward it; zero when caught up.
	behindSince time.Time
	// lastFailure is the short error of the last failed save.
	lastFailure string
	// holder is the vchannel at the minimum as the events said ("" when
	// unknown: before the first rise, or after the holder was dropped
	// from a tie); stalledSince is the Since of the stall in force, zero
	// when none. atEnd is true while the minimum stands at lastOffset,
	// from the atEnd that said so until an Add lowers it.
	holder       string
	stalledSince time.Time
	atEnd        bool
}

// dashView is a copy of the dashboard for one frame.
type dashView struct {
	elapsed, duration time.Duration
	header            []string
	phase             string
	names             []string
	rows              map[string]dashRow
	updates           map[string]uint64
	recent            []string
	outage            *catalogOutage
	outageLeft        time.Duration
	interrupted       bool
}

func newDashboard(began time.Time, duration time.Duration, header []string, counters func(string) *actors.Counters) *dashboard {
	return &dashboard{began: began, duration: duration, header: header, counters: counters, rows: map[string]*dashRow{}}
}

// start shows the pchannels of a phase as they are spawned: recovering,
// with their vchannels and the minimum they start from.
func (d *dashboard) start(phase string, names []string, vchannels map[string]int, minima map[string]wal.MessageID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.phase, d.names = phase, names
	d.rows = make(map[string]*dashRow, len(names))
	for _, n := range names {
		d.rows[n] = &dashRow{state: stateRecovering, vchannels: vchannels[n], minimum: minima[n]}
	}
}

func (d *dashboard) setPhase(phase string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.phase = phase
}

func (d *dashboard) setInterrupted() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.interrupted = true
}

// note adds a line to the recent events.
func (d *dashboard) note(line string) {
	d.recent = append(d.recent, line)
	if n := len(d.recent); n > recentLines {
		d.recent = slices.Delete(d.recent, 0, n-recentLines)
	}
}

// observe is the dashboard's sink.
func (d *dashboard) observe(ev messages.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := ev.EventHeader()
	if o, ok := ev.(*catalogOutage); ok {
		d.outage = nil
		if o.down {
			d.outage = o
		}
		what, detail := describe(ev)
		d.note(fmt.Sprintf("%7.3fs  %-4s %s", h.At.Sub(d.began).Seconds(), what, detail))
		return
	}
	r := d.rows[h.PChannel]
	if r == nil {
		return
	}
	notable := true
	switch e := ev.(type) {
	case *messages.Recovered:
		r.state = stateHealthy
		if e.FromCatalog {
			r.persisted = e.StartMessageID
		}
	case *messages.RecoveryFailed:
		r.state = stateRecovering
	case *messages.VChannelAdded:
		r.vchannels++
		if r.minimum == nil || wal.Less(e.Checkpoint, r.minimum) {
			r.minimum, r.holder, r.atEnd = e.Checkpoint, e.VChannel, false
		}
	case *messages.VChannelDropped:
		r.vchannels--
		if e.VChannel == r.holder {
			r.holder = "" // a MinimumAdvanced names the next, unless it was one of a tie
		}
	case *messages.MinimumAdvanced:
		r.minimum, r.holder = e.To, e.Holder
		notable = false
	case *messages.MinimumStalled:
		r.holder, r.stalledSince = e.Holder, e.Since
	case *atEnd:
		r.atEnd = true
	case *messages.MinimumResumed:
		r.stalledSince = time.Time{}
	case *messages.CheckpointPersisted:
		r.saves++
		r.state = stateHealthy
		if wal.Less(r.persisted, e.Value) {
			r.persisted = e.Value
		}
		r.behindSince = time.Time{}
		notable = false
	case *messages.PersistFailed:
		if !e.Late { // its attempt was counted when it overran
			r.failures++
		}
		r.state = stateRetrying
		r.lastFailure = shortErr(e.Err)
		// One line per outage is enough: the failures column counts them.
		notable = d.outage == nil
	case *messages.Stopped:
		r.state = stateStopped
		r.stalledSince, r.atEnd = time.Time{}, false
	}
	if wal.Less(r.persisted, r.minimum) {
		if r.behindSince.IsZero() {
			r.behindSince = h.At
		}
	} else {
		r.behindSince = time.Time{}
	}
	if notable {
		what, detail := describe(ev)
		d.note(fmt.Sprintf("%7.3fs  %-4s %-11s %s", h.At.Sub(d.began).Seconds(), h.PChannel, what, detail))
	}
}

func (d *dashboard) view() dashView {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	v := dashView{
		elapsed:     now.Sub(d.began),
		duration:    d.duration,
		header:      d.header,
		phase:       d.phase,
		names:       d.names,
		rows:        make(map[string]dashRow, len(d.rows)),
		updates:     make(map[string]uint64, len(d.rows)),
		recent:      slices.Clone(d.recent),
		outage:      d.outage,
		interrupted: d.interrupted,
	}
	for n, r := range d.rows {
		v.rows[n] = *r
		if d.counters != nil {
			v.updates[n] = d.counters(n).Updates()
		}
	}
	if d.outage != nil {
		v.outageLeft = max(0, d.outage.length-now.Sub(d.outage.At))
	}
	return v
}

// lag is how far the persisted checkpoint is behind the minimum, in Kafka
// offsets; "-" when it is not behind.
func lag(r dashRow) string {
	m, ok1 := r.minimum.(wal.KafkaID)
	p, ok2 := r.persisted.(wal.KafkaID)
	switch {
	case !ok1:
		return "-"
	case !ok2:
		return "all"
	case m <= p:
		return "0"
	default:
		return fmt.Sprint(int64(m - p))
	}
}
