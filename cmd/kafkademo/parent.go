package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/lowwater/lowwater/examples/kafka"
	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/internal/rundir"
	"github.com/lowwater/lowwater/wal"
)

// The two nodes.
const (
	approachLowwater = "lowwater"
	approachNaive    = "naive"
)

var approaches = []string{approachLowwater, approachNaive}

// runDirPrefix names the directories of the demo's runs, which hold the
// nodes' files, in the system's temporary directory (package rundir).
const runDirPrefix = "lowwater-kafkademo-"

func sinkPath(dir, kind string) string { return filepath.Join(dir, "sink-"+kind+".db") }
func catalogPath(dir string) string    { return filepath.Join(dir, "catalog.db") }

// demo is the parent process.
type demo struct {
	cfg     config
	cmd     command
	out     io.Writer
	stderr  io.Writer
	dir     string
	brokers string
	client  *kgo.Client

	mu       sync.Mutex
	produced produced
}

// produced holds, per partition and offset, the vchannel of the record
// there, or -1 where there is none.
type produced [][]int16

// snapshot is what the nodes left behind, read once they are dead.
type snapshot struct {
	killAfter time.Duration
	// stored is lowwater's catalog, committed the naive group's offsets,
	// per partition; 0 where nothing is stored: both resume there.
	stored, committed []int64
	sinks             map[string]map[kafka.RecordID]uint32
}

func runDemo(ctx context.Context, cfg config, cmd command, stdout, stderr io.Writer) (*summary, error) {
	began := time.Now()
	// Every partition has its list, empty when no record landed in it:
	// with few records, some get none.
	d := &demo{cfg: cfg, cmd: cmd, out: stdout, stderr: stderr, produced: make(produced, cfg.partitions)}
	dir, err := rundir.New(runDirPrefix)
	if err != nil {
		return nil, err
	}
	d.dir = dir.Path
	defer dir.Remove()
	if note := dir.SweptNote(); note != "" {
		fmt.Fprintln(stderr, "kafkademo:", note)
	}

	// The topic is new, so the catalog must hold nothing: a checkpoint of
	// an earlier run would have the nodes skip records of this one.
	if u, err := catalogurl.Parse(cfg.catalog); err == nil && u.Kind == catalogurl.Etcd {
		// Said at once, and why: the client would retry until --timeout.
		if err := etcdaccess.AnyListens(ctx, u.Endpoints); err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
	}
	left, err := d.stored(ctx)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	} else if slices.ContainsFunc(left, func(o int64) bool { return o != 0 }) {
		return nil, fmt.Errorf("--catalog %s holds checkpoints of an earlier run, or of one running now (offsets by partition: %v): give a new file or prefix, or delete that one", cfg.catalog, left)
	}

	// The cluster lives in this process and outlives every node.
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(cfg.partitions), topic))
	if err != nil {
		return nil, err
	}
	defer cluster.Close()
	d.brokers = cluster.ListenAddrs()[0]
	if d.client, err = kgo.NewClient(kgo.SeedBrokers(d.brokers), kgo.DefaultProduceTopic(topic)); err != nil {
		return nil, err
	}
	defer d.client.Close()

	fmt.Fprintf(stdout, "kafkademo: %d records, %d partitions x %d vchannels, %d kills, seed %d\n",
		cfg.records, cfg.partitions, cfg.vchannels, cfg.rounds, cfg.seed)
	fmt.Fprintf(stdout, "  kfake at %s; nodes' files in %s\n", d.brokers, d.dir)

	pctx, stopProducing := context.WithCancel(ctx)
	defer stopProducing()
	producing := make(chan error, 1)
	go func() { producing <- d.produce(pctx) }()

	rng := rand.New(rand.NewPCG(cfg.seed, 0x6b696c6c))
	var snaps []snapshot
	for range cfg.rounds {
		wait := cfg.killMin + time.Duration(rng.Int64N(int64(cfg.killMax-cfg.killMin)+1))
		s, err := d.round(ctx, wait)
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, s)
	}
	if err := <-producing; err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	ends := make([]int64, cfg.partitions)
	for p := range ends {
		ends[p] = int64(len(d.produced[p]))
	}
	final, finished, err := d.finish(ctx, ends)
	if err != nil {
		return nil, err
	}
	sum := evaluate(d.produced, snaps, final, ends, finished)
	sum.print(stdout, cfg)
	fmt.Fprintf(stdout, "took %.1fs\n", time.Since(began).Seconds())
	return sum, nil
}

