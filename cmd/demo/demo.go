package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// recoverBound bounds the wait for the respawned pchannels to recover.
const recoverBound = 10 * time.Second

// liveBound is I3's bound: once the catalog is healthy, persisted reaches
// the minimum within one backoff cap plus one save. A save is bounded by
// the save timeout, and may wait the minimum interval between saves first.
func (c config) liveBound() time.Duration {
	return actors.DefaultBackoff().Max + actors.DefaultSaveTimeout + c.minSaveInterval
}

// demo runs the phases: run on a faulty catalog, heal it and wait for the
// persisted checkpoints to catch up, stop gracefully, reopen the catalog
// and respawn, then check everything observed.
type demo struct {
	cfg    config
	logger *zap.Logger
	out    io.Writer // serialised: the printer and the main goroutine share it
	stdout io.Writer // the terminal of the live view
	stdin  io.Reader
	store  store
	live   bool
	intr   *interrupter
	began  time.Time
}

func (d *demo) run(ctx context.Context) (int, error) {
	d.began = time.Now()
	names := make([]string, d.cfg.pchannels)
	for i := range names {
		names[i] = fmt.Sprintf("p%d", i)
	}
	ev := &evidence{names: names, restart: make(map[string]restartView, len(names)), stall: d.cfg.stall}
	if st := d.cfg.stall; st != nil {
		ev.stallFrom, ev.stallAfter = d.began.Add(st.start), d.cfg.stallAfter
	}
	pr := newPrinter(d.out, d.began, d.cfg.sample, d.cfg.width)
	// Cancelling ctx (Ctrl-C) only ends the simulation early: the stop, the
	// restart and the checks still run.
	bg := context.WithoutCancel(ctx)
	var errs []error

	var mopts []metrics.Option
	if d.cfg.metricsLabel {
		mopts = append(mopts, metrics.WithPChannelLabel())
	}
	collector, err := metrics.New(mopts...)
	if err != nil {
		return exitSetup, err
	}
	var metricsURL string
	if d.cfg.metricsAddr != "" {
		srv, err := serveMetrics(d.cfg.metricsAddr, collector)
		if err != nil {
			return exitSetup, err
		}
		defer func() { _ = srv.stop() }()
		metricsURL = srv.url
	}

	// Run.
	raw, err := d.store.open(bg)
	if err != nil {
		return exitSetup, err
	}
	ev.floor, err = loadAll(bg, raw)
	if err != nil {
		_ = raw.Close()
		return exitSetup, fmt.Errorf("read %s: %w", d.store.describe(), explain(d.store, err))
	}
	catalog := newFaultyCatalog(raw, d.cfg)
	sims := make(map[string]*simulator, len(names))
	spawn := make(map[string]map[string]wal.MessageID, len(names))
	for i, name := range names {
		var base wal.KafkaID
		if stored := ev.floor[name]; stored != nil {
			id, ok := stored.(wal.KafkaID)
			if !ok {
				_ = catalog.Close()
				return exitSetup, fmt.Errorf("%s holds a %s checkpoint for %s; the demo uses kafka IDs", d.store.describe(), stored.WALName(), name)
			}
			base = id
		}
		sims[name] = newSimulator(name, d.cfg, base, d.cfg.seed+int64(i))
		if st := d.cfg.stall; st != nil && st.pchannel == name {
			if err := st.checkRoom(base, d.cfg.tick()); err != nil {
				_ = catalog.Close()
				return exitSetup, err
			}
			sims[name].makeLaggard(st.vchannel)
		}
		spawn[name] = sims[name].checkpoints()
	}
	header := d.header(ev.floor, metricsURL)
	rec := newRecord(names)
	tl := newTimeline(d.began, names)
	vchannels, minima := make(map[string]int, len(names)), make(map[string]wal.MessageID, len(names))
	for _, name := range names {
		tl.start(name, sims[name].initialMinimum, ev.floor[name])
		vchannels[name], minima[name] = len(spawn[name]), sims[name].initialMinimum
	}
	dash := newDashboard(d.began, d.cfg.duration, liveHeader(header), collector.Counters)
	dash.start("run", names, vchannels, minima)
	sinks := []sink{rec.observe, tl.observe}
	if d.live {
		sinks = append(sinks, dash.observe)
	} else {
		for _, h := range header {
			printLabelled(d.out, h, d.cfg.width)
		}
		printLabelled(d.out, d.sampling(), d.cfg.width)
		section(d.out, "run")
		sinks = append(sinks, pr.print)
	}
	n, err := startNode(d.cfg, d.logger, catalog, names, spawn, collector, sinks...)
	if err != nil {
		_ = catalog.Close()
		return exitSetup, err
	}
	var view *liveView
	if d.live {
		view = startLiveView(dash, d.stdout, d.stdin, d.intr.interrupt)
		d.intr.setHooks(dash.setInterrupted, view.kill)
	} else {
		d.intr.setHooks(func() {
			printLabelled(d.out, "interrupted: the run ends now; stopping gracefully (Ctrl-C again exits at once)", d.cfg.width)
		}, nil)
	}
	outs := startOutages(catalog, d.began, d.cfg.outages, func(o *catalogOutage) { n.system.EventStream.Publish(o) })
	d.simulate(ctx, n, sims)

	// Heal: no more updates, no more faults. I3 says persisted catches up.
	spans := outs.end()
	catalog.heal()
	healAt := time.Since(d.began)
	if st := d.cfg.stall; st != nil {
		ev.stallUntil = d.began.Add(healAt)
		if st.length > 0 && st.start+st.length < healAt {
			ev.stallUntil = ev.stallFrom.Add(st.length)
		}
	}
	dash.setPhase("no more updates or faults: catching up")
	if !d.live {
		section(d.out, "updates stop, faults end: persisted must reach the minimum (I3)")
	}
	states, settled, err := n.waitAll(bg, d.cfg.liveBound(), caughtUp)
	errs = append(errs, err)
	stopAt := time.Since(d.began)
	dash.setPhase("graceful stop: flushing")
	if !d.live {
		section(d.out, "graceful stop (Poison flushes the pending checkpoint)")
	}
	errs = append(errs, n.stop())
	dash.setPhase("stopped") // the live view's last frame
	if view != nil {
		errs = append(errs, view.stop())
		d.intr.setHooks(nil, nil)
	}
	tl.outages, tl.healAt, tl.stopAt, tl.stallAfter = spans, healAt, stopAt, d.cfg.stallAfter
	ev.blocked += int64(n.feed.Blocked())
	ev.phases = append(ev.phases, phase{name: "run", sims: sims, rec: rec})
	ev.live = measureLiveness(d.cfg, tl)
	saves, failures := catalog.saves.Load(), catalog.saveFailures.Load()
	errs = append(errs, catalog.Close())

	section(d.out, "after the run")
	if ctx.Err() != nil { // Ctrl-C
		ev.interrupted = true
		printLabelled(d.out, fmt.Sprintf("interrupted after %v of %v", healAt.Round(time.Millisecond), d.cfg.duration), d.cfg.width)
	}
	if states != nil {
		d.atomically(func(w io.Writer) { printTable(w, states, rec) })
	}
	fmt.Fprintf(d.out, "catalog: %s attempted, %d failed\nminimum advances: %d published", count(saves, "save"), failures, rec.advances)
	if !d.live {
		fmt.Fprintf(d.out, ", %d printed", pr.shown)
	}
	fmt.Fprintln(d.out)
	if !settled {
		printLabelled(d.out, fmt.Sprintf("note: persisted had not caught up with the minimum %v after the faults ended; the graceful stop tried to flush it", d.cfg.liveBound()), d.cfg.width)
	}
	if d.cfg.chart != "" {
		title := fmt.Sprintf("lowwater demo, seed %d: %s", d.cfg.seed, d.cfg.describeFaults())
		if err := writeChart(d.cfg.chart, title, tl); err != nil {
			errs = append(errs, fmt.Errorf("chart: %w", err))
		} else {
			printLabelled(d.out, "chart: wrote "+d.cfg.chart, d.cfg.width)
		}
	}

	// Restart on the same catalog.
	section(d.out, "restart: reopen the catalog, respawn with the vchannels' checkpoints")
	raw, err = d.store.open(bg)
	if err != nil {
		return exitSetup, fmt.Errorf("reopen: %w", err)
	}
	storedNow, err := loadAll(bg, raw)
	if err != nil {
		_ = raw.Close()
		return exitSetup, fmt.Errorf("reread %s: %w", d.store.describe(), explain(d.store, err))
	}
	sims2 := make(map[string]*simulator, len(names))
	for _, name := range names {
		sims2[name] = sims[name].resumed()
		spawn[name] = sims2[name].checkpoints()
	}
	rec2 := newRecord(names)
	n, err = startNode(d.cfg, d.logger, raw, names, spawn, collector, rec2.observe, pr.print)
	if err != nil {
		_ = raw.Close()
		return exitSetup, err
	}
	states, _, err = n.waitAll(bg, recoverBound, recovered)
	errs = append(errs, err)
	errs = append(errs, n.stop())
	ev.blocked += int64(n.feed.Blocked())
	ev.phases = append(ev.phases, phase{name: "restart", sims: sims2, rec: rec2})
	ev.final, err = loadAll(bg, raw)
	errs = append(errs, err, raw.Close())

	for i, name := range names {
		r := restartView{
			want:      rec.pchannels[name].lastPersisted(ev.floor[name]),
			storedNow: storedNow[name],
			spawnMin:  sims2[name].initialMinimum,
			stopped:   rec.pchannels[name].stopped,
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
	printChecks(d.out, checks, d.cfg.width)
	if ev.blocked > 0 {
		printLabelled(d.out, fmt.Sprintf("note: %s found the feed's buffer full and slowed their actor", count(ev.blocked, "event")), d.cfg.width)
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
	switch {
	case code != exitOK:
		verdict = "FAIL"
	case ev.interrupted:
		// Said apart: a script, or make, took a run cut short by Ctrl-C
		// for a whole one.
		verdict = "PASS on a run cut short by Ctrl-C"
		code = exitInterrupted
	}
	fmt.Fprintf(d.out, "\n%s in %v\n", verdict, time.Since(d.began).Round(time.Millisecond))
	return code, err
}

// measureLiveness measures I3 on the timeline: after each outage that
// ended during the run, and after the faults ended for good.
func measureLiveness(cfg config, tl *timeline) []liveness {
	bound := cfg.liveBound()
	var out []liveness
	for i, s := range tl.outages {
		if s.to >= tl.healAt {
			continue // it ended with the faults: measured below
		}
		why := ""
		switch {
		case cfg.failRate > 0:
			why = "random save failures go on after it"
		case cfg.latency >= actors.DefaultSaveTimeout:
			why = "every save times out"
		}
		for _, name := range tl.names {
			took, ok := tl.tracks[name].reach(s.to)
			l := liveness{when: fmt.Sprintf("after outage %d", i+1), pchannel: name, took: took, reached: ok, bound: bound, why: why}
			if !ok && tl.stopAt-s.to < bound {
				l.why = "the run ended first"
			}
			out = append(out, l)
		}
	}
	for _, name := range tl.names {
		took, ok := tl.tracks[name].reachFinal(tl.healAt)
		out = append(out, liveness{when: "after the faults ended", pchannel: name, took: took, reached: ok, bound: bound})
	}
	return out
}

// header is the configuration in a few lines, for the plain output and the
// live view.
func (d *demo) header(floor map[string]wal.MessageID, metricsURL string) []string {
	c := d.cfg
	lines := []string{
		fmt.Sprintf("lowwater demo: %s x %d kafka vchannels, %v, %.0f rounds/s, seed"+keep+"%d",
			count(c.pchannels, "pchannel"), c.vchannels, c.duration, c.rate, c.seed),
		"faults: " + c.describeFaults(),
	}
	cat := "catalog: " + d.store.describe()
	if len(floor) > 0 {
		cat += fmt.Sprintf(" (holds %s of an earlier run, the floor)", count(len(floor), "checkpoint"))
	}
	lines = append(lines, cat)
	if metricsURL != "" {
		lines = append(lines, "metrics: "+metricsURL)
	}
	return lines
}

// liveHeader is header for the live view, whose title line names the demo
// already.
func liveHeader(header []string) []string {
	h := slices.Clone(header)
	h[0] = strings.TrimPrefix(h[0], "lowwater demo: ")
	for i := range h {
		h[i] = strings.ReplaceAll(h[i], keep, " ") // cut to fit, not wrapped
	}
	return h
}

func (d *demo) sampling() string {
	if d.cfg.sample == 0 {
		return "events: every one"
	}
	return fmt.Sprintf("events: all but MinimumAdvanced, which is sampled (at most one per pchannel per %v)", d.cfg.sample)
}

// simulate drives every pchannel from its own goroutine until the duration
// passes or ctx is done, and returns when all have stopped sending.
func (d *demo) simulate(ctx context.Context, n *node, sims map[string]*simulator) {
	ctx, cancel := context.WithDeadline(ctx, d.began.Add(d.cfg.duration))
	defer cancel()
	var wg sync.WaitGroup
	for name, sim := range maps.All(sims) {
		wg.Go(func() {
			tick := time.NewTicker(d.cfg.tick())
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-tick.C:
					sim.frozen = d.cfg.stall != nil && sim.keep != "" && d.cfg.stall.frozen(now.Sub(d.began))
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

// loadAll reads the whole catalog with a deadline, so that a store that
// cannot be reached fails the demo instead of hanging it.
func loadAll(ctx context.Context, c persistence.Catalog) (map[string]wal.MessageID, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.LoadAll(ctx)
}
