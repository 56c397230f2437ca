package kafka

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// The consumer-group recipe of docs/kafka.md, run: two members of a group share
// a catalog, and the second one's joining moves a partition. The first
// flushes it as it is revoked, the second starts it at what was flushed,
// and every record is processed once, by one member or the other.
//
// The recipe is the same in a group of the next generation (KIP-848), whose
// coordinator assigns the partitions.
func TestAConsumerGroupMovesAPartitionWithItsCheckpoint(t *testing.T) {
	t.Run("classic", func(t *testing.T) { groupMovesAPartition(t, "classic", nil) })
	t.Run("next-gen (KIP-848)", func(t *testing.T) {
		groupMovesAPartition(t, "consumer",
			[]kfake.Opt{kfake.BrokerConfigs(map[string]string{"group.consumer.heartbeat.interval.ms": "100"})},
			kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()))
	})
}

// groupMovesAPartition runs the test in a group of groupType, as its
// coordinator names it.
func groupMovesAPartition(t *testing.T, groupType string, clusterOpts []kfake.Opt, memberOpts ...kgo.Opt) {
	const partitions, records = 2, 100
	brokers := filledCluster(t, partitions, records, clusterOpts...)
	g := newGroup(t, persistence.NewMemory())

	a := g.joinWith("a", brokers, nil, memberOpts...)
	g.await("a to process every record", func() bool { return g.count() == partitions*records })
	// kgo falls back to a classic group, without a word, for a balancer
	// the coordinator does not run.
	if typ := groupInfo(t, brokers).typ; typ != groupType {
		t.Fatalf("the group is %q, want %q", typ, groupType)
	}
	b := g.joinWith("b", brokers, nil, memberOpts...)
	g.await("b to start a partition", func() bool { return g.starts("b") == 1 })

	g.mu.Lock()
	var moved int32
	var start wal.MessageID
	for p, s := range g.started["b"] {
		moved, start = p, s
	}
	stopped := g.stopped["a"][moved]
	g.mu.Unlock()
	if stopped == nil || !stopped.Flushed || stopped.LastPersisted != wal.MessageID(wal.KafkaID(records)) {
		t.Fatalf("a's stop of partition %d: %+v, want flushed at kafka:%d", moved, stopped, records)
	}
	if start != wal.MessageID(wal.KafkaID(records)) {
		t.Fatalf("b started partition %d at %v, want kafka:%d, where a flushed it", moved, start, records)
	}

	for p := range int32(partitions) {
		produceTo(t, brokers, p, records)
	}
	g.await("every record to be processed", func() bool { return g.count() == 2*partitions*records })
	b.close()
	a.close()
	g.requireAllProcessed(partitions, 2*records)
	g.mu.Lock()
	defer g.mu.Unlock()
	for off, by := range g.processed[moved] {
		if want := map[bool]string{true: "a", false: "b"}[off < records]; by != want {
			t.Errorf("partition %d offset %d: processed by %s, want %s", moved, off, by, want)
		}
	}
}

// A static member (kgo.InstanceID) that closes and starts again has its
// partitions back: its close stops their pchannels, saving each, and the
// member started again starts them there, each record processed once.
func TestAStaticMemberStartedAgainHasItsPartitionsBackAtTheirSaves(t *testing.T) {
	const partitions, records = 2, 100
	brokers := filledCluster(t, partitions, records)
	g := newGroup(t, persistence.NewMemory())
	a := g.joinWith("a", brokers, nil, kgo.InstanceID("a"))
	g.await("a to process every record", func() bool { return g.count() == partitions*records })
	if ids := groupInfo(t, brokers).instanceIDs; !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("the group's static members: %v, want [a]", ids)
	}
	a.close()
	for p := range int32(partitions) {
		produceTo(t, brokers, p, records)
	}
	again := g.joinWith("a again", brokers, nil, kgo.InstanceID("a"))
	g.await("every record to be processed", func() bool { return g.count() == 2*partitions*records })
	again.close()
	g.requireAllProcessed(partitions, 2*records)
	g.mu.Lock()
	defer g.mu.Unlock()
	for p := range int32(partitions) {
		stopped, start := g.stopped["a"][p], g.started["a again"][p]
		if stopped == nil || !stopped.Flushed || stopped.LastPersisted != wal.MessageID(wal.KafkaID(records)) {
			t.Errorf("partition %d: a's stop %+v, want flushed at kafka:%d", p, stopped, records)
		}
		if start != wal.MessageID(wal.KafkaID(records)) {
			t.Errorf("partition %d: started again at %v, want kafka:%d, where a's stop saved it", p, start, records)
		}
	}
}

