package kafka

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// A member cut off from the brokers, and still reaching etcd, learns that
// it lost its partitions while it is still cut off: its heartbeats fail
// at their deadline (kgo's RequestTimeoutOverhead, and the dial's for a
// new connection), kgo gives them up once the session timeout has passed
// and calls OnPartitionsLost. The recipe's stop
// there saves what it processed and lets each pchannel's ownership go, so
// that the member the group gave them to owns them, and starts them at
// that save, with the lost member still cut off: no record processed
// twice, none lost, and a failover bounded by the session timeout and the
// deadlines rather than by how long the member is cut off.
func TestAMemberCutOffFromTheBrokersLetsItsPartitionsGo(t *testing.T) {
	const (
		partitions, records = 2, 50
		// bound is how soon after the cut the other member must have
		// both partitions: the session timeout until the lost member is
		// evicted, and as much again until it has given its heartbeats
		// up (a request deadline, a retry, a backoff), with room for a
		// loaded machine.
		bound = 4*cutSessionTimeout + 4*cutRequestDeadline
	)
	brokers := cuttableCluster(t, partitions, records)
	endpoints := etcdtest.Start(t)
	g := newGroup(t, nil)

	aNet, bNet := &network{}, &network{}
	a := g.joinWith("a", brokers, ownerOn(t, endpoints, 30), aNet.clientOpts()...)
	g.await("a to process every record", func() bool { return g.count() == partitions*records })
	b := g.joinWith("b", brokers, ownerOn(t, endpoints, 30), bNet.clientOpts()...)
	g.await("b to start a partition", func() bool { return g.starts("b") == 1 })
	for p := range int32(partitions) {
		produceTo(t, brokers, p, records)
	}
	g.await("the records to be processed", func() bool { return g.count() == 2*partitions*records })

	kept := a.onlyPartition() // as it is cut off
	cut := time.Now()
	aNet.cut()
	g.await("b to start both partitions", func() bool { return g.starts("b") == partitions })
	took := time.Since(cut)
	t.Logf("b had both partitions %v after a was cut off", took.Round(time.Millisecond))
	if took > bound {
		t.Errorf("b had both partitions %v after a was cut off, want within %v", took, bound)
	}
	g.mu.Lock()
	stopped, start := g.stopped["a"][kept], g.started["b"][kept]
	g.mu.Unlock()
	if stopped == nil || !stopped.Flushed || stopped.LastPersisted != wal.MessageID(wal.KafkaID(2*records)) {
		t.Fatalf("a's stop of partition %d, which it had as it was cut off: %+v, want flushed at kafka:%d", kept, stopped, 2*records)
	}
	if start != wal.MessageID(wal.KafkaID(2*records)) {
		t.Fatalf("b started partition %d at %v, want kafka:%d, where a flushed it", kept, start, 2*records)
	}

	// a comes back, rejoins, and the group shares the partitions again.
	for p := range int32(partitions) {
		produceTo(t, brokers, p, records)
	}
	aNet.heal()
	g.await("every record to be processed", func() bool { return g.count() == 3*partitions*records })
	b.close()
	a.close()
	g.requireAllProcessed(partitions, 3*records)
}

