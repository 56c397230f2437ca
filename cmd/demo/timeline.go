package main

import (
	"sort"
	"time"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// sample is one value of a step function: v from at on. v is the offset
// itself, not a float64: above 2^53 a float64 rounds offsets together, and
// I3 would see a checkpoint a few offsets short as reaching the minimum.
// Only the chart draws it as a float64.
type sample struct {
	at time.Duration
	v  wal.KafkaID
}

// track is one pchannel over the run, from the events: what the chart
// draws and what the liveness check (I3) measures.
type track struct {
	// minimum and persisted are step functions: each sample holds until
	// the next. The demo's IDs are Kafka offsets, so they are numbers.
	minimum, persisted []sample
	// failed are the saves that failed: when, and the value they tried.
	failed []sample
	cur    wal.MessageID // the current minimum, to see an Add lower it
	// stalls are the minimum's stalls: from its last rise (the stall's
	// Since) to its MinimumResumed, to -1 while one lasts.
	stalls []stallSpan
}

// stallSpan is one stall on the chart.
type stallSpan struct {
	from, to time.Duration
	holder   string
}

// timeline is the run phase as a function of time. Only the feed's
// goroutine writes it; read it after the feed closed.
type timeline struct {
	began  time.Time
	names  []string
	tracks map[string]*track
	// outages are the catalog's outages as they happened; healAt is when
	// the updates stopped and the faults ended; stopAt when the graceful
	// stop began. Set by the demo after the feed closed.
	outages        []span
	healAt, stopAt time.Duration
	// stallAfter is --stall-after (0: off): the chart's legend names the
	// stall shading only when stalls are detected.
	stallAfter time.Duration
}

func newTimeline(began time.Time, names []string) *timeline {
	tl := &timeline{began: began, names: names, tracks: make(map[string]*track, len(names))}
	for _, n := range names {
		tl.tracks[n] = &track{}
	}
	return tl
}

func offset(id wal.MessageID) (wal.KafkaID, bool) {
	k, ok := id.(wal.KafkaID)
	return k, ok
}

// start records the minimum a pchannel is spawned with, and the checkpoint
// its catalog holds (nil: none).
func (tl *timeline) start(name string, minimum, stored wal.MessageID) {
	t := tl.tracks[name]
	t.cur = minimum
	at := time.Since(tl.began)
	if v, ok := offset(minimum); ok {
		t.minimum = append(t.minimum, sample{at, v})
	}
	if v, ok := offset(stored); ok {
		t.persisted = append(t.persisted, sample{at, v})
	}
}

// observe is the timeline's sink.
func (tl *timeline) observe(ev messages.Event) {
	t := tl.tracks[ev.EventHeader().PChannel]
	if t == nil {
		return
	}
	at := ev.EventHeader().At.Sub(tl.began)
	setMin := func(id wal.MessageID) {
		t.cur = id
		if v, ok := offset(id); ok {
			t.minimum = append(t.minimum, sample{at, v})
		}
	}
	switch e := ev.(type) {
	case *messages.MinimumAdvanced:
		setMin(e.To)
	case *messages.VChannelAdded:
		if t.cur == nil || wal.Less(e.Checkpoint, t.cur) {
			setMin(e.Checkpoint) // an Add that lowers the minimum publishes no advance
		}
	case *messages.CheckpointPersisted:
		if v, ok := offset(e.Value); ok {
			t.persisted = append(t.persisted, sample{at, v})
		}
	case *messages.PersistFailed:
		if v, ok := offset(e.Value); ok {
			t.failed = append(t.failed, sample{at, v})
		}
	case *messages.MinimumStalled:
		t.stalls = append(t.stalls, stallSpan{from: e.Since.Sub(tl.began), to: -1, holder: e.Holder})
	case *messages.MinimumResumed:
		if n := len(t.stalls); n > 0 && t.stalls[n-1].to < 0 {
			t.stalls[n-1].to = at
		}
	}
}

// valueAt is the step function s at time at, and false before its first
// sample.
func valueAt(s []sample, at time.Duration) (wal.KafkaID, bool) {
	i := sort.Search(len(s), func(i int) bool { return s[i].at > at })
	if i == 0 {
		return 0, false
	}
	return s[i-1].v, true
}

// reach measures I3 on one pchannel: from the moment from, when the
// catalog was healthy again, how long until the persisted checkpoint
// reached the minimum of that moment. ok is false when it never did while
// the timeline lasted.
func (t *track) reach(from time.Duration) (took time.Duration, ok bool) {
	target, known := valueAt(t.minimum, from)
	if !known {
		return 0, true // no minimum, nothing to save
	}
	return t.reachValue(from, target)
}

// reachFinal is reach for the last minimum of the timeline: after the
// updates stopped, the minimum rises only with the commands still queued.
func (t *track) reachFinal(from time.Duration) (took time.Duration, ok bool) {
	if len(t.minimum) == 0 {
		return 0, true
	}
	return t.reachValue(from, t.minimum[len(t.minimum)-1].v)
}

func (t *track) reachValue(from time.Duration, target wal.KafkaID) (time.Duration, bool) {
	if p, ok := valueAt(t.persisted, from); ok && p >= target {
		return 0, true
	}
	for _, s := range t.persisted {
		if s.at >= from && s.v >= target {
			return s.at - from, true
		}
	}
	return 0, false
}