// groupInfo is group g as its coordinator tells it: its type ("classic",
// or "consumer" for KIP-848) and, for a classic group, the instance IDs
// of its static members.
func groupInfo(t *testing.T, brokers []string) (info struct {
	typ         string
	instanceIDs []string
}) {
	t.Helper()
	cl := client(t, brokers)
	list, err := kmsg.NewPtrListGroupsRequest().RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, lg := range list.Groups {
		if lg.Group == "g" {
			info.typ = lg.GroupType
		}
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{"g"}
	resp, err := describe.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, dg := range resp.Groups {
		for _, m := range dg.Members {
			if m.InstanceID != nil {
				info.instanceIDs = append(info.instanceIDs, *m.InstanceID)
			}
		}
	}
	return info
}

// group is the members of one consumer group, and what they did.
type group struct {
	t       *testing.T
	system  *actor.ActorSystem
	catalog persistence.Catalog

	change chan struct{} // something below changed

	// beforeReport, if set, runs between a record's processing and its
	// report, on the member's poll loop.
	beforeReport func(name string, p int32, offset int64)

	mu        sync.Mutex
	processed map[int32]map[int64]string // by whom, once each
	// order is each partition's offsets in the order processed;
	// readAgain lets a record be processed again, where it is otherwise
	// an error.
	order      map[int32][]int64
	readAgain  bool
	unreported map[string]map[int32][]int64 // whose report found the pchannel gone
	started    map[string]map[int32]wal.MessageID
	stopped    map[string]map[int32]*messages.Stopped
	persisted  map[string]wal.MessageID // the last save told, by pchannel
	// left is the members that left the group, unable to own their
	// partitions again in place.
	left []string
}

// filledCluster starts a cluster, with opts, whose partitions hold
// records each.
func filledCluster(t *testing.T, partitions int32, records int, opts ...kfake.Opt) []string {
	brokers := cluster(t, partitions, opts...)
	for p := range partitions {
		produceTo(t, brokers, p, records)
	}
	return brokers
}

// newGroup starts a group on an actor system of its own, whose members
// save to catalog, or, if nil, each to its owner's.
func newGroup(t *testing.T, catalog persistence.Catalog) *group {
	// The stop of a pchannel that stopped by itself is a dead letter,
	// whose throttle keeps a goroutine for its interval: a short one, so
	// that the leak check at the end does not find it.
	system := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(10*time.Millisecond),
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	g := &group{t: t, system: system, catalog: catalog, processed: map[int32]map[int64]string{},
		persisted: map[string]wal.MessageID{}, change: make(chan struct{}, 1)}
	system.EventStream.Subscribe(func(e any) {
		if e, ok := e.(*messages.CheckpointPersisted); ok {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.persisted[e.PChannel] = e.Value
			g.changed()
		}
	})
	return g
}

// eventsOf is the events of type E that keep takes, published on the
// group's system until the test ends, in a channel that holds n; those
// that find it full are dropped (the stops at a test's end, say): the
// publishing actor must never wait on a test.
func eventsOf[E any](g *group, n int, keep func(E) bool) <-chan E {
	ch := make(chan E, n)
	sub := g.system.EventStream.Subscribe(func(e any) {
		if e, ok := e.(E); ok && keep(e) {
			select {
			case ch <- e:
			default:
			}
		}
	})
	g.t.Cleanup(func() { g.system.EventStream.Unsubscribe(sub) })
	return ch
}

// savedTo reports whether every partition's pchannel has saved up to
// offset end.
func (g *group) savedTo(partitions int32, end int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for p := range partitions {
		if g.persisted[PChannelName(testTopic, p)] != wal.MessageID(wal.KafkaID(end)) {
			return false
		}
	}
	return true
}

// onlyPartition is the one partition m has.
func (m *member) onlyPartition() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pids) != 1 {
		m.g.t.Fatalf("%s has partitions %v, want one", m.name, slices.Collect(maps.Keys(m.pids)))
	}
	for p := range m.pids {
		return p
	}
	return -1
}

// member is one member's client, and its pchannels by partition.
type member struct {
	g     *group
	name  string
	cl    *kgo.Client
	owner *owner // nil: the group's catalog, owned by nobody
	mu    sync.Mutex
	pids  map[int32]*actor.PID
	owned map[int32]*etcdcatalog.Owned
	// gone holds the partitions whose pchannel stopped by itself, its
	// ownership lost: the member processes none of their records.
	gone  map[int32]bool
	done  chan struct{}
	close func()
}