// A member cut off from etcd and from the brokers at once, as a machine
// whose network fails is, goes on processing the records it fetched
// before the cut until it hears that its session ended: up to a second
// after etcd dropped the lease, which lets the member the group gave the
// partition to own it and start it. The two process the partition side by
// side meanwhile. What the cut-off member processed then is read again by
// the other from the last save that reached etcd before the cut; what is
// stored never goes down (the cut-off member's saves reach nobody, and
// would be fenced if they did); nothing is lost; and the cut-off member
// processes no more of the partition once it hears.
func TestAMemberCutOffFromEtcdAndTheBrokersAtOnceStopsProcessingOnceItHears(t *testing.T) {
	const (
		partitions, records = 2, 50
		// more is the second batch of each partition: at work, the
		// cut-off member would take longer than a second over it.
		more = 200
		end  = records + more
		// work is what processing a record takes the cut-off member
		// once it is cut off.
		work = 20 * time.Millisecond
		// ttl is the sessions' TTL, in seconds: past the session
		// timeout, so that the group gives the partition away before
		// etcd drops the lease, and the other member's Own waits for it.
		ttl = 3
		// bound is how long after the other member's first record of
		// the partition the cut-off member may still process one: the
		// second the session may take to hear, with room for a loaded
		// machine.
		bound = 3 * time.Second
	)
	brokers := cuttableCluster(t, partitions, records)
	endpoints, freezer := etcdBehindFreezer(t)
	g := newGroup(t, nil)
	aNet, bNet := &network{}, &network{}
	a := g.joinWith("a", brokers, ownerOn(t, []string{freezer.Endpoint()}, ttl), aNet.clientOpts()...)
	g.await("a to process and save every record", func() bool {
		return g.count() == partitions*records && g.savedTo(partitions, records)
	})
	b := g.joinWith("b", brokers, ownerOn(t, endpoints, ttl), bNet.clientOpts()...)
	g.await("b to start a partition", func() bool { return g.starts("b") == 1 })
	kept := a.onlyPartition() // as it is cut off

	// a processes the first record of kept's second batch, and is cut off
	// from both as it reports it; it goes on once b has started kept.
	// Each record it processes from then on takes it work.
	var (
		mu      sync.Mutex
		cutOff  bool
		times   = map[string][]time.Time{} // of kept's records, by member
		offsets = map[string][]int64{}
	)
	// a's pchannel of kept telling its ownership lost: the first is kept.
	lost := eventsOf(g, 1, func(e *messages.OwnershipLost) bool { return e.PChannel == PChannelName(testTopic, kept) })
	bHasIt := make(chan struct{})
	g.beforeReport = func(name string, p int32, offset int64) {
		if p != kept {
			return
		}
		mu.Lock()
		times[name] = append(times[name], time.Now())
		offsets[name] = append(offsets[name], offset)
		first := name == "a" && offset == records
		wasCut := cutOff && name == "a"
		if first {
			cutOff = true
		}
		mu.Unlock()
		switch {
		case first:
			// From here on, what a processed b reads again.
			g.mu.Lock()
			g.readAgain = true
			g.mu.Unlock()
			aNet.cut()
			freezer.Freeze()
			select {
			case <-bHasIt:
			case <-time.After(30 * time.Second):
				t.Errorf("waited 30 s for b to start partition %d", kept)
			}
		case wasCut:
			time.Sleep(work) // the record's processing, not a wait for anything
		}
	}
	for p := range int32(partitions) {
		produceTo(t, brokers, p, more)
	}
	g.await("b to start both partitions", func() bool { return g.starts("b") == partitions })
	g.mu.Lock()
	start := g.started["b"][kept]
	g.mu.Unlock()
	close(bHasIt)
	if start != wal.MessageID(wal.KafkaID(records)) {
		t.Fatalf("b started partition %d at %v, want kafka:%d, the last save before the cut", kept, start, records)
	}
	g.await("every record to be processed", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		for p := range int32(partitions) {
			for off := range int64(end) {
				if g.processed[p][off] == "" {
					return false
				}
			}
		}
		return true
	})
	b.close()
	closing := time.Now()
	a.close()
	// The leave's bound, kgo's own goodbyes (a second each for the fetch
	// sessions and the metrics) and room for a loaded machine: far under
	// the 30 s of kgo's retries of the leave.
	took := time.Since(closing)
	if closeBound := 3*leaveTimeout + 2*time.Second; took > closeBound {
		t.Errorf("a, cut off, took %v to close, want within %v", took, closeBound)
	}
	t.Logf("a, cut off, closed in %v", took.Round(time.Millisecond))
	g.requireAllProcessed(partitions, end)

	mu.Lock()
	defer mu.Unlock()
	aLast := offsets["a"][len(offsets["a"])-1]
	if want := span(records, aLast+1); !slices.Equal(offsets["a"], want) {
		t.Errorf("a processed partition %d's %v of the second batch, want %d to %d in order", kept, offsets["a"], records, aLast)
	}
	if want := span(records, end); !slices.Equal(offsets["b"], want) {
		t.Errorf("b processed partition %d's %v, want %d to %d in order, once each", kept, offsets["b"], records, end-1)
	}
	if aLast >= end-1 {
		t.Errorf("a processed partition %d to its end, %d records at %v each: it never heard that its session ended", kept, more, work)
	}
	// The member looks at Owned.Err before each record: the one in hand
	// as the loss comes is its last.
	select {
	case e := <-lost:
		if last := times["a"][len(times["a"])-1]; last.After(e.At.Add(25 * work)) {
			t.Errorf("a processed partition %d's offset %d %v after its pchannel told its ownership lost", kept, aLast, last.Sub(e.At))
		}
	default:
		t.Errorf("a's pchannel of partition %d never told its ownership lost", kept)
	}
	bFirst := times["b"][0]
	beside := 0
	for _, at := range times["a"] {
		if at.After(bFirst) {
			beside++
		}
	}
	late := times["a"][len(times["a"])-1].Sub(bFirst)
	t.Logf("a processed partition %d to offset %d, %d records after b's first, the last %v after it", kept, aLast, beside, late.Round(time.Millisecond))
	if late > bound {
		t.Errorf("a processed partition %d's offset %d %v after b's first record of it, want within %v", kept, aLast, late, bound)
	}
	for p := range int32(partitions) {
		history := storedHistory(t, endpoints, PChannelName(testTopic, p))
		lowered := false
		for i := 1; i < len(history); i++ {
			lowered = lowered || history[i].LT(history[i-1])
		}
		if lowered || history[len(history)-1] != wal.MessageID(wal.KafkaID(end)) {
			t.Errorf("partition %d's checkpoints as stored: %v, want never lower, to kafka:%d", p, history, end)
		}
	}
}

