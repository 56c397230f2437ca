package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// The simulated consumer of each pchannel.
const (
	vchannels   = 3
	saveTimeout = 500 * time.Millisecond
	// maxStep is the most a vchannel advances per tick.
	maxStep = 3
)

// nodeConfig is a node's command line, as the parent writes it.
type nodeConfig struct {
	name      string
	endpoints []string
	prefix    string
	ttl       int // session TTL, in seconds
	pchannels []string
	prefer    []string
	tick      time.Duration
}

// clientConfig is the etcd client of the parent and the nodes. gRPC's
// reconnection backoff is capped at 1 s (its default grows to 120 s), so
// that a client notices within a second that etcd is back.
func clientConfig(endpoints []string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		})},
	}
}

// node is one demo process: one etcd session, the pchannels it owns, an
// actor and a simulated consumer for each.
type node struct {
	cfg     nodeConfig
	out     *emitter
	batcher *etcdcatalog.Batcher
	session *concurrency.Session
	sys     *actor.ActorSystem

	mu     sync.Mutex
	owned  map[string]*pchannel
	closed bool

	wg sync.WaitGroup // feeders and pending Owns
}

// pchannel is one owned pchannel on this node.
type pchannel struct {
	name      string
	owned     *etcdcatalog.Owned
	pid       *actor.PID
	recovered chan wal.MessageID // the start, once
	stopped   chan struct{}      // closed on the actor's Stopped
	stopOnce  sync.Once
}

// runNode runs a node until its input ends, says stop, or ctx ends; one
// that ends so while the node starts (etcd silent, say) is a stop too,
// not a failure.
func runNode(ctx context.Context, cfg nodeConfig, stdin io.Reader, stdout io.Writer) (err error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// The parent's commands, a line each: the goroutine ends with the
	// input, which the parent closes or the process's exit does.
	standby := make(chan struct{})
	go func() {
		defer stop()
		told := false
		for sc := bufio.NewScanner(stdin); sc.Scan(); {
			switch cmd := sc.Text(); {
			case cmd == cmdStop:
				return
			case cmd == cmdStandby && !told:
				told = true
				close(standby)
			}
		}
	}()
	defer func() {
		if ctx.Err() != nil {
			err = nil
		}
	}()

	cli, err := clientv3.New(clientConfig(cfg.endpoints))
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	cat, err := etcdcatalog.New(cli, etcdcatalog.WithPrefix(cfg.prefix), etcdcatalog.WithHolder(cfg.name))
	if err != nil {
		return err
	}
	defer cat.Close()
	// The node owns its pchannels through a Batcher: their saves share
	// transactions, each fenced by its own owner. A transaction is bounded
	// as the saves it carries are: one on an etcd that stopped answering
	// would otherwise hold Close for its own 5 s.
	batcher, err := etcdcatalog.NewBatcher(cat, etcdcatalog.WithBatchTimeout(saveTimeout))
	if err != nil {
		return err
	}
	defer batcher.Close() // after every Owned is closed (shutdown), and closes cat
	// A stop while the lease is granted ends the wait for it, which etcd
	// silent would hold until the parent's --timeout; once granted, the
	// session outlives the stop, whose flush needs it.
	session, err := cat.NewSession(ctx, cfg.ttl)
	if err != nil {
		return fmt.Errorf("etcd session: %w", err)
	}
	var leaseLeft bool // shutdown left the lease to expire
	defer func() {
		if !leaseLeft {
			// Within a deadline of its own, where session.Close waits up
			// to the TTL on a member that answers nothing.
			ctx, cancel := context.WithTimeout(context.Background(), etcdcatalog.ReleaseTimeout)
			defer cancel()
			_ = cat.CloseSession(ctx, session)
		}
	}()

	quiet := actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) })
	n := &node{
		cfg:     cfg,
		out:     newEmitter(stdout),
		batcher: batcher,
		session: session,
		sys:     actor.NewActorSystem(quiet),
		owned:   make(map[string]*pchannel),
	}
	defer n.out.close()
	sub := n.sys.EventStream.Subscribe(n.observe)
	defer func() {
		n.sys.EventStream.Unsubscribe(sub)
		n.sys.Shutdown()
	}()

	// Own what this node prefers first, so that the two nodes split the
	// pchannels; then, on the parent's word, wait for the others.
	ownCtx, stopOwning := context.WithCancel(ctx)
	defer stopOwning()
	for _, p := range cfg.prefer {
		o, err := batcher.Own(ownCtx, p, session)
		if err != nil {
			leaseLeft = n.shutdown(stopOwning)
			return fmt.Errorf("own %s: %w", p, err)
		}
		n.start(p, o)
	}
	n.emit(line{Ev: evReady, PID: os.Getpid()})

	for {
		select {
		case <-ctx.Done():
			leaseLeft = n.shutdown(stopOwning)
			return nil
		case <-standby:
			standby = nil
			for _, p := range cfg.pchannels {
				if !contains(cfg.prefer, p) {
					n.wg.Go(func() { n.ownWhenFree(ownCtx, p) })
				}
			}
		}
	}
}

// ownWhenFree blocks in Own until the pchannel's owner is gone (its session
// lease expired, say), then takes it over.
func (n *node) ownWhenFree(ctx context.Context, p string) {
	o, err := n.batcher.Own(ctx, p, n.session)
	if err != nil {
		if ctx.Err() == nil {
			n.emit(line{Ev: evFailed, PCh: p, Err: "own: " + err.Error()})
		}
		return
	}
	n.start(p, o)
}