// owner is a member's own etcd catalog and session, as on a machine of
// its own: it owns each partition's pchannel while it has it.
type owner struct {
	catalog *etcdcatalog.Catalog
	ttl     int // of a session, in seconds
	// inPlace has a member own again, on a new session and between two
	// polls, a partition whose pchannel stopped as its ownership ended,
	// and fetch it again from its last save (member.ownAgain); without,
	// the partition is read by nobody until the member leaves the group.
	inPlace bool
	// againWithin bounds a pass that owns partitions again in place;
	// 0: 10 s.
	againWithin time.Duration
	mu          sync.Mutex
	session     *concurrency.Session
}

// current returns the owner's session, made anew once the last one
// ended, or is ended, the one an Own found ended before the session
// itself heard of it: an Own on an ended session fails at once, every
// time. ctx bounds the wait for etcd.
func (o *owner) current(ctx context.Context, ended *concurrency.Session) (*concurrency.Session, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case <-o.session.Done():
	default:
		if o.session != ended {
			return o.session, nil
		}
	}
	s, err := o.catalog.NewSession(ctx, o.ttl)
	if err != nil {
		return nil, err
	}
	_ = o.catalog.CloseSession(ctx, o.session)
	o.session = s
	return s, nil
}

func (o *owner) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), etcdcatalog.ReleaseTimeout)
	defer cancel()
	_ = o.catalog.CloseSession(ctx, o.session)
}

// leaveTimeout bounds a member's leave of the group as it closes.
const leaveTimeout = 2 * time.Second

// joinWith starts a member of the group, which polls until it is closed,
// owns its pchannels through own, if not nil, and gives its client the
// options extra too.
func (g *group) joinWith(name string, brokers []string, own *owner, extra ...kgo.Opt) *member {
	m := &member{g: g, name: name, owner: own, pids: map[int32]*actor.PID{}, owned: map[int32]*etcdcatalog.Owned{},
		gone: map[int32]bool{}, done: make(chan struct{})}
	stop := func(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
		// In parallel: the callback has the group's rebalance timeout.
		var wg sync.WaitGroup
		for _, p := range gone[testTopic] {
			wg.Go(func() { m.stop(p) })
		}
		wg.Wait()
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics(testTopic),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.AdjustFetchOffsetsFn(func(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			for p := range offsets[testTopic] {
				start, err := m.start(ctx, p)
				if err != nil {
					return nil, err
				}
				offsets[testTopic][p] = kgo.NewOffset().AtStart()
				if start != nil {
					offsets[testTopic][p] = kgo.NewOffset().At(int64(start.(wal.KafkaID))).WithEpoch(-1)
				}
			}
			return offsets, nil
		}),
		kgo.OnPartitionsRevoked(stop), kgo.OnPartitionsLost(stop)}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		g.t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	go m.poll(ctx)
	m.close = sync.OnceFunc(func() {
		cancel()
		<-m.done
		m.leave()
		cl.Close() // waits for the revoke's stops, and no more for the brokers
	})
	g.t.Cleanup(m.close)
	return m
}

// start spawns partition p's pchannel and returns where to fetch from.
// A member with an owner owns the pchannel first, waiting while another
// member does.
func (m *member) start(ctx context.Context, p int32) (wal.MessageID, error) {
	// kgo may ask again for a partition it gave already, when the
	// rebalance that follows cut the first answer short: what runs is
	// stopped first, saving what it had, so that two never run at once.
	m.stop(p)
	name := PChannelName(testTopic, p)
	catalog := m.g.catalog
	var opts []actors.Option
	var owned *etcdcatalog.Owned
	if m.owner != nil {
		session, err := m.owner.current(ctx, nil)
		if err != nil {
			return nil, err
		}
		owned, err = m.owner.catalog.Own(ctx, name, session)
		if errors.Is(err, etcdcatalog.ErrSessionDone) { // its lease gone before it heard
			if session, err = m.owner.current(ctx, session); err == nil {
				owned, err = m.owner.catalog.Own(ctx, name, session)
			}
		}
		if err != nil {
			return nil, err
		}
		catalog = owned
		opts = append(opts, actors.WithOwnership(owned.Context()))
	}
	props, err := actors.NewProps(name, wal.Kafka, catalog, opts...)
	if err != nil {
		closeOwned(owned)
		return nil, err
	}
	pid := m.g.system.Root.Spawn(props)
	start, err := actors.StartMessageID(ctx, m.g.system, pid)
	if err == nil {
		from := start
		if from == nil {
			from = wal.KafkaID(0)
		}
		err = actors.Request(ctx, m.g.system.Root, pid, &messages.AddVChannel{VChannel: "all", Checkpoint: from})
	}
	if err != nil {
		_, _ = actors.Poison(context.Background(), m.g.system, pid)
		closeOwned(owned)
		return nil, err
	}
	m.mu.Lock()
	m.pids[p] = pid
	m.owned[p] = owned
	delete(m.gone, p)
	m.mu.Unlock()
	m.g.mu.Lock()
	record(&m.g.started, m.name, p, start)
	m.g.changed()
	m.g.mu.Unlock()
	return start, nil
}