// storedHistory is every checkpoint stored for pchannel, in order, read
// back from etcd through a watch from its first revision.
func storedHistory(t *testing.T, endpoints []string, pchannel string) []wal.MessageID {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	key := "group/wal/" + pchannel + "/consume-checkpoint"
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("the checkpoint of %s: %v, %d keys", pchannel, err, len(resp.Kvs))
	}
	var history []wal.MessageID
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(1)) {
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			rec, err := persistence.DecodeRecord(pchannel, ev.Kv.Value)
			if err != nil {
				t.Fatalf("%s at revision %d: %v", key, ev.Kv.ModRevision, err)
			}
			history = append(history, rec.Checkpoint)
			if ev.Kv.ModRevision >= resp.Kvs[0].ModRevision {
				return history
			}
		}
	}
	t.Fatalf("the watch of %s ended before revision %d", key, resp.Kvs[0].ModRevision)
	return nil
}

// A member whose etcd session ended (cut off from etcd past the lease's
// TTL, or its lease revoked, as here) has its pchannels stop on
// OwnershipLost while the group still gives it their partitions, and
// every Own on that session fails at once. The recipe: a new session,
// and the partitions given back by leaving the group and joining again.
// The member that joins owns and starts them where the stopped ones had
// saved, each record processed once.
func TestAMemberWhoseSessionEndedJoinsAgainWithANewOne(t *testing.T) {
	const partitions, records = 2, 50
	brokers := filledCluster(t, partitions, records)
	endpoints := etcdtest.Start(t)
	g := newGroup(t, nil)
	lost := eventsOf(g, partitions, func(*messages.OwnershipLost) bool { return true })

	own := ownerOn(t, endpoints, 3) // a short TTL: the session hears of its end within a second
	a := g.joinWith("a", brokers, own)
	// Saved before the session ends: a pchannel stopped by the loss of its
	// ownership saves nothing more, and what it had not saved is read
	// again.
	g.await("a to process and save every record", func() bool {
		return g.count() == partitions*records && g.savedTo(partitions, records)
	})
	ended := own.session
	if _, err := own.catalog.Client().Revoke(t.Context(), ended.Lease()); err != nil {
		t.Fatal(err)
	}
	// The cause is whichever a pchannel heard first: the session's end,
	// its owner key gone with the lease, or a save fenced.
	for range partitions {
		select {
		case <-lost:
		case <-time.After(30 * time.Second):
			t.Fatal("waited 30 s for the pchannels to lose their ownership")
		}
	}
	select {
	case <-ended.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("waited 30 s for the session to end")
	}
	if _, err := own.catalog.Own(t.Context(), PChannelName(testTopic, 0), ended); !errors.Is(err, etcdcatalog.ErrSessionDone) {
		t.Fatalf("Own on the ended session = %v, want ErrSessionDone", err)
	}

	a.close() // leaves the group: its pchannels, stopped already, are revoked
	a2 := g.joinWith("a2", brokers, own)
	g.await("a2 to start both partitions", func() bool { return g.starts("a2") == partitions })
	if own.session == ended {
		t.Fatal("a2 owns its partitions on the ended session")
	}
	g.mu.Lock()
	for p, start := range g.started["a2"] {
		if start != wal.MessageID(wal.KafkaID(records)) {
			t.Errorf("a2 started partition %d at %v, want kafka:%d, where a saved it", p, start, records)
		}
	}
	g.mu.Unlock()
	for p := range int32(partitions) {
		produceTo(t, brokers, p, records)
	}
	g.await("every record to be processed", func() bool { return g.count() == 2*partitions*records })
	a2.close()
	g.requireAllProcessed(partitions, 2*records)
}

