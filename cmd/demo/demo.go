package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

const (
	// settleBound bounds the wait, after the simulation, for every pchannel
	// to persist its minimum; the graceful stop flushes whatever is left.
	settleBound = 5 * time.Second
	// recoverBound bounds the wait for the respawned pchannels to recover.
	recoverBound = 10 * time.Second
)

// demo runs the phases: run on a faulty catalog, stop gracefully, reopen
// the file and respawn, then check everything observed.
type demo struct {
	cfg    config
	logger *zap.Logger
	out    io.Writer
	path   string
	began  time.Time
}

func (d *demo) run(ctx context.Context) (int, error) {
	d.began = time.Now()
	names := make([]string, d.cfg.pchannels)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	ev := &evidence{names: names, restart: make(map[string]restartView, len(names))}
	pr := newPrinter(d.out, d.began, d.cfg.sample)
	// Cancelling ctx (Ctrl-C) only ends the simulation early: the stop, the
	// restart and the checks still run.
	bg := context.WithoutCancel(ctx)
	var errs []error

	// Run.
	store, catalog, err := d.open()
	if err != nil {
		return exitSetup, err
	}
	ev.floor, err = store.LoadAll(bg)
	if err != nil {
		_ = catalog.Close()
		return exitSetup, fmt.Errorf("read %s: %w", d.path, err)
	}
	sims := make(map[string]*simulator, len(names))
	spawn := make(map[string]map[string]wal.MessageID, len(names))
	for i, name := range names {
		var base wal.KafkaID
		if stored := ev.floor[name]; stored != nil {
			id, ok := stored.(wal.KafkaID)
			if !ok {
				_ = catalog.Close()
				return exitSetup, fmt.Errorf("%s holds a %s checkpoint for %s; the demo uses kafka IDs", d.path, stored.WALName(), name)
			}
			base = id
		}
		sims[name] = newSimulator(name, d.cfg.vchannels, base, d.cfg.seed+int64(i))
		spawn[name] = sims[name].checkpoints()
	}
	d.header(ev.floor)
	rec := newRecord(names)
	n, err := startNode(d.cfg, d.logger, catalog, names, spawn, rec.observe, pr.print)
	if err != nil {
		_ = catalog.Close()
		return exitSetup, err
	}
	d.simulate(ctx, n, sims)
	states, settled, err := n.waitAll(bg, settleBound, caughtUp)
	errs = append(errs, err)
	section(d.out, "graceful stop (Poison flushes the pending checkpoint)")
	errs = append(errs, n.stop())
	ev.blocked += n.feed.blocked.Load()
	ev.phases = append(ev.phases, phase{name: "run", sims: sims, rec: rec})
	saves, failures := catalog.Calls(faultinject.OpSave), catalog.Failures(faultinject.OpSave)
	errs = append(errs, catalog.Close())

	section(d.out, "after the run")
	if states != nil {
		d.atomically(func(w io.Writer) { printTable(w, states, rec) })
	}
	fmt.Fprintf(d.out, "catalog: %d saves attempted, %d failed; minimum advances: %d published, %d printed\n",
		saves, failures, rec.advances, pr.shown)
	if !settled {
		fmt.Fprintf(d.out, "note: persisted had not caught up with the minimum %v after the run; the graceful stop tried to flush it\n", settleBound)
	}

	// Restart on the same file.
	section(d.out, "restart: reopen "+d.path+", respawn with the vchannels' last checkpoints")
	store, catalog, err = d.open()
	if err != nil {
		return exitSetup, fmt.Errorf("reopen: %w", err)
	}
	inFile, err := store.LoadAll(bg)
	if err != nil {
		_ = catalog.Close()
		return exitSetup, fmt.Errorf("reread %s: %w", d.path, err)
	}
	sims2 := make(map[string]*simulator, len(names))
	for _, name := range names {
		sims2[name] = sims[name].resumed()
		spawn[name] = sims2[name].checkpoints()
	}
	rec2 := newRecord(names)
	n, err = startNode(d.cfg, d.logger, catalog, names, spawn, rec2.observe, pr.print)
	if err != nil {
		_ = catalog.Close()
		return exitSetup, err
	}
	states, _, err = n.waitAll(bg, recoverBound, recovered)
	errs = append(errs, err)
	errs = append(errs, n.stop())
	ev.blocked += n.feed.blocked.Load()
	ev.phases = append(ev.phases, phase{name: "restart", sims: sims2, rec: rec2})
	ev.final, err = store.LoadAll(bg)
	errs = append(errs, err, catalog.Close())

	for i, name := range names {
		r := restartView{
			want:     rec.pchannels[name].lastPersisted(ev.floor[name]),
			inFile:   inFile[name],
			spawnMin: sims2[name].initialMinimum,
			stopped:  rec.pchannels[name].stopped,
		}
		if states != nil {
			r.start, r.recovered = states[i].StartMessageID, states[i].Recovered
		}
		if e := rec2.pchannels[name].recovered; e != nil {
			r.fromCatalog = e.FromCatalog
		}
		ev.restart[name] = r
	}
	section(d.out, "recovered start message IDs")
	d.atomically(func(w io.Writer) { printRestart(w, names, ev.restart) })

	section(d.out, "checks")
	checks := verify(ev)
	printChecks(d.out, checks)
	if ev.blocked > 0 {
		fmt.Fprintf(d.out, "note: %d events found the feed's buffer full and slowed their actor\n", ev.blocked)
	}
	code := exitOK
	for _, c := range checks {
		if !c.ok() {
			code = exitViolated
		}
	}
	err = errors.Join(errs...)
	if err != nil {
		code = exitViolated
	}
	verdict := "PASS"
	if code != exitOK {
		verdict = "FAIL"
	}
	fmt.Fprintf(d.out, "\n%s in %v\n", verdict, time.Since(d.began).Round(time.Millisecond))
	return code, err
}