// start spawns the actor of an owned pchannel and its simulated consumer.
func (n *node) start(p string, o *etcdcatalog.Owned) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		_ = o.Close()
		return
	}
	n.emit(line{Ev: evOwned, PCh: p, Term: o.Term()})
	pc := &pchannel{name: p, owned: o, recovered: make(chan wal.MessageID, 1), stopped: make(chan struct{})}
	n.owned[p] = pc
	props, err := actors.NewProps(p, wal.Kafka, o, actors.WithOwnership(o.Context()), actors.WithSaveTimeout(saveTimeout))
	if err != nil {
		n.emit(line{Ev: evFailed, PCh: p, Err: err.Error()})
		return
	}
	pc.pid = n.sys.Root.Spawn(props)
	n.wg.Go(func() { n.feed(pc) })
}

// feed is the consumer of one pchannel: from the recovered start, every
// tick each vchannel processes a few more messages.
func (n *node) feed(pc *pchannel) {
	var start wal.MessageID
	select {
	case start = <-pc.recovered:
	case <-pc.stopped:
		return
	}
	pos := make([]int64, vchannels)
	names := make([]string, vchannels)
	for i := range pos {
		if start != nil {
			pos[i] = int64(start.(wal.KafkaID))
		}
		names[i] = fmt.Sprintf("%s-v%d", pc.name, i)
		n.sys.Root.Send(pc.pid, &messages.AddVChannel{VChannel: names[i], Checkpoint: wal.KafkaID(pos[i])})
	}
	tick := time.NewTicker(n.cfg.tick)
	defer tick.Stop()
	for {
		select {
		case <-pc.stopped:
			return
		case <-tick.C:
		}
		batch := &messages.UpdateBatch{}
		for i := range pos {
			if step := rand.Int64N(maxStep + 1); step > 0 {
				pos[i] += step
				batch.Updates = append(batch.Updates, messages.VChannelCheckpoint{VChannel: names[i], Checkpoint: wal.KafkaID(pos[i])})
			}
		}
		if len(batch.Updates) > 0 {
			n.sys.Root.Send(pc.pid, batch)
		}
	}
}

// observe turns the actors' events into lines. It runs on their
// goroutines: it only enqueues.
func (n *node) observe(e any) {
	ev, ok := e.(messages.Event)
	if !ok {
		return
	}
	h := ev.EventHeader()
	l := line{PCh: h.PChannel, At: h.At.UnixNano()}
	switch e := ev.(type) {
	case *messages.Recovered:
		if pc := n.lookup(h.PChannel); pc != nil {
			select {
			case pc.recovered <- e.StartMessageID:
			default:
			}
		}
		l.Ev, l.Value, l.FromCatalog = evRecovered, offset(e.StartMessageID), e.FromCatalog
	case *messages.CheckpointPersisted:
		l.Ev, l.Value = evPersisted, offset(e.Value)
	case *messages.PersistFailed:
		l.Ev, l.Value, l.Err = evFailed, offset(e.Value), e.Err.Error()
	case *messages.OwnershipLost:
		l.Ev, l.Err = evLost, fmt.Sprint(e.Cause)
	case *messages.Stopped:
		if pc := n.lookup(h.PChannel); pc != nil {
			pc.stopOnce.Do(func() { close(pc.stopped) })
		}
		l.Ev, l.Value = evStopped, offset(e.LastPersisted)
	default:
		return
	}
	n.emit(l)
}

func (n *node) lookup(p string) *pchannel {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.owned[p]
}

func (n *node) emit(l line) {
	l.Node = n.cfg.name
	n.out.emit(l)
}

// shutdown stops waiting for ownerships, stops every actor gracefully (each
// flushes its pending checkpoint), then releases the ownerships so that
// another node may take them at once. The actors stop together and the
// ownerships are released together, within the session's TTL: with etcd
// silent, a release that took longer would free the pchannels no sooner
// than the lease's expiry does. Should etcd not answer every release
// within it, shutdown ends the session's keep-alives and says so (true):
// the session is left to expire, since revoking it would wait once more.
func (n *node) shutdown(stopOwning context.CancelFunc) (leaseLeft bool) {
	stopOwning()
	n.mu.Lock()
	n.closed = true
	owned := make([]*pchannel, 0, len(n.owned))
	for _, pc := range n.owned {
		owned = append(owned, pc)
	}
	n.mu.Unlock()
	var stops []*actor.Future
	for _, pc := range owned {
		if pc.pid != nil {
			stops = append(stops, n.sys.Root.PoisonFuture(pc.pid))
		}
	}
	for _, f := range stops {
		_ = f.Wait()
	}
	for _, pc := range owned {
		pc.stopOnce.Do(func() { close(pc.stopped) })
	}
	n.wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n.cfg.ttl)*time.Second)
	defer cancel()
	var releases sync.WaitGroup
	for _, pc := range owned {
		releases.Go(func() {
			if err := pc.owned.Release(ctx); err != nil {
				n.emit(line{Ev: evFailed, PCh: pc.name, Err: "release: " + err.Error()})
			}
		})
	}
	releases.Wait()
	if ctx.Err() != nil {
		n.session.Orphan()
		leaseLeft = true
	}
	n.emit(line{Ev: evBye})
	return leaseLeft
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