// A member whose session ends while it processes records goes on
// processing them between two polls, and reports them to pchannels that
// stopped as their ownership ended: such a report fails with
// actor.ErrDeadLetter, and the member processes no more of that
// partition (the group test's poll). Whether the member leaves the group
// and joins again, or owns its partitions again in place, each partition
// is read again from what is stored (the stopped pchannel's last save, or
// one it had in flight), and the records read twice are exactly those from
// there to the last one processed before: at least once, as after a
// crash, and none lost.
//
// Owned again in place while another member joins, the rebalance waits for
// the member's next poll, and moves a partition once the member owns it
// again: the member's new pchannel saves it as it is revoked, and the
// joining member starts it there.
func TestAMemberWhoseSessionEndsMidBatchReadsAgainWhatItCouldNotReport(t *testing.T) {
	t.Run("leaving the group", func(t *testing.T) { sessionEndsMidBatch(t, false, false) })
	t.Run("in place", func(t *testing.T) { sessionEndsMidBatch(t, true, false) })
	t.Run("in place, as another member joins", func(t *testing.T) { sessionEndsMidBatch(t, true, true) })
}

func sessionEndsMidBatch(t *testing.T, inPlace, joins bool) {
	const partitions, records, heldAt = 2, 100, 60
	brokers := filledCluster(t, partitions, records)
	endpoints := etcdtest.Start(t)
	g := newGroup(t, nil)
	stopped := eventsOf(g, partitions, func(*messages.Stopped) bool { return true })
	// a holds partition 0's record heldAt processed, its report not sent,
	// until the session has ended and both pchannels have stopped.
	held, release := make(chan struct{}), make(chan struct{})
	var hold, released sync.Once
	letGo := func() { released.Do(func() { close(release) }) }
	// A failure before the release lets the held report go too: the
	// group's cleanup waits for the member's poll, which it holds.
	defer letGo()
	g.beforeReport = func(name string, p int32, offset int64) {
		if name == "a" && p == 0 && offset == heldAt {
			hold.Do(func() {
				close(held)
				<-release
			})
		}
	}

	own := ownerOn(t, endpoints, 3)
	own.inPlace = inPlace
	a := g.joinWith("a", brokers, own)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30 s for a to process partition 0's offset %d", heldAt)
	}
	ended := own.session
	if _, err := own.catalog.Client().Revoke(t.Context(), ended.Lease()); err != nil {
		t.Fatal(err)
	}
	// What is stored once the lease is gone, by pchannel: what each
	// stopped one saved last, or above it, where a save in flight as the
	// lease went landed unanswered (Stopped.LastPersisted is the last one
	// answered). No save lands after: each is fenced by the lease. A
	// pchannel that had no save answered (its partition's records came in
	// a later fetch than partition 0's first 60, or its first save was in
	// flight) may have none stored, and is read again from its start.
	saved := map[string]wal.MessageID{}
	for range partitions {
		select {
		case e := <-stopped:
			stored, err := own.catalog.Load(t.Context(), e.PChannel)
			if err != nil {
				t.Fatal(err)
			}
			if e.LastPersisted != nil && (stored == nil || stored.LT(e.LastPersisted)) {
				t.Fatalf("%s stopped, its last save answered at %v, and %v is stored", e.PChannel, e.LastPersisted, stored)
			}
			saved[e.PChannel] = stored
		case <-time.After(30 * time.Second):
			t.Fatal("waited 30 s for the pchannels to stop on the loss of their ownership")
		}
	}
	g.mu.Lock()
	g.readAgain = true
	g.mu.Unlock()
	if joins {
		b := g.joinWith("b", brokers, ownerOn(t, endpoints, 3))
		defer b.close()
		awaitGroupState(t, brokers, "PreparingRebalance")
	}
	letGo()
	owner := "a"
	if !inPlace {
		a.close()
		a2 := g.joinWith("a2", brokers, own)
		owner = "a2"
		defer a2.close()
	}
	end := int64(records)
	if joins {
		// Records to read after the move, by both.
		g.await("b to start a partition", func() bool { return g.starts("b") == 1 })
		for p := range int32(partitions) {
			produceTo(t, brokers, p, records)
		}
		end += records
	}
	g.await("every record to be processed", func() bool { return g.count() == partitions*int(end) })
	g.requireAllProcessed(partitions, end)

	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case joins:
		// The partition moved: b started it where a's pchannel, owned
		// again, saved it as it was revoked.
		if len(g.stopped["a"]) != 1 || len(g.started["b"]) != 1 {
			t.Fatalf("a's stops %v and b's starts %v, want one partition moved", g.stopped["a"], g.started["b"])
		}
		for p, s := range g.stopped["a"] {
			if !s.Flushed || g.started["b"][p] != s.LastPersisted {
				t.Errorf("partition %d: a's pchannel stopped %+v, b started it at %v, want flushed, and there", p, s, g.started["b"][p])
			}
		}
	case inPlace && len(g.stopped["a"]) != 0:
		t.Errorf("a's partitions were revoked (%v): owned again in place, they stay its own", g.stopped["a"])
	}
	if len(g.left) != 0 {
		t.Errorf("%v left the group, unable to own their partitions again in place with etcd in reach", g.left)
	}
	if own.session == ended {
		t.Errorf("%s owns its partitions on the ended session", owner)
	}
	for p := range int32(partitions) {
		start := g.started[owner][p]
		if want := saved[PChannelName(testTopic, p)]; start != want {
			t.Errorf("%s started partition %d at %v, want %v, what was stored as the lease went", owner, p, start, want)
		}
		last := g.readTwiceFrom(p, offsetOf(start), end)
		unreported := g.unreported["a"][p]
		switch p {
		case 0:
			// The held record was the last processed before the loss,
			// and its report the one to find the pchannel gone.
			if last != heldAt || !slices.Equal(unreported, []int64{heldAt}) {
				t.Errorf("partition 0: a processed up to %d and its reports of %v found the pchannel gone, want %d and [%d]",
					last, unreported, heldAt, heldAt)
			}
		default:
			// The loss is seen before the next record (Owned.Err), or at
			// its report.
			if len(unreported) > 1 || len(unreported) == 1 && unreported[0] != last {
				t.Errorf("partition %d: a's reports of %v found the pchannel gone, want none or [%d], the last processed",
					p, unreported, last)
			}
		}
	}
	if !inPlace && len(g.unreported["a2"]) != 0 {
		t.Errorf("a2's reports that found a pchannel gone: %v, want none", g.unreported["a2"])
	}
}