// stop flushes and stops partition p's pchannel, then lets its
// ownership go, if any.
func (m *member) stop(p int32) {
	m.mu.Lock()
	pid, owned := m.pids[p], m.owned[p]
	delete(m.pids, p)
	delete(m.owned, p)
	m.mu.Unlock()
	if pid == nil {
		return
	}
	// After the stop, not before: a pchannel whose ownership ends under
	// it stops without its last save.
	defer closeOwned(owned)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stopped, err := actors.Poison(ctx, m.g.system, pid)
	if err != nil && owned != nil && owned.Err() != nil && errors.Is(err, actor.ErrDeadLetter) {
		return // it stopped by itself as its ownership ended (OwnershipLost)
	}
	if err != nil {
		m.g.t.Errorf("%s: stop of partition %d: %v", m.name, p, err)
		return
	}
	m.g.mu.Lock()
	record(&m.g.stopped, m.name, p, stopped)
	m.g.changed()
	m.g.mu.Unlock()
}

// poll processes each record once and reports it processed to its
// partition's pchannel before the next poll; a rebalance runs between
// polls alone (BlockRebalanceOnPoll).
//
// With ownership, a pchannel stops by itself as its ownership ends
// (OwnershipLost), and the member processes no more of its partition's
// records: whoever owns the partition next reads them again from the
// last save. The member looks before processing a record (Owned.Err);
// a report that finds the pchannel gone all the same (actor.ErrDeadLetter)
// found it stopped since, and the record counts as not processed.
func (m *member) poll(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			m.mu.Lock()
			pid, owned := m.pids[r.Partition], m.owned[r.Partition]
			if owned != nil && owned.Err() != nil {
				m.gone[r.Partition] = true
			}
			gone := m.gone[r.Partition]
			m.mu.Unlock()
			if gone {
				return
			}
			m.g.process(m.name, r)
			if m.g.beforeReport != nil {
				m.g.beforeReport(m.name, r.Partition, r.Offset)
			}
			// Not under ctx: a record processed is reported, even as the
			// member closes.
			err := actors.Request(context.Background(), m.g.system.Root, pid,
				&messages.UpdateCheckpoint{VChannel: "all", Checkpoint: wal.KafkaID(r.Offset + 1)})
			switch {
			case err == nil:
			case m.owner != nil && errors.Is(err, actor.ErrDeadLetter):
				m.mu.Lock()
				m.gone[r.Partition] = true
				m.mu.Unlock()
				m.g.mu.Lock()
				unreported := m.g.unreported[m.name][r.Partition]
				record(&m.g.unreported, m.name, r.Partition, append(unreported, r.Offset))
				m.g.changed()
				m.g.mu.Unlock()
			default:
				m.g.t.Errorf("%s: partition %d offset %d: %v", m.name, r.Partition, r.Offset, err)
			}
		})
		if m.owner != nil && m.owner.inPlace && !m.ownAgain() {
			// Its partitions not owned again in time, the member leaves
			// the group, which gives them to another member; it could
			// join again once it can make a session.
			m.cl.AllowRebalance()
			m.leave()
			m.g.mu.Lock()
			m.g.left = append(m.g.left, m.name)
			m.g.changed()
			m.g.mu.Unlock()
			return
		}
		m.cl.AllowRebalance()
	}
}

// leave leaves the group, whose coordinator then revokes the partitions
// the member still has, within leaveTimeout: kgo's Close would wait for
// the brokers as long as it retries the leave (its RetryTimeout, 30 s by
// default), as a member cut off from them would.
func (m *member) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	_ = m.cl.LeaveGroupContext(ctx)
}

