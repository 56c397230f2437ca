package metrics

import (
	"time"

	"github.com/lowwater/lowwater/wal"
)

// maxRises bounds what a lagClock keeps of one pchannel: a catalog down
// for hours, under a minimum that rises thousands of times a second, must
// not make a collector grow.
const maxRises = 16

// lagClock tells since when the minimum has been above the persisted
// checkpoint: the age of the oldest rise the catalog does not hold yet,
// which is what a crash now would replay. Restarting the clock at every
// save, as it was, read a pchannel whose saves land every second while
// its minimum runs ahead as less than a second behind, however far.
//
// rises maps each value the catalog may come to hold to the time the
// minimum rose past it: rise i covers the values from rises[i-1].to up to,
// not including, rises[i].to, which the minimum passed at rises[i].at and
// has stayed above since. Values only rise along it; the first rise covers
// the persisted checkpoint.
type lagClock struct {
	rises []rise
}

type rise struct {
	to wal.MessageID
	at time.Time
}

// since is when the minimum rose past the persisted checkpoint, or the
// zero time when it is not above it.
func (l *lagClock) since() time.Time {
	if len(l.rises) == 0 {
		return time.Time{}
	}
	return l.rises[0].at
}

// reset forgets every rise: the minimum is not above the persisted
// checkpoint (or nothing is known of it).
func (l *lagClock) reset() { l.rises = l.rises[:0] }

// rose records that the minimum rose to to at at, above the persisted
// checkpoint. Past maxRises, the two rises closest in time become one,
// which takes the earlier time: a value between them then reads as
// waiting since the earlier one, too long by their gap and never too short.
func (l *lagClock) rose(to wal.MessageID, at time.Time) {
	if n := len(l.rises); n > 0 && !less(l.rises[n-1].to, to) {
		return // not a rise past the last one: nothing new to time
	}
	// Events come from two goroutines (a pchannel's, its persister's),
	// and a rise timed from either may be earlier than one before it: the
	// values below to were passed by at, at the latest. Times then rise
	// with values, which the merge below relies on.
	for i := len(l.rises) - 1; i >= 0 && l.rises[i].at.After(at); i-- {
		l.rises[i].at = at
	}
	l.rises = append(l.rises, rise{to: to, at: at})
	if len(l.rises) <= maxRises {
		return
	}
	// Of pairs as close, the newest: the oldest rises are the ones the
	// clock reads next.
	k := 0
	for i := 1; i+1 < len(l.rises); i++ {
		if l.rises[i+1].at.Sub(l.rises[i].at) <= l.rises[k+1].at.Sub(l.rises[k].at) {
			k = i
		}
	}
	l.rises[k+1].at = l.rises[k].at
	l.rises = append(l.rises[:k], l.rises[k+1:]...)
}

// fell records that the minimum fell to to, still above the persisted
// checkpoint (an Add below it): the values from to up are no longer
// passed, and the rise that covers to ends there.
func (l *lagClock) fell(to wal.MessageID) {
	for i, r := range l.rises {
		if !less(r.to, to) {
			l.rises[i].to = to
			clear(l.rises[i+1:])
			l.rises = l.rises[:i+1]
			return
		}
	}
}

// persisted drops the rises the catalog now holds: those up to v.
func (l *lagClock) persisted(v wal.MessageID) {
	k := 0
	for k < len(l.rises) && !less(v, l.rises[k].to) {
		k++
	}
	if k > 0 {
		n := copy(l.rises, l.rises[k:])
		clear(l.rises[n:])
		l.rises = l.rises[:n]
	}
}