// A member whose session ended, and which cannot make a new one to own its
// partitions again in place (etcd out of its reach, here for good), leaves
// the group once the pass's bound runs out: the group gives its partitions
// to another member, which owns them once etcd has dropped the lease and
// reads them from their last save, each record processed once.
func TestAMemberThatCannotOwnItsPartitionsAgainInPlaceLeavesTheGroup(t *testing.T) {
	const (
		partitions, records = 2, 100
		ttl                 = 3
		againWithin         = 2 * time.Second
	)
	brokers := filledCluster(t, partitions, records)
	endpoints, freezer := etcdBehindFreezer(t)
	g := newGroup(t, nil)
	lost := eventsOf(g, partitions, func(e *messages.Stopped) bool { return !e.Graceful })

	own := ownerOn(t, []string{freezer.Endpoint()}, ttl)
	own.inPlace, own.againWithin = true, againWithin
	a := g.joinWith("a", brokers, own)
	g.await("a to process and save every record", func() bool {
		return g.count() == partitions*records && g.savedTo(partitions, records)
	})
	b := g.joinWith("b", brokers, ownerOn(t, endpoints, ttl))
	g.await("b to start a partition", func() bool { return g.starts("b") == 1 })
	kept := a.onlyPartition() // as etcd goes out of its reach

	frozen := time.Now()
	freezer.Freeze()
	select {
	case e := <-lost:
		if e.PChannel != PChannelName(testTopic, kept) || e.LastPersisted != wal.MessageID(wal.KafkaID(records)) {
			t.Fatalf("stopped on the loss of its ownership: %+v, want partition %d's, saved at kafka:%d", e, kept, records)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30 s for partition %d's pchannel to stop on the loss of its ownership", kept)
	}
	// a finds the loss at its next poll that returns anything.
	for p := range int32(partitions) {
		produceTo(t, brokers, p, records)
	}
	g.await("b to start both partitions", func() bool { return g.starts("b") == partitions })
	t.Logf("b had both partitions %v after etcd went out of a's reach", time.Since(frozen).Round(time.Millisecond))
	g.await("every record to be processed", func() bool { return g.count() == 2*partitions*records })
	b.close()
	g.requireAllProcessed(partitions, 2*records)
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Equal(g.left, []string{"a"}) {
		t.Errorf("the members that left the group: %v, want a", g.left)
	}
	if start := g.started["b"][kept]; start != wal.MessageID(wal.KafkaID(records)) {
		t.Errorf("b started partition %d at %v, want kafka:%d, where a's pchannel saved it", kept, start, records)
	}
}

// awaitGroupState waits up to 30 s for the group to be in state, as its
// coordinator describes it.
func awaitGroupState(t *testing.T, brokers []string, state string) {
	t.Helper()
	cl := client(t, brokers)
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"g"}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	last := ""
	for {
		resp, err := req.RequestWith(t.Context(), cl)
		if err == nil && len(resp.Groups) == 1 {
			if last = resp.Groups[0].State; last == state {
				return
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited 30 s for the group to be %s; it is %q (%v)", state, last, err)
		}
	}
}

// etcdBehindFreezer starts etcd, and a Freezer in front of it through
// which a member reaches it until it is cut off.
func etcdBehindFreezer(t *testing.T) ([]string, *etcdtest.Freezer) {
	t.Helper()
	endpoints := etcdtest.Start(t)
	return endpoints, etcdtest.NewFreezer(t, strings.TrimPrefix(endpoints[0], "http://"))
}

// ownerOn opens a member's own catalog and session on etcd, whose
// sessions have a TTL of ttl seconds.
func ownerOn(t *testing.T, endpoints []string, ttl int) *owner {
	t.Helper()
	cat, err := etcdcatalog.Open(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		etcdcatalog.WithPrefix("group"))
	if err != nil {
		t.Fatal(err)
	}
	session, err := cat.NewSession(t.Context(), ttl)
	if err != nil {
		t.Fatal(err)
	}
	o := &owner{catalog: cat, ttl: ttl, session: session}
	t.Cleanup(func() {
		o.close()
		_ = cat.Close()
	})
	return o
}

// The group's session timeout, and the deadlines of a request and of a
// dial, in the tests that cut a member off: short, so that the group and
// the member itself give the member up within seconds.
const (
	cutSessionTimeout  = 2 * time.Second
	cutRequestDeadline = 500 * time.Millisecond
)

// cuttableCluster starts a cluster whose partitions hold records each,
// and whose groups take a session timeout as short as cutSessionTimeout.
func cuttableCluster(t *testing.T, partitions int32, records int) []string {
	t.Helper()
	return filledCluster(t, partitions, records, kfake.GroupMinSessionTimeout(time.Second))
}

// network is a member's path to the brokers, which cut partitions as a
// network does to TCP: nothing is refused and nothing arrives; a dial, a
// read or a write waits until its deadline and fails then, as a timeout.
// (A model that waited past the deadlines would hide what kgo does.)
type network struct {
	mu     sync.Mutex
	healed chan struct{} // closed at the heal; nil while whole
}

// clientOpts are the options of a member's client on n: the group's
// session timeout, and the deadlines of a request and of a dial (the
// dial's is the network's, as a Dialer of one's own replaces
// kgo.DialTimeout).
func (n *network) clientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.SessionTimeout(cutSessionTimeout), kgo.RequestTimeoutOverhead(cutRequestDeadline),
		kgo.Dialer(n.dial)}
}

