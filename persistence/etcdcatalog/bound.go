package etcdcatalog

// bound is one limit on the size of a Batcher's transactions (its saves,
// or its bytes) that the Batcher learns from the cluster, whose own limits
// (--max-txn-ops, --max-request-bytes, the client's and server's message
// sizes) it cannot read. It starts at the option's value and, once the
// cluster refuses a transaction, settles between the largest size the
// cluster took and the smallest it refused, halving the gap each time a
// transaction tells it more: a few refusals, then none. Halving on each
// refusal alone left it at half the cluster's limit or below, for good,
// after a single refusal.
//
// A cluster's limits may be raised later. Once a size was refused, every
// reprobeAfter transactions taken at more than half the limit, the bound
// probes once above the largest size taken: halfway to the smallest size
// refused, or, when that is not above the limit, at twice the largest
// taken. One transaction at a time is built to the probe (offer), the
// others to the limit, so that the transactions in flight cost one
// refusal between them, not one each. A probe refused leaves the limit where it was, that
// one transaction going out again as smaller ones, and its size becomes
// the next probe's ceiling; taken, the limit rises to it, and the next
// probe comes soon (probeAgainAfter), the limit being maybe higher still.
// A probe whose transaction carried no more than the limit (too few saves
// queued, or saves larger than the gap) stands, doubled. A raised limit is
// so learnt within a few probes, at the cost of one refused transaction
// in reprobeAfter when the limits did not change.
type bound struct {
	option  int // the option's value: limit never exceeds it
	limit   int // what transactions are built to, at most
	taken   int // the largest size the cluster took; 0: none yet
	refused int // the smallest size it refused; 0: none
	// full counts the transactions taken at more than half the limit,
	// while a size was refused and no probe stood, since the last
	// refusal or probe.
	full int
	// probe is the size of the probe standing, above limit; 0 when none.
	// probeOut is set while a transaction built to it is in flight.
	probe    int
	probeOut bool
}

// reprobeAfter is how many transactions at the bound the cluster takes
// between two probes above it; probeAgainAfter, after a probe it took.
const (
	reprobeAfter    = 1024
	probeAgainAfter = 8
)

func newBound(option int) bound { return bound{option: option, limit: option} }

// offer returns what the next transaction may carry at most, and whether
// that is the probe's size, which it then hands to no other transaction
// until this one's outcome is told (take or refuse, with probe set, or
// untried).
func (b *bound) offer() (size int, probe bool) {
	if b.probe != 0 && !b.probeOut {
		b.probeOut = true
		return b.probe, true
	}
	return b.limit, false
}

// most is the largest size a transaction may be built to now.
func (b *bound) most() int { return max(b.limit, b.probe) }

// untried notes that the transaction offered the probe (probe set) was
// not sent, or failed for another reason than its size.
func (b *bound) untried(probe bool) {
	if probe {
		b.probeOut = false
	}
}

// refuse notes a transaction of size the cluster refused, built to the
// probe if probe is set, and lowers the limit halfway from the largest
// size it took, unless it was the probe, above the limit.
func (b *bound) refuse(size int, probe bool) {
	b.full = 0
	if probe {
		b.probeOut = false
		if size > b.limit {
			// The probe refused: the limit stands, and the probe's size
			// is the next one's ceiling, the size refused before being
			// stale (the limits may have been raised past it, then
			// lowered).
			b.probe, b.refused = 0, size
			return
		}
	}
	b.probe = 0 // the limits were lowered: no probe above them
	if b.refused == 0 || size < b.refused {
		b.refused = size
	}
	if b.taken >= b.refused {
		b.taken = 0 // it refused what it took before: learn it again from below
	}
	b.limit = max(1, min(b.limit, (b.taken+b.refused)/2))
}

// take notes a transaction of size the cluster took, built to the probe if
// probe is set, and raises the limit halfway to the smallest size refused.
func (b *bound) take(size int, probe bool) {
	if probe {
		b.probeOut = false
		switch {
		case b.probe == 0:
		case size > b.limit:
			b.probe = 0
			b.full = reprobeAfter - probeAgainAfter
		default:
			// Not tried: the transaction carried no more than the
			// limit. Doubled, the probe is tried once saves fill it.
			b.probe = min(b.option, max(b.probe, 2*b.limit))
		}
	}
	if size > b.taken {
		b.taken = size
		if b.refused != 0 {
			if b.taken >= b.refused {
				// Sizes are estimates (a request's framing is not
				// counted), and the cluster's limits can change: it
				// took what it refused before. Stay at what it took;
				// only a probe goes above it.
				b.refused = b.taken + 1
			}
			b.limit = min(b.option, max(b.limit, (b.taken+b.refused)/2))
		}
	}
	if b.probe != 0 && b.probe <= b.limit {
		b.probe = 0
	}
	if b.refused != 0 && b.probe == 0 && 2*size > b.limit {
		if b.full++; b.full >= reprobeAfter {
			b.startProbe()
		}
	}
}

// startProbe sets a probe above the largest size taken (see bound).
func (b *bound) startProbe() {
	b.full = 0
	// Halfway to the smallest size refused while that is above the
	// limit; else the transactions never reach the limit (what they are
	// built of weighs more than the gap left), or nothing lies between:
	// twice the largest taken.
	next := 2 * b.taken
	if mid := (b.taken + b.refused + 1) / 2; b.refused > b.taken+1 && mid > b.limit {
		next = mid
	}
	if next = min(b.option, next); next > b.limit {
		b.probe = next
	}
}
