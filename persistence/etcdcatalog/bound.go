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
type bound struct {
	option  int // the option's value: limit never exceeds it
	limit   int // what the next transaction is built to, at most
	taken   int // the largest size the cluster took; 0: none yet
	refused int // the smallest size it refused; 0: none
}

func newBound(option int) bound { return bound{option: option, limit: option} }

// refuse notes a transaction of size the cluster refused, and lowers the
// limit halfway from the largest size it took.
func (b *bound) refuse(size int) {
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
	if size <= b.taken {
		return
	}
	b.taken = size
	if b.refused == 0 {
		return // the limit is the option's
	}
	if b.taken >= b.refused {
		// Sizes are estimates (a request's framing is not counted), and
		// the cluster's limits can change: it took what it refused
		// before. Stay at what it took, not probe above it again.
		b.refused = b.taken + 1
	}
	b.limit = min(b.option, max(b.limit, (b.taken+b.refused)/2))
}