// ownAgain owns each partition whose pchannel stopped as its ownership
// ended again, on a new session, and has it fetched again from where its
// new pchannel starts. It finds them at the first poll that returns
// anything after the loss. It runs between two polls, before AllowRebalance,
// where kgo allows SetOffsets and no revoke runs; what the last poll
// returned of such a partition was left unprocessed, and is fetched
// again. It reports whether it owned every one again within the bound.
func (m *member) ownAgain() bool {
	m.mu.Lock()
	sessionEnded := false
	for p, owned := range m.owned {
		if owned != nil && owned.Err() != nil {
			m.gone[p] = true // a partition the last poll returned nothing of
			sessionEnded = sessionEnded || errors.Is(owned.Err(), etcdcatalog.ErrSessionDone)
		}
	}
	again := maps.Clone(m.gone)
	if sessionEnded {
		// Every partition owned on the session goes with it, though its
		// Owned may not have heard yet: each hears on a callback of its
		// own.
		for p := range m.pids {
			again[p] = true
		}
	}
	m.mu.Unlock()
	if len(again) == 0 {
		return true
	}
	// One bound for the pass, as the poll loop waits meanwhile and the
	// group's rebalances wait for it.
	bound := cmp.Or(m.owner.againWithin, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	offsets := map[int32]kgo.EpochOffset{}
	all := true
	for p := range again {
		start, err := m.start(ctx, p)
		if err != nil {
			m.g.t.Logf("%s: owning partition %d again: %v", m.name, p, err)
			all = false
			continue
		}
		offsets[p] = kgo.EpochOffset{Epoch: -1, Offset: offsetOf(start)}
	}
	if len(offsets) > 0 {
		m.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{testTopic: offsets})
	}
	return all
}

// offsetOf is the offset a pchannel that starts at start reads from: with
// nothing stored, the partition's start, 0 in these tests.
func offsetOf(start wal.MessageID) int64 {
	if start == nil {
		return 0
	}
	return int64(start.(wal.KafkaID))
}

// process notes r processed by name: once, unless readAgain.
func (g *group) process(name string, r *kgo.Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.processed[r.Partition] == nil {
		g.processed[r.Partition] = map[int64]string{}
	}
	if by := g.processed[r.Partition][r.Offset]; by != "" && !g.readAgain {
		g.t.Errorf("partition %d offset %d: processed by %s, then by %s", r.Partition, r.Offset, by, name)
	}
	g.processed[r.Partition][r.Offset] = name
	if g.order == nil {
		g.order = map[int32][]int64{}
	}
	g.order[r.Partition] = append(g.order[r.Partition], r.Offset)
	g.changed()
}

func closeOwned(owned *etcdcatalog.Owned) {
	if owned != nil {
		_ = owned.Close()
	}
}

// record notes v as what name did of partition p.
func record[V any](into *map[string]map[int32]V, name string, p int32, v V) {
	if *into == nil {
		*into = map[string]map[int32]V{}
	}
	if (*into)[name] == nil {
		(*into)[name] = map[int32]V{}
	}
	(*into)[name][p] = v
}

// starts is how many partitions name has started.
func (g *group) starts(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.started[name])
}

// count is how many records were processed.
func (g *group) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, offs := range g.processed {
		n += len(offs)
	}
	return n
}

// requireAllProcessed requires that each record of every partition
// below offset end was processed.
func (g *group) requireAllProcessed(partitions int32, end int64) {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for p := range partitions {
		for off := range end {
			if g.processed[p][off] == "" {
				g.t.Errorf("partition %d offset %d: never processed", p, off)
			}
		}
	}
}

// readTwiceFrom requires that partition p's records were processed in
// order from 0 to some last, then again from from to end: the records
// read twice are exactly from..last. It returns last, -1 if none was
// processed before. Called with g.mu held.
func (g *group) readTwiceFrom(p int32, from, end int64) (last int64) {
	g.t.Helper()
	seq := g.order[p]
	cut := len(seq) // where the second reading starts
	for i := 1; i < len(seq); i++ {
		if seq[i] != seq[i-1]+1 {
			cut = i
			break
		}
	}
	first, again := seq[:cut], seq[cut:]
	if len(again) == 0 && from <= int64(len(seq)) { // read again from just past the last processed
		first, again = seq[:from], seq[from:]
	}
	last = int64(len(first)) - 1
	if !slices.Equal(first, span(0, last+1)) || !slices.Equal(again, span(from, end)) || from > last+1 {
		g.t.Errorf("partition %d processed %v, want 0 up to some offset, then %d to %d", p, seq, from, end-1)
	}
	return last
}

// span is the offsets from..end-1.
func span(from, end int64) []int64 {
	s := []int64{}
	for off := from; off < end; off++ {
		s = append(s, off)
	}
	return s
}

// changed tells await to look again.
func (g *group) changed() {
	select {
	case g.change <- struct{}{}:
	default:
	}
}

// await waits 30 s at most for cond, looking again at each change.
func (g *group) await(what string, cond func() bool) {
	g.t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-g.change:
		case <-deadline:
			g.t.Fatalf("waited 30 s for %s", what)
		}
	}
}
