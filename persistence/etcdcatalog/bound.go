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
// refused, or, with no size between the two, at twice the largest taken.
// A probe refused puts the bound back where it was, that one transaction
// going out again as smaller ones, and its size becomes the next probe's
// ceiling; taken, the bound stays there. A raised limit is so learnt
// within a few probes, at the cost of one refused transaction in
// reprobeAfter when the limits did not change.
type bound struct {
	option  int // the option's value: limit never exceeds it
	limit   int // what the next transaction is built to, at most
	taken   int // the largest size the cluster took; 0: none yet
	refused int // the smallest size it refused; 0: none
	// full counts the transactions taken at more than half the limit,
	// while a size was refused, since the last refusal or probe.
	full int
	// probing is set while the limit is a probe's, until a transaction
	// above the largest taken is taken or refused.
	probing bool
}

// reprobeAfter is how many transactions at the bound the cluster takes
// between two probes above it.
const reprobeAfter = 1024

func newBound(option int) bound { return bound{option: option, limit: option} }

// refuse notes a transaction of size the cluster refused, and lowers the
// limit halfway from the largest size it took.
func (b *bound) refuse(size int) {
	b.full = 0
	if b.probing && size > b.taken {
		// The probe refused: back to the largest size taken, the probe's
		// size the next one's ceiling, the one refused before being
		// stale (the limits may have been raised past it, then lowered).
		b.probing = false
		b.refused = size
		b.limit = max(1, b.taken)
		return
	}
	if b.refused == 0 || size < b.refused {
		b.refused = size
	}
	if b.taken >= b.refused {
		b.taken = 0 // it refused what it took before: learn it again from below
	}
	b.limit = max(1, min(b.limit, (b.taken+b.refused)/2))
}

// take notes a transaction of size the cluster took, and raises the limit
// halfway to the smallest size refused.
func (b *bound) take(size int) {
	if size > b.taken {
		b.probing = false
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
	if b.refused != 0 && !b.probing && 2*size > b.limit {
		if b.full++; b.full >= reprobeAfter {
			b.probe()
		}
	}
}

// probe raises the limit above the largest size taken, once (see bound).
func (b *bound) probe() {
	b.full = 0
	next := 2 * b.taken
	if b.refused > b.taken+1 {
		next = (b.taken + b.refused + 1) / 2
	}
	if next = min(b.option, next); next > b.limit {
		b.limit = next
		b.probing = true
	}
}