// produce writes the records with keys drawn from the seed, spread over
// produceFor, and notes where each landed.
func (d *demo) produce(ctx context.Context) error {
	const tick = 20 * time.Millisecond
	steps := max(1, int(d.cfg.produceFor/tick))
	rng := rand.New(rand.NewPCG(d.cfg.seed, 0x6b657973))
	t := time.NewTicker(tick)
	defer t.Stop()
	for i := range steps {
		n := d.cfg.records*(i+1)/steps - d.cfg.records*i/steps
		batch := make([]*kgo.Record, n)
		for j := range batch {
			batch[j] = &kgo.Record{Key: fmt.Appendf(nil, "user-%04d", rng.IntN(4096)), Value: []byte("event")}
		}
		res := d.client.ProduceSync(ctx, batch...)
		if err := res.FirstErr(); err != nil {
			return err
		}
		d.mu.Lock()
		for _, r := range res {
			d.note(r.Record)
		}
		d.mu.Unlock()
		if i < steps-1 {
			select {
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

func (d *demo) note(r *kgo.Record) {
	for len(d.produced) <= int(r.Partition) {
		d.produced = append(d.produced, nil)
	}
	ps := d.produced[r.Partition]
	for int64(len(ps)) <= r.Offset {
		ps = append(ps, -1)
	}
	ps[r.Offset] = int16(kafka.VChannelOf(r.Key, d.cfg.vchannels))
	d.produced[r.Partition] = ps
}

// round starts both nodes, SIGKILLs them wait after both are ready, and
// reads what they left.
func (d *demo) round(ctx context.Context, wait time.Duration) (snapshot, error) {
	procs := make([]*proc, 0, len(approaches))
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	for _, kind := range approaches {
		p, err := d.start(kind, nil)
		if err != nil {
			return snapshot{}, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := p.await(ctx, lineReady, d.cfg.timeout); err != nil {
			return snapshot{}, err
		}
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return snapshot{}, ctx.Err()
	}
	for _, p := range procs {
		p.kill()
	}
	s, err := d.snapshot(ctx)
	s.killAfter = wait
	return s, err
}

// finish runs both nodes to the end of the topic.
func (d *demo) finish(ctx context.Context, ends []int64) (s snapshot, finished map[string]bool, err error) {
	finished = make(map[string]bool)
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	for _, kind := range approaches {
		p, err := d.start(kind, ends)
		if err != nil {
			return s, nil, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		err := p.await(ctx, lineDone, d.cfg.timeout)
		switch {
		case ctx.Err() != nil:
			// Interrupted: the caller says so, once.
			return s, nil, ctx.Err()
		case err != nil:
			// A node that did not finish is a finding of the checks.
			fmt.Fprintf(d.stderr, "kafkademo: %v\n", err)
		case p.exit() == nil:
			finished[p.kind] = true
		}
		p.kill()
	}
	s, err = d.snapshot(ctx)
	return s, finished, err
}

// snapshot reads the nodes' files and the group's offsets; the nodes are
// dead, so no lock stands in the way.
func (d *demo) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{sinks: make(map[string]map[kafka.RecordID]uint32)}
	for _, kind := range approaches {
		counts, err := kafka.ReadSink(sinkPath(d.dir, kind))
		if err != nil {
			return s, err
		}
		s.sinks[kind] = counts
	}
	var err error
	if s.stored, err = d.stored(ctx); err != nil {
		return s, err
	}
	s.committed, err = d.committed(ctx)
	return s, err
}

// stored reads the checkpoints the catalog holds, within --timeout: an
// etcd that stops answering mid-run ends the run, said as such, where the
// read waited for it for good.
func (d *demo) stored(ctx context.Context) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
	defer cancel()
	cat, err := openCatalog(d.cfg.catalog, d.dir)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	all, err := cat.LoadAll(ctx)
	if err != nil {
		return nil, d.explain(err)
	}
	out := make([]int64, d.cfg.partitions)
	for p := range out {
		if id, ok := all[kafka.PChannelName(topic, int32(p))].(wal.KafkaID); ok {
			out[p] = int64(id)
		}
	}
	return out, nil
}

// explain names --timeout in err, a failure to read the catalog in time,
// and adds for etcd what a probe of each endpoint finds (etcdaccess, as
// the lowwater tool and the demo do): the client's own error says only
// that the deadline passed, whether etcd is stopped, without a quorum or
// wants TLS.
func (d *demo) explain(err error) error {
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	err = fmt.Errorf("no answer within --timeout %v: %w", d.cfg.timeout, err)
	if u, perr := catalogurl.Parse(d.cfg.catalog); perr == nil && u.Kind == catalogurl.Etcd {
		if why := (etcdaccess.Access{}).Diagnose(u.Endpoints); why != "" {
			err = fmt.Errorf("%w; %s", err, why)
		}
	}
	return err
}

// committed reads the naive group's offsets from the cluster.
func (d *demo) committed(ctx context.Context) ([]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = naiveGroup
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range d.cfg.partitions {
		rt.Partitions = append(rt.Partitions, int32(p))
	}
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, d.cfg.timeout)
	defer cancel()
	resp, err := req.RequestWith(rctx, d.client)
	if err != nil {
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("offset fetch: %w", err)
	}
	out := make([]int64, d.cfg.partitions)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if t.Topic == topic && p.Partition >= 0 && int(p.Partition) < len(out) && p.Offset > 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// proc is one node process.
type proc struct {
	kind  string
	cmd   *exec.Cmd
	lines chan string
	eof   chan struct{} // closed when its output ended
	log   *tail
	once  sync.Once
	err   error
}

func (d *demo) start(kind string, until []int64) (*proc, error) {
	args := []string{"--node", kind, "--brokers", d.brokers, "--dir", d.dir,
		"--partitions", strconv.Itoa(d.cfg.partitions), "--vchannels", strconv.Itoa(d.cfg.vchannels),
		"--seed", strconv.FormatUint(d.cfg.seed, 10), "--autocommit", d.cfg.autocommit.String(),
		"--catalog", d.cfg.catalog}
	if d.cfg.verbose {
		args = append(args, "--verbose")
	}
	if until != nil {
		s := make([]string, len(until))
		for i, u := range until {
			s[i] = strconv.FormatInt(u, 10)
		}
		args = append(args, "--until", strings.Join(s, ","))
	}
	p := &proc{kind: kind, cmd: d.cmd(args), lines: make(chan string, 16), eof: make(chan struct{}), log: &tail{}}
	var stderr io.Writer = p.log
	if d.cfg.verbose {
		stderr = io.MultiWriter(p.log, d.stderr)
	}
	p.cmd.Stderr = stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// Held open until the node is reaped (Wait closes it): if this process
	// dies first, the node sees its input end and stops.
	if _, err := p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s node: %w", kind, err)
	}
	go func() {
		defer close(p.eof)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody listens for more than the next line
			}
		}
	}()
	return p, nil
}

// await waits for the node to print want.
func (p *proc) await(ctx context.Context, want string, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l := <-p.lines:
			if l == want {
				return nil
			}
		case <-p.eof:
			// Its last lines may still wait in the channel.
			for {
				select {
				case l := <-p.lines:
					if l == want {
						return nil
					}
					continue
				default:
				}
				return fmt.Errorf("%s node exited before %q: %v\n%s", p.kind, want, p.exit(), p.log)
			}
		case <-t.C:
			return fmt.Errorf("%s node: no %q within --timeout %v\n%s", p.kind, want, timeout, p.log)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// kill SIGKILLs the node, if it still runs, and reaps it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	p.exit()
}

// exit reaps the node and returns how it ended.
func (p *proc) exit() error {
	p.once.Do(func() {
		<-p.eof
		p.err = p.cmd.Wait()
	})
	return p.err
}

// tail keeps the last 4 KiB a node wrote to standard error, for errors.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if n := len(t.b); n > 4096 {
		t.b = t.b[n-4096:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}
