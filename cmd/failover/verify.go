package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// verify checks every pchannel against etcd's history of its checkpoint key
// and the acknowledgements the nodes printed:
//   - no regression: the stored values strictly increase, their owner
//     terms never decrease, and each node's acknowledgements increase;
//   - nothing acknowledged lost: every acknowledged value was stored, and
//     the final stored value is at or above all of them;
//   - a takeover continues from what the dead node saved: the new owner's
//     term is higher, its recovered start is the last value the dead node
//     stored, hence at or above the last one it acknowledged, and the dead
//     node wrote nothing once the new owner owned the pchannel.
//
// Should etcd have compacted the history away (an external etcd may), the
// acknowledgements are checked against the final stored value alone.
func (p *parent) verify(ctx context.Context, cli *clientv3.Client, names []string, a, b *proc, startRev int64, killAt time.Time) (bool, error) {
	p.printf("verification: the etcd history of each checkpoint key, and every acknowledgement the nodes printed")
	ls := p.lines.all()
	allOK := true
	for _, name := range names {
		var problems []string
		bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

		hctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
		h, err := history(hctx, cli, name, checkpointKey(p.cfg.prefix, name), startRev)
		cancel()
		compacted := errors.Is(err, errCompacted)
		if deleted, ok := errors.AsType[*deletedError](err); ok {
			allOK = false
			p.printf("  %s FAILED: its checkpoint was deleted at revision %d, by something other than the nodes", name, deleted.rev)
			continue
		}
		if err != nil && !compacted {
			return false, fmt.Errorf("history of %s: %w", name, err)
		}

		acks := map[string][]int64{}
		maxAck := int64(-1)
		for _, l := range ls {
			if l.Ev == evPersisted && l.PCh == name && l.Value != nil {
				acks[l.Node] = append(acks[l.Node], *l.Value)
				maxAck = max(maxAck, *l.Value)
			}
		}
		for node, vs := range acks {
			for i := 1; i < len(vs); i++ {
				if vs[i] <= vs[i-1] {
					bad("node %s acknowledged kafka:%d after kafka:%d", node, vs[i], vs[i-1])
				}
			}
		}

		var final *int64
		if compacted {
			v, err := storedNow(ctx, cli, p.cfg.prefix, name, p.cfg.timeout)
			if err != nil {
				return false, err
			}
			final = v
		} else {
			stored := make(map[int64]bool, len(h))
			for i, w := range h {
				stored[kafka(w.rec.Checkpoint)] = true
				if i == 0 {
					continue
				}
				prev := h[i-1].rec
				if !prev.Checkpoint.LT(w.rec.Checkpoint) {
					bad("the stored value went from %s to %s at revision %d", prev.Checkpoint, w.rec.Checkpoint, w.rev)
				}
				if w.rec.Term < prev.Term {
					bad("the stored term went from %d to %d at revision %d", prev.Term, w.rec.Term, w.rev)
				}
			}
			for node, vs := range acks {
				for _, v := range vs {
					if !stored[v] {
						bad("node %s acknowledged kafka:%d, which was never stored", node, v)
					}
				}
			}
			if len(h) > 0 {
				v := kafka(h[len(h)-1].rec.Checkpoint)
				final = &v
			}
		}
		if maxAck >= 0 && (final == nil || *final < maxAck) {
			bad("stored %s, below the acknowledged kafka:%d", valueString(final), maxAck)
		}

		summary := fmt.Sprintf("%d writes, final %s >= every acknowledgement (A %d, B %d)",
			len(h), valueString(final), len(acks["A"]), len(acks["B"]))
		if compacted {
			summary = fmt.Sprintf("history compacted away; final %s >= every acknowledgement (A %d, B %d)",
				valueString(final), len(acks["A"]), len(acks["B"]))
		}
		if contains(a.prefer, name) {
			summary += "; " + p.checkTakeover(ls, name, h, compacted, killAt, bad)
		} else {
			summary += "; owned by B throughout"
		}
		if len(problems) == 0 {
			p.printf("  %s ok: %s", name, summary)
			continue
		}
		allOK = false
		p.printf("  %s FAILED: %s", name, summary)
		for _, pr := range problems {
			p.printf("      %s", pr)
		}
	}
	return allOK, nil
}

// checkTakeover checks the takeover of one of the dead node's pchannels by
// node B and describes it.
func (p *parent) checkTakeover(ls []line, name string, h []write, compacted bool, killAt time.Time, bad func(string, ...any)) string {
	ownedA, okA := find(ls, func(l line) bool { return l.Node == "A" && l.PCh == name && l.Ev == evOwned })
	ownedB, okB := find(ls, func(l line) bool { return l.Node == "B" && l.PCh == name && l.Ev == evOwned })
	recB, okR := find(ls, func(l line) bool { return l.Node == "B" && l.PCh == name && l.Ev == evRecovered })
	switch {
	case !okA:
		bad("node A never owned it")
		return "?"
	case !okB || !okR:
		bad("node B never took it over")
		return "?"
	case !ownedB.time().After(killAt):
		bad("node B owned it before node A died")
	case ownedB.Term <= ownedA.Term:
		bad("node B's term %d is not above node A's %d", ownedB.Term, ownedA.Term)
	}
	lastAckA := lastAcks(ls, "A")[name]
	if lastAckA != nil && (recB.Value == nil || *recB.Value < *lastAckA) {
		bad("node B started at %s, below %s that node A acknowledged", valueString(recB.Value), valueString(lastAckA))
	}
	var parts []string
	if !compacted {
		var lastA *int64
		for _, w := range h {
			if w.rec.Term != ownedA.Term {
				continue
			}
			v := kafka(w.rec.Checkpoint)
			lastA = &v
			if w.rev >= int64(ownedB.Term) {
				bad("node A wrote %s at revision %d, after node B owned the pchannel (revision %d)", w.rec.Checkpoint, w.rev, ownedB.Term)
			}
		}
		if !equal(lastA, recB.Value) {
			bad("node B started at %s, but node A stored %s last", valueString(recB.Value), valueString(lastA))
		}
		parts = append(parts, fmt.Sprintf("node A stored up to %s", valueString(lastA)))
	}
	parts = append(parts, fmt.Sprintf("node B (term %d > %d) started at %s >= node A's last acknowledged %s",
		ownedB.Term, ownedA.Term, valueString(recB.Value), valueString(lastAckA)))
	return strings.Join(parts, ", ")
}

// storedNow reads the stored checkpoint of pchannel.
func storedNow(ctx context.Context, cli *clientv3.Client, prefix, pchannel string, timeout time.Duration) (*int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.Get(ctx, checkpointKey(prefix, pchannel))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	rec, err := persistence.DecodeRecord(pchannel, resp.Kvs[0].Value)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pchannel, err)
	}
	v := kafka(rec.Checkpoint)
	return &v, nil
}

// kafka returns the offset of a Kafka checkpoint (-1 for any other).
func kafka(id wal.MessageID) int64 {
	if k, ok := id.(wal.KafkaID); ok {
		return int64(k)
	}
	return -1
}

func equal(a, b *int64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