func (n *network) cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.healed == nil {
		n.healed = make(chan struct{})
	}
}

func (n *network) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.healed != nil {
		close(n.healed)
		n.healed = nil
	}
}

// down is closed when the network heals, nil while it is whole.
func (n *network) down() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.healed
}

func (n *network) dial(ctx context.Context, network, host string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, cutRequestDeadline)
	defer cancel()
	if down := n.down(); down != nil {
		select {
		case <-down:
		case <-ctx.Done():
			return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
		}
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: conn, n: n, closed: make(chan struct{}), moved: make(chan struct{})}, nil
}

// cutConn holds a connection's reads and writes while its network is cut,
// each until its deadline.
type cutConn struct {
	net.Conn
	n         *network
	closeOnce sync.Once
	closed    chan struct{}

	mu            sync.Mutex
	read, written time.Time     // the deadlines
	moved         chan struct{} // closed when a deadline moves
}

func (c *cutConn) Read(b []byte) (int, error) {
	if err := c.hold(func() time.Time { return c.read }); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	// What arrives as the cut begins is held too: it is lost with the
	// connection if the cut outlasts the deadline.
	if herr := c.hold(func() time.Time { return c.read }); herr != nil {
		return 0, herr
	}
	return n, err
}

func (c *cutConn) Write(b []byte) (int, error) {
	if err := c.hold(func() time.Time { return c.written }); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// hold waits while the network is cut, until the deadline that deadline
// reads, which may move meanwhile.
func (c *cutConn) hold(deadline func() time.Time) error {
	for {
		down := c.n.down()
		if down == nil {
			return nil
		}
		c.mu.Lock()
		d, moved := deadline(), c.moved
		c.mu.Unlock()
		if err := c.wait(down, d, moved); err != nil {
			return err
		}
	}
}

// wait waits for the network to heal (down closing), the deadline d (if
// set) to pass, or the deadlines to move.
func (c *cutConn) wait(down <-chan struct{}, d time.Time, moved <-chan struct{}) error {
	var expired <-chan time.Time
	if !d.IsZero() {
		wait := time.Until(d)
		if wait <= 0 {
			return os.ErrDeadlineExceeded
		}
		timer := time.NewTimer(wait)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case <-down:
		return nil
	case <-moved:
		return nil
	case <-expired:
		return os.ErrDeadlineExceeded
	case <-c.closed:
		return net.ErrClosed
	}
}

func (c *cutConn) SetDeadline(t time.Time) error {
	c.setDeadlines(&t, &t)
	return c.Conn.SetDeadline(t)
}

func (c *cutConn) SetReadDeadline(t time.Time) error {
	c.setDeadlines(&t, nil)
	return c.Conn.SetReadDeadline(t)
}

func (c *cutConn) SetWriteDeadline(t time.Time) error {
	c.setDeadlines(nil, &t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *cutConn) setDeadlines(read, written *time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if read != nil {
		c.read = *read
	}
	if written != nil {
		c.written = *written
	}
	close(c.moved)
	c.moved = make(chan struct{})
}

func (c *cutConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