// open opens the bbolt file and wraps it in the fault injector; the demo
// reads through store, the actors save through catalog. Closing catalog
// closes store.
func (d *demo) open() (*persistence.Bolt, *faultinject.Catalog, error) {
	store, err := persistence.OpenBolt(d.path)
	if err != nil {
		return nil, nil, err
	}
	catalog := faultinject.Wrap(store,
		faultinject.WithSaveFailureRate(d.cfg.failRate),
		faultinject.WithSeed(d.cfg.seed),
	)
	return store, catalog, nil
}

func (d *demo) header(floor map[string]wal.MessageID) {
	c := d.cfg
	fmt.Fprintf(d.out, "lowwater demo: %d pchannels x %d vchannels for %v, %.0f%% of saves fail, seed %d\n",
		c.pchannels, c.vchannels, c.duration, 100*c.failRate, c.seed)
	fmt.Fprintf(d.out, "catalog: bbolt file %s", d.path)
	if len(floor) > 0 {
		fmt.Fprintf(d.out, " (holds %d checkpoints of an earlier run: they are the floor)", len(floor))
	}
	fmt.Fprintln(d.out)
	sample := "every one"
	if c.sample > 0 {
		sample = fmt.Sprintf("at most one per pchannel per %v", c.sample)
	}
	fmt.Fprintf(d.out, "events: all but MinimumAdvanced, which is sampled (%s)\n", sample)
	section(d.out, "run")
}

// simulate drives every pchannel from its own goroutine until the duration
// passes or ctx is done, and returns when all have stopped sending.
func (d *demo) simulate(ctx context.Context, n *node, sims map[string]*simulator) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	for name, sim := range sims {
		wg.Go(func() {
			tick := time.NewTicker(d.cfg.tick)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					for _, cmd := range sim.round() {
						n.send(name, cmd)
					}
				}
			}
		})
	}
	wg.Wait()
}

// atomically writes what print writes in one piece, so that no event line
// lands inside a table.
func (d *demo) atomically(print func(io.Writer)) {
	var b bytes.Buffer
	print(&b)
	_, _ = d.out.Write(b.Bytes())
}
