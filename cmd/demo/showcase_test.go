package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/internal/testkit/promtest"
	"github.com/lowwater/lowwater/internal/testkit/syncbuf"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// testBound bounds every wait on something that must happen.
const testBound = 30 * time.Second

// started runs the demo on its own goroutine; wait returns its exit code.
type started struct {
	out, stderr syncbuf.Buffer
	code        chan int
}

func start(ctx context.Context, args ...string) *started {
	s := &started{code: make(chan int, 1)}
	go func() { s.code <- run(ctx, args, &s.out, &s.stderr) }()
	return s
}

func (s *started) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-s.code:
		return code
	case <-time.After(testBound + time.Minute):
		t.Fatalf("the demo did not end; stdout so far:\n%s", s.out.String())
		return -1
	}
}

// waitFor polls the demo's output until re matches, and returns the match.
func (s *started) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	if !assert.Eventually(t, func() bool { m = re.FindStringSubmatch(s.out.String()); return m != nil }, testBound, time.Millisecond) {
		t.Fatalf("no %q in the output:\n%s\nstderr:\n%s", re, s.out.String(), s.stderr.String())
	}
	return m
}

// scrape returns the sum of each metric's samples over its labels. It
// returns an error rather than failing: it runs inside Eventually.
func scrape(url string) (map[string]float64, error) {
	fams, err := promtest.Scrape(url)
	if err != nil {
		return nil, err
	}
	sums := make(map[string]float64)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			sums[name] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sums, nil
}

// eventually scrapes url until ok holds, and returns that scrape.
func eventually(t *testing.T, url, what string, ok func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	var last map[string]float64
	var lastErr error
	if !assert.Eventually(t, func() bool {
		m, err := scrape(url)
		if err != nil {
			lastErr = err
			return false
		}
		last = m
		return ok(m)
	}, testBound, time.Millisecond, what) {
		t.Fatalf("%s: last scrape %v, last error %v", what, last, lastErr)
	}
	return last
}

var metricsLine = regexp.MustCompile(`metrics: (http://\S+/metrics)`)

// The showcase end to end, on the in-memory catalog: an outage the chart
// shades, /metrics scraped while the values move, both chart formats, and
// the I3 check in the summary.
func TestShowcase(t *testing.T) {
	dir := t.TempDir()
	svg, pngPath := filepath.Join(dir, "c.svg"), filepath.Join(dir, "c.png")
	s := start(context.Background(), "--duration=3s", "--catalog=memory", "--seed=3", "--outage=1s+500ms",
		"--metrics-addr=127.0.0.1:0", "--chart="+svg, "--view=plain")
	url := s.waitFor(t, metricsLine)[1]

	first := eventually(t, url, "a save and an update counted", func(m map[string]float64) bool {
		return m["lowwater_saves_total"] > 0 && m["lowwater_updates_total"] > 0
	})
	assert.Equal(t, 3.0, first["lowwater_pchannels"])
	eventually(t, url, "the values move", func(m map[string]float64) bool {
		return m["lowwater_updates_total"] > first["lowwater_updates_total"] && m["lowwater_saves_total"] > first["lowwater_saves_total"] &&
			m["lowwater_minimum_advances_total"] > first["lowwater_minimum_advances_total"]
	})
	eventually(t, url, "the outage fails saves", func(m map[string]float64) bool { return m["lowwater_save_failures_total"] > 0 })

	require.Equal(t, exitOK, s.wait(t), "stdout:\n%s\nstderr:\n%s", s.out.String(), s.stderr.String())
	text := s.out.String()
	assert.Contains(t, text, "catalog: in memory")
	assert.Regexp(t, `CATALOG DOWN\s+outage 1 for 500ms`, text)
	assert.Contains(t, text, "catalog up ")
	// Check lines wrap at 80 columns: read them with the wraps undone.
	flat := strings.Join(strings.Fields(text), " ")
	assert.Regexp(t, `check I3 live ok bound 15.25s; after outage 1: 3/3 caught up`, flat)
	assert.Contains(t, flat, "after the faults ended: 3/3 caught up")
	assert.Contains(t, text, "from catalog", "the restart on the same memory store finds the checkpoints")
	assert.Contains(t, text, "\nPASS in ")
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	shown := regexp.MustCompile("(?s)and the verdict a run ends with[^:]*:\n\n```\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, shown, "the README's verdict block is gone")
	assert.Equal(t, verdictShape(text), verdictShape(string(shown[1])),
		"the README's verdict is not what the demo prints: copy it from a run of make demo")
	_, err = scrape(url)
	assert.Error(t, err, "the metrics server must be gone after the demo")

	raw, err := os.ReadFile(svg)
	require.NoError(t, err)
	for _, want := range []string{"<svg", "p0  (kafka offset)", "p2  (kafka offset)", "persisted checkpoint", "minimum over the vchannels", "catalog down", "seconds since the demo started"} {
		assert.Contains(t, string(raw), want)
	}

	// The same run as a PNG, to a file in the bbolt flavour.
	s = start(context.Background(), "--duration=1s", "--seed=4", "--chart="+pngPath, "--data="+dir, "--pchannels=2", "--view=plain")
	require.Equal(t, exitOK, s.wait(t), "stdout:\n%s", s.out.String())
	f, err := os.Open(pngPath)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Greater(t, img.Bounds().Dx(), 800)
}

// verdictShape is the demo's verdict in text, from its "== checks" line
// on, with the wraps undone and what changes from run to run (counts,
// durations, a catch-up at once or not, why a catch-up was not held to
// the bound, a noun's plural) made alike.
func verdictShape(text string) string {
	_, verdict, _ := strings.Cut(text, "== checks\n")
	flat := strings.Join(strings.Fields(verdict), " ")
	flat = strings.ReplaceAll(flat, "caught up at once", "caught up within 0s")
	flat = regexp.MustCompile(`\(not held to the bound: [^)]*\)`).ReplaceAllString(flat, "(not held to the bound: WHY)")
	flat = regexp.MustCompile(`\d+(\.\d+)?(ms|µs|s)?`).ReplaceAllString(flat, "N")
	// "1 bad command", "5 bad commands": one shape.
	return regexp.MustCompile(`\bN ((?:bad |graceful )?[a-z]+?)s\b`).ReplaceAllString(flat, "N $1")
}

// A first Ctrl-C (ctx cancelled) ends the run early; the demo still stops
// gracefully, restarts, checks, and passes, but says the run was cut
// short, and exits 130: a script took it for a whole run.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := start(ctx, "--duration=1m", "--catalog=memory", "--seed=5", "--view=plain")
	s.waitFor(t, regexp.MustCompile(`p\d\s+persisted\s+kafka:`))
	cancel()
	require.Equal(t, exitInterrupted, s.wait(t), "stdout:\n%s", s.out.String())
	text := s.out.String()
	assert.Regexp(t, `interrupted after \S+ of 1m0s`, text)
	assert.Contains(t, text, "\nPASS on a run cut short by Ctrl-C in ")
}

// A second Ctrl-C exits at once, and the run's temporary directory goes
// with it. It used to stay behind, bbolt file and all.
func TestInterruptedTwiceRemovesItsDirectory(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type exit struct {
		code int
		left []string
	}
	exited := make(chan exit, 1)
	runDirs := func() []string {
		dirs, err := filepath.Glob(filepath.Join(tmp, "lowwater-demo-*"))
		require.NoError(t, err)
		return dirs
	}
	s := &started{code: make(chan int, 1)}
	intr := &interrupter{graceful: cancel, stderr: &s.stderr, exit: func(code int) { exited <- exit{code, runDirs()} }}
	go func() {
		s.code <- runWith(ctx, intr, []string{"--duration=1m", "--seed=5", "--view=plain"}, nil, &s.out, &s.stderr)
	}()
	s.waitFor(t, regexp.MustCompile(`p\d\s+persisted\s+kafka:`))
	require.Len(t, runDirs(), 1, "the run's directory")
	intr.interrupt()
	intr.interrupt()
	select {
	case e := <-exited:
		require.Equal(t, exitInterrupted, e.code)
		require.Empty(t, e.left, "left behind by the exit")
	case <-time.After(testBound):
		t.Fatalf("no exit after a second Ctrl-C; stderr:\n%s", s.stderr.String())
	}
	require.Contains(t, s.stderr.String(), "interrupted twice: exiting at once")
	s.wait(t) // the exit was a stub: the run ends as it can
}

// The live view, drawn into a buffer instead of a terminal: its frames show
// the table and the states, and the demo's summary follows it.
func TestLiveViewRun(t *testing.T) {
	var out, stderr syncbuf.Buffer
	code := run(context.Background(), []string{"--duration=1500ms", "--catalog=memory", "--seed=6", "--view=live", "--outage=500ms+500ms"}, &out, &stderr)
	require.Equal(t, exitOK, code, "stderr:\n%s", stderr.String())
	text := out.String()
	for _, want := range []string{"lowwater demo", "PCHANNEL", "STATE", "PERSISTED", "BEHIND FOR", "UPDATES/S", "p0", "p2", "recent events", "Ctrl-C stops gracefully", "\nPASS in "} {
		assert.Contains(t, text, want)
	}
	assert.Empty(t, stderr.String(), "the live view sends no log to the terminal")
}

func TestRenderDashboard(t *testing.T) {
	began := time.Now().Add(-2 * time.Second)
	d := newDashboard(began, 10*time.Second, []string{"faults: test"}, nil)
	d.start("run", []string{"p0", "p1", "p2"}, map[string]int{"p0": 2, "p1": 2, "p2": 2},
		map[string]wal.MessageID{"p0": wal.KafkaID(10), "p1": wal.KafkaID(20), "p2": wal.KafkaID(30)})
	at := func(ms int) messages.Header {
		return messages.Header{PChannel: "p0", At: began.Add(time.Duration(ms) * time.Millisecond)}
	}
	d.observe(&messages.Recovered{Header: at(1), StartMessageID: wal.KafkaID(10)})
	d.observe(&messages.CheckpointPersisted{Header: at(2), Value: wal.KafkaID(10)})
	d.observe(&messages.MinimumAdvanced{Header: at(3), From: wal.KafkaID(10), To: wal.KafkaID(42)})
	p1 := messages.Header{PChannel: "p1", At: began.Add(time.Second)}
	d.observe(&messages.Recovered{Header: p1, StartMessageID: wal.KafkaID(20)})
	d.observe(&messages.PersistFailed{Header: p1, Value: wal.KafkaID(20), Attempt: 1, Err: errors.New("lowwater: injected")})
	d.observe(&catalogOutage{Header: messages.Header{At: began.Add(time.Second)}, index: 1, down: true, length: 5 * time.Second})
	d.observe(&messages.PersistFailed{Header: p1, Value: wal.KafkaID(20), Attempt: 2, Err: errors.New("lowwater: boom")})
	d.observe(&messages.VChannelAdded{Header: at(4), VChannel: "late", Checkpoint: wal.KafkaID(5)})
	p2 := messages.Header{PChannel: "p2", At: began.Add(time.Second)}
	d.observe(&messages.MinimumAdvanced{Header: p2, From: wal.KafkaID(30), To: wal.KafkaID(31), Holder: "p2-v007"})
	d.observe(&messages.MinimumStalled{Header: p2, Holder: "p2-v007", Checkpoint: wal.KafkaID(31), Since: began, For: time.Second})

	frame := renderDashboard(d.view(), map[string]float64{"p0": 123}, 0, 0, false)
	for _, want := range []string{"p0", "● healthy", "kafka:5", "kafka:10", "◐ retrying", "○ recovering", "CATALOG DOWN: outage 1",
		"save failed", "added", "late at kafka:5", "123", "HOLDER", "p2-v007 STALLED 2.", "STALLED     minimum kafka:31 has not risen for 1s: p2-v007 holds it back"} {
		assert.Contains(t, frame, want)
	}
	assert.Equal(t, "late", d.view().rows["p0"].holder, "an Add below the minimum holds it")
	d.observe(&messages.MinimumResumed{Header: p2, Holder: "p2-v007", StalledFor: time.Second})
	assert.True(t, d.view().rows["p2"].stalledSince.IsZero())
	assert.NotContains(t, frame, "boom", "failures during an outage are counted, not listed")
	row := d.view().rows["p0"]
	assert.Equal(t, 3, row.vchannels)
	assert.Equal(t, "0", lag(row), "an Add below the persisted checkpoint leaves nothing to save")

	d.setInterrupted()
	assert.Contains(t, renderDashboard(d.view(), nil, 0, 0, false), "stopping gracefully")
	assert.Contains(t, renderDashboard(d.view(), nil, 0, 0, true), "the run is over")
	for _, line := range strings.Split(renderDashboard(d.view(), nil, 60, 0, false), "\n") {
		if strings.HasPrefix(line, "  ") { // the recent events fit the width
			assert.LessOrEqual(t, lipgloss.Width(line), 60, line)
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--duration=10s"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []window{{start: 4 * time.Second, length: 2 * time.Second}}, cfg.outages, "the default outage")
	assert.Equal(t, 20*time.Millisecond, cfg.tick())

	cfg, err = parseFlags([]string{"--outage=5s+1s", "--outage=1s+500ms", "--catalog=bolt:/tmp/x.db", "--chart=x.PNG"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, []window{{time.Second, 500 * time.Millisecond}, {5 * time.Second, time.Second}}, cfg.outages, "sorted")

	cfg, err = parseFlags([]string{"--outage=none"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Empty(t, cfg.outages)
	assert.Nil(t, cfg.stall)
	assert.Zero(t, cfg.stallAfter, "stall detection is off unless asked for")

	cfg, err = parseFlags([]string{"--stall=p2-v019@2s"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, &stallSpec{vchannel: "p2-v019", pchannel: "p2", index: 19, start: 2 * time.Second}, cfg.stall)
	assert.Equal(t, time.Second, cfg.stallAfter, "--stall turns detection on with the default")
	assert.Contains(t, cfg.describeFaults(), "stall p2-v019@2s")
	assert.True(t, cfg.stall.frozen(2*time.Second))
	assert.True(t, cfg.stall.frozen(time.Hour), "without LENGTH, to the end")
	assert.False(t, cfg.stall.frozen(1999*time.Millisecond))

	cfg, err = parseFlags([]string{"--stall=p0-v1234@1s+3s", "--vchannels=2000", "--stall-after=500ms"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Equal(t, &stallSpec{vchannel: "p0-v1234", pchannel: "p0", index: 1234, start: time.Second, length: 3 * time.Second}, cfg.stall)
	assert.Equal(t, 500*time.Millisecond, cfg.stallAfter)
	assert.True(t, cfg.stall.frozen(3999*time.Millisecond))
	assert.False(t, cfg.stall.frozen(4*time.Second), "LENGTH ends it")

	cfg, err = parseFlags([]string{"--stall-after=2s"}, &bytes.Buffer{})
	require.NoError(t, err)
	assert.Nil(t, cfg.stall)
	assert.Equal(t, 2*time.Second, cfg.stallAfter, "--stall-after alone turns detection on")

	for _, args := range [][]string{
		{"--outage=3s"}, {"--outage=3s+0s"}, {"--outage=x+1s"}, {"--outage=9s+1s"},
		{"--outage=1s+2s", "--outage=2s+1s"}, {"--catalog=etcd://"}, {"--catalog=nope"},
		{"--chart=c.jpg"}, {"--view=tv"}, {"--rate=0"}, {"--churn=100"}, {"--latency=-1s"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(args, &stderr)
		assert.Error(t, err, "%q", args)
		assert.Empty(t, stderr.String(), "%q: the usage is for --help; runWith prints the error in one line", args)
	}
}

func TestCatalogSpec(t *testing.T) {
	for _, spec := range []string{"bolt", "bolt:/tmp/x.db", "memory", "etcd://h1:2379,h2:2379/lowater"} {
		assert.NoError(t, checkCatalog(spec, etcdaccess.Access{}, nil), spec)
	}
	for _, spec := range []string{"memory:x", "nats", "etcd://"} {
		assert.ErrorIs(t, checkCatalog(spec, etcdaccess.Access{}, nil), catalogurl.ErrInvalid, spec)
	}
}

// Outages go down and up on their timers; end brings the catalog back up
// and reports the outage as it happened; heal ends every fault.
func TestOutagesAndHeal(t *testing.T) {
	mem := persistence.NewMemory()
	catalog := newFaultyCatalog(mem, config{failRate: 0, seed: 1})
	defer func() { _ = catalog.Close() }()
	notes := make(chan *catalogOutage, 4)
	o := startOutages(catalog, time.Now(), []window{{start: 0, length: time.Hour}}, func(c *catalogOutage) { notes <- c })
	down := <-notes
	require.True(t, down.down)
	assert.Equal(t, 1, down.index)
	ctx := context.Background()
	assert.ErrorIs(t, catalog.Save(ctx, "p0", wal.KafkaID(1)), faultinject.ErrInjected)

	spans := o.end()
	up := <-notes
	assert.False(t, up.down)
	require.Len(t, spans, 1)
	assert.GreaterOrEqual(t, spans[0].to, spans[0].from)
	require.NoError(t, catalog.Save(ctx, "p0", wal.KafkaID(2)))
	assert.Equal(t, int64(2), catalog.saves.Load())
	assert.Equal(t, int64(1), catalog.saveFailures.Load())

	faulty := newFaultyCatalog(persistence.NewMemory(), config{failRate: 1, seed: 1})
	defer func() { _ = faulty.Close() }()
	assert.Error(t, faulty.Save(ctx, "p0", wal.KafkaID(1)))
	faulty.heal()
	assert.NoError(t, faulty.Save(ctx, "p0", wal.KafkaID(1)))
}

func TestTimelineReach(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tr := &track{
		minimum:   []sample{{ms(0), 10}, {ms(100), 20}, {ms(300), 30}},
		persisted: []sample{{ms(0), 10}, {ms(150), 20}, {ms(500), 30}},
	}
	took, ok := tr.reach(ms(120)) // the minimum was 20 then
	assert.True(t, ok)
	assert.Equal(t, ms(30), took)
	took, ok = tr.reach(ms(200)) // already caught up
	assert.True(t, ok)
	assert.Zero(t, took)
	took, ok = tr.reachFinal(ms(350))
	assert.True(t, ok)
	assert.Equal(t, ms(150), took)
	tr.persisted = tr.persisted[:2]
	_, ok = tr.reachFinal(ms(350))
	assert.False(t, ok)
}

// Near the largest Kafka offset float64 holds no integer exactly: a
// persisted checkpoint 7 below the minimum has not reached it, though both
// round to the same float64.
func TestTimelineReachNearLastOffset(t *testing.T) {
	tr := &track{
		minimum:   []sample{{0, lastOffset - 7}, {time.Millisecond, lastOffset}},
		persisted: []sample{{0, lastOffset - 7}},
	}
	_, ok := tr.reachFinal(0)
	assert.False(t, ok, "persisted at the last offset - 7 reached a minimum at the last offset")
	tr.persisted = append(tr.persisted, sample{2 * time.Millisecond, lastOffset})
	took, ok := tr.reachFinal(0)
	assert.True(t, ok)
	assert.Equal(t, 2*time.Millisecond, took)
}

func TestCheckLive(t *testing.T) {
	bound := 15 * time.Second
	for _, tc := range []struct {
		name string
		live []liveness
		ok   bool
	}{
		{"nothing", nil, true},
		{"within", []liveness{{when: "after the faults ended", pchannel: "p0", took: time.Second, reached: true, bound: bound}}, true},
		{"too late", []liveness{{when: "after the faults ended", pchannel: "p0", took: 20 * time.Second, reached: true, bound: bound}}, false},
		{"never", []liveness{{when: "after outage 1", pchannel: "p0", bound: bound}}, false},
		{"not held", []liveness{{when: "after outage 1", pchannel: "p0", bound: bound, why: "random failures"}}, true},
	} {
		c := checkLive(&evidence{live: tc.live})
		assert.Equal(t, tc.ok, c.ok(), "%s: %v", tc.name, c.problems)
		assert.NotEmpty(t, c.summary)
	}
	c := checkLive(&evidence{live: []liveness{{when: "after outage 1", pchannel: "p0", took: 2 * time.Second, reached: true, bound: bound, why: "random failures"}}})
	assert.Equal(t, "bound 15s; after outage 1: 1/1 caught up within 2s (not held to the bound: random failures)", c.summary)
}

func TestChartFormat(t *testing.T) {
	for path, ok := range map[string]bool{"a.svg": true, "a.PNG": true, "a": false, "a.pdf": false} {
		_, err := chartFormat(path)
		assert.Equal(t, ok, err == nil, path)
	}
	assert.Error(t, writeChart(filepath.Join(t.TempDir(), "none", "c.svg"), "t", newTimeline(time.Now(), []string{"p0"})),
		"a directory that does not exist")
	// An empty timeline (nothing observed) still draws.
	assert.NoError(t, writeChart(filepath.Join(t.TempDir(), "c.png"), "t", newTimeline(time.Now(), []string{"p0"})))
}

// A pchannel whose offsets near the largest one all round to one float64
// draws: gonum widens a flat range by 1 either way, which changes nothing
// there, and its ticks panicked on the empty range.
func TestChartNearLastOffset(t *testing.T) {
	tl := newTimeline(time.Now(), []string{"p0"})
	tl.tracks["p0"] = &track{
		minimum:   []sample{{0, lastOffset - 7}, {time.Second, lastOffset}},
		persisted: []sample{{0, lastOffset - 7}, {2 * time.Second, lastOffset}},
	}
	tl.healAt, tl.stopAt = 2*time.Second, 3*time.Second
	assert.NoError(t, writeChart(filepath.Join(t.TempDir(), "c.svg"), "t", tl))
}

// Near the largest offset the y axis names exact offsets, none above the
// largest or below the lowest shown, and draws offsets a few apart apart:
// as float64s they round by 1024 there, and the labels made from them
// named offsets past the largest. Offsets from 0 keep gonum's ticks.
func TestChartAxisNearLastOffset(t *testing.T) {
	const m = lastOffset
	for _, tc := range []struct {
		name               string
		minimum, persisted []wal.KafkaID
		want               []string
		apart              [][2]wal.KafkaID // drawn at least a point apart
	}{
		{name: "from 0, as gonum draws it", minimum: []wal.KafkaID{12, 1234, 2345}, persisted: []wal.KafkaID{12, 2000},
			want: []string{"250", "1250", "2250"}},
		{name: "flat at the end", minimum: []wal.KafkaID{m}, persisted: []wal.KafkaID{m},
			want: []string{"9223372036854775807"}},
		{name: "flat 3 below", minimum: []wal.KafkaID{m - 3}, persisted: []wal.KafkaID{m - 3},
			want: []string{"9223372036854775804"}},
		{name: "flat 100000 below", minimum: []wal.KafkaID{m - 100000}, persisted: []wal.KafkaID{m - 100000},
			want: []string{"9223372036854675807"}},
		{name: "3 apart", minimum: []wal.KafkaID{m - 3, m}, persisted: []wal.KafkaID{m - 3},
			want:  []string{"9223372036854775804", "9223372036854775805", "9223372036854775806", "9223372036854775807"},
			apart: [][2]wal.KafkaID{{m - 3, m}}},
		{name: "100000 apart", minimum: []wal.KafkaID{m - 100000, m - 3, m}, persisted: []wal.KafkaID{m - 100000, m},
			want:  []string{"9223372036854680000", "9223372036854720000", "9223372036854760000"},
			apart: [][2]wal.KafkaID{{m - 100000, m}}},
	} {
		tl := newTimeline(time.Now(), []string{"p0"})
		tr := tl.tracks["p0"]
		for i, v := range tc.minimum {
			tr.minimum = append(tr.minimum, sample{time.Duration(i) * time.Second, v})
		}
		for i, v := range tc.persisted {
			tr.persisted = append(tr.persisted, sample{time.Duration(i) * time.Second, v})
		}
		tl.stopAt = 3 * time.Second
		p, _, err := panel(tl, "p0")
		require.NoError(t, err, tc.name)
		c := draw.New(vgimg.New(10*vg.Inch, 2.3*vg.Inch))
		p.Draw(c) // settles the axis's range, as writeChart does
		var labels []string
		for _, tick := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
			if tick.Label != "" {
				labels = append(labels, tick.Label)
			}
		}
		assert.Equal(t, tc.want, labels, tc.name)
		ax := p.Y.Tick.Marker.(offsetAxis)
		_, y := p.Transforms(&c)
		for _, a := range tc.apart {
			assert.GreaterOrEqual(t, float64(y(ax.y(a[1]))-y(ax.y(a[0]))), 1.0, "%s: %d and %d", tc.name, a[0], a[1])
		}
	}
}

// TestRenderDashboardFitsTerminal draws the live view at the sizes of
// common terminals, with wide values (long IDs, thousands of failures, a
// full event list): every line fits, the frame fits the height, and every
// column is either shown with its whole header or named as hidden.
func TestRenderDashboardFitsTerminal(t *testing.T) {
	began := time.Now().Add(-12 * time.Second)
	names := []string{"p0", "p1", "p2"}
	d := newDashboard(began, 30*time.Second, []string{
		"lowwater demo: 3 pchannels x 20 vchannels for 30s, 50 update rounds/s, seed 1",
		"faults: 20% of saves fail, 1 outage (4s+2s), latency 1ms-5ms, an Add below the minimum every 2s",
		"catalog: bolt:/tmp/lowwater-demo-123456789/checkpoints.db",
	}, nil)
	d.start("run", names, map[string]int{"p0": 20, "p1": 20, "p2": 20},
		map[string]wal.MessageID{"p0": wal.KafkaID(1_234_567), "p1": wal.KafkaID(2_345_678), "p2": wal.KafkaID(3_456_789)})
	for i, n := range names {
		h := messages.Header{PChannel: n, At: began.Add(time.Duration(i) * time.Second)}
		d.observe(&messages.Recovered{Header: h, StartMessageID: wal.KafkaID(1_000_000)})
		d.observe(&messages.MinimumAdvanced{Header: h, From: wal.KafkaID(1_000_000), To: wal.KafkaID(9_876_543), Holder: n + "-v1234"})
		if n == "p1" { // a stall whose cell is the widest the column shows
			d.observe(&messages.MinimumStalled{Header: h, Holder: n + "-v1234", Checkpoint: wal.KafkaID(9_876_543), Since: began, For: time.Second})
		}
		for a := range 1200 {
			d.observe(&messages.PersistFailed{Header: h, Value: wal.KafkaID(9_876_543), Attempt: a + 1, Err: errors.New("lowwater: injected")})
		}
	}
	rates := map[string]float64{"p0": 123456, "p1": 123456, "p2": 123456}

	allHeaders := []string{"PCHANNEL", "STATE", "VCHANNELS", "MINIMUM", "HOLDER", "PERSISTED", "LAG", "BEHIND FOR", "SAVES", "FAILURES", "UPDATES/S"}
	shortOf := map[string]string{"VCHANNELS": "VCH", "BEHIND FOR": "BEHIND", "FAILURES": "FAILS", "UPDATES/S": "UPD/S"}
	for _, size := range []struct{ w, h int }{{80, 24}, {100, 30}, {60, 24}, {200, 50}, {80, 20}, {80, 18}, {80, 12}, {80, 6}} {
		t.Run(fmt.Sprintf("%dx%d", size.w, size.h), func(t *testing.T) {
			frame := renderDashboard(d.view(), rates, size.w, size.h, false)
			// Every line counts, an empty last one too: bubbletea drops a
			// frame's first lines, the title's, when it is too tall.
			lines := strings.Split(frame, "\n")
			assert.LessOrEqual(t, len(lines), size.h, "the frame fits the terminal's height")
			assert.Contains(t, lines[0], "lowwater demo", "the title line is kept")
			for _, line := range lines {
				assert.LessOrEqual(t, lipgloss.Width(line), size.w, "%q", line)
			}
			table, hidden := renderTable(d.view(), rates, size.w)
			table = ansi.Strip(table)
			headerLine := strings.Split(table, "\n")[1]
			for _, h := range allHeaders {
				shown := containsWord(headerLine, h) || (shortOf[h] != "" && containsWord(headerLine, shortOf[h]))
				// A hidden column is named as the narrowed table names it.
				listed := slices.Contains(hidden, cmp.Or(shortOf[h], h))
				assert.True(t, shown != listed, "column %s: shown %v, hidden %v", h, shown, hidden)
			}
			if len(hidden) > 0 && size.h >= 18 { // below, the table fills the height
				// The list may wrap, after a comma: read it back whole.
				_, list, _ := strings.Cut(ansi.Strip(frame), "hidden to fit: ")
				list, _, _ = strings.Cut(list, "(widen the terminal)")
				assert.Equal(t, strings.Join(hidden, ", "), strings.Join(strings.Fields(list), " "))
			}
			if size.w >= 80 {
				for _, h := range []string{"MINIMUM", "PERSISTED", "SAVES", "FAILS", "UPD/S", "LAG"} {
					assert.True(t, containsWord(headerLine, h) || containsWord(headerLine, map[string]string{"FAILS": "FAILURES", "UPD/S": "UPDATES/S"}[h]),
						"%s is kept at %d columns: %s", h, size.w, headerLine)
				}
				assert.Contains(t, table, "1200", "the failure count is shown whole")
				assert.Contains(t, table, "123456", "the update rate is shown whole")
			}
			if size.w >= 100 {
				assert.True(t, containsWord(headerLine, "HOLDER"), "the holder is kept at %d columns: %s", size.w, headerLine)
				assert.Regexp(t, `p1-v1234 (STALLED 1\d\.\d|!1\d)s`, table, "the stalled holder is shown whole, with how long")
			}
			if size.w >= 200 {
				assert.Empty(t, hidden)
			}
		})
	}
}

// More pchannels than a terminal's height takes: the table keeps the
// first ones, with its bottom, says how many it shows, and the footer
// stays. Its last rows, its bottom and the footer used to be cut unsaid.
func TestRenderDashboardTooManyPChannels(t *testing.T) {
	began := time.Now().Add(-2 * time.Second)
	var names []string
	vchannels, minima := map[string]int{}, map[string]wal.MessageID{}
	for i := range 20 {
		n := fmt.Sprintf("p%d", i)
		names = append(names, n)
		vchannels[n], minima[n] = 20, wal.KafkaID(100)
	}
	d := newDashboard(began, 8*time.Second, []string{"lowwater demo: 20 pchannels", "faults: none", "catalog: in memory"}, nil)
	d.start("run", names, vchannels, minima)
	frame := ansi.Strip(renderDashboard(d.view(), nil, 80, 24, false))
	lines := strings.Split(frame, "\n")
	require.Len(t, lines, 24, "the frame fills the height:\n%s", frame)
	require.Contains(t, lines[len(lines)-1], "Ctrl-C stops gracefully", "the footer is the last line:\n%s", frame)
	at := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(l, "pchannels shown (a taller terminal shows them all)") })
	require.Positive(t, at, "no word of the pchannels left out:\n%s", frame)
	bottom := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "╰") })
	require.True(t, bottom > 0 && bottom < at, "the table's bottom is drawn, above the note:\n%s", frame)
	var shown int
	require.NoError(t, func() error { _, err := fmt.Sscanf(lines[at], "%d of 20", &shown); return err }())
	rows := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "│ p") {
			rows++
		}
	}
	require.Equal(t, shown, rows, "the note counts the rows drawn:\n%s", frame)
	require.Contains(t, frame, "│ p0 ", "the first pchannels are kept")
}

// containsWord reports whether the table's header line has w as one of its
// cells.
func containsWord(headerLine, w string) bool {
	for _, cell := range strings.Split(headerLine, "│") {
		if strings.TrimSpace(cell) == w {
			return true
		}
	}
	return false
}

// TestREADMELiveView draws the live view at 80 columns as the README shows
// it, during an outage: a column dropped early comes back once a wider one
// has gone (VCH stays when HOLDER goes), and the README's sample is this
// frame, to the letter.
func TestREADMELiveView(t *testing.T) {
	began := time.Now().Add(-6300 * time.Millisecond)
	names := []string{"p0", "p1", "p2"}
	d := newDashboard(began, 12*time.Second, liveHeader([]string{
		"lowwater demo: 3 pchannels x 20 kafka vchannels, 12s, 50 rounds/s, seed 42",
		"faults: 20% of saves fail, outages 4.8s+2.4s",
		"catalog: bbolt file /tmp/lowwater-demo-2484912296/lowwater.db",
	}), nil)
	d.start("run", names, map[string]int{"p0": 20, "p1": 20, "p2": 20},
		map[string]wal.MessageID{"p0": wal.KafkaID(100), "p1": wal.KafkaID(100), "p2": wal.KafkaID(100)})
	rows := []struct {
		minimum, persisted int64
		saves, fails       int
		added              int
	}{{186, 140, 16, 9, 1}, {276, 217, 15, 10, 0}, {273, 239, 16, 9, 0}}
	for i, n := range names {
		h := messages.Header{PChannel: n, At: began.Add(time.Second)}
		d.observe(&messages.Recovered{Header: h, StartMessageID: wal.KafkaID(100)})
		for k := range rows[i].added {
			d.observe(&messages.VChannelAdded{Header: h, VChannel: fmt.Sprintf("%s-v%03d", n, 20+k), Checkpoint: wal.KafkaID(150)})
		}
		d.observe(&messages.MinimumAdvanced{Header: h, From: wal.KafkaID(100), To: wal.KafkaID(rows[i].minimum), Holder: n + "-v007"})
		for range rows[i].saves {
			d.observe(&messages.CheckpointPersisted{Header: h, Value: wal.KafkaID(rows[i].persisted), Attempts: 1})
		}
		for a := range rows[i].fails {
			d.observe(&messages.PersistFailed{Header: h, Value: wal.KafkaID(rows[i].minimum), Attempt: a + 1, Err: errors.New("lowwater: injected")})
		}
	}
	view := d.view()
	view.outage, view.outageLeft = &catalogOutage{index: 1, down: true, length: 2400 * time.Millisecond}, 900*time.Millisecond
	view.recent = []string{
		"  3.942s  p1   added       p1-v021 at kafka:201",
		"  4.233s  p0   dropped     p0-v004",
		"  4.516s  p2   rejected    update p2-v011 to kafka:590: checkpoint rollback",
		"  4.801s  CATALOG DOWN outage 1 for 2.4s: every call fails",
		"  4.809s  p0   rejected    drop p0-ghost: vchannel not found: \"p0-ghost\"",
		"  5.050s  p2   added       p2-v022 at kafka:728",
		"  5.611s  p1   dropped     p1-v013",
		"  6.012s  p0   added       p0-v023 at kafka:143",
	}
	frame := ansi.Strip(renderDashboard(view, map[string]float64{"p0": 467, "p1": 538, "p2": 459}, 80, 24, false))
	t.Log("\n" + frame)
	table, hidden := renderTable(view, nil, 80)
	table = ansi.Strip(table)
	require.Equal(t, []string{"BEHIND", "HOLDER"}, hidden, "%s", table)
	require.True(t, containsWord(strings.Split(table, "\n")[1], "VCH"), "%s", table)

	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(readme), "The live view at 80 columns, during the outage:\n\n```\n"+frame+"\n```\n"),
		"the README's live view is not this frame: copy it from the log above")
}

// TestLiveViewAtEnd feeds the live view as the node does: a minimum that
// stands at the last offset is "at end" in the holder column and the
// recent events, not STALLED, and the MinimumResumed that follows an Add
// below the end ends no stall; a real stall is STALLED still.
func TestLiveViewAtEnd(t *testing.T) {
	began := time.Now().Add(-3 * time.Second)
	names := []string{"p0", "p1"}
	d := newDashboard(began, 8*time.Second, []string{"lowwater demo"}, nil)
	d.start("run", names, map[string]int{"p0": 20, "p1": 20}, map[string]wal.MessageID{"p0": lastOffset, "p1": wal.KafkaID(40)})
	f := feed(d.observe)
	at := func(n string, ms int) messages.Header {
		return messages.Header{PChannel: n, At: began.Add(time.Duration(ms) * time.Millisecond)}
	}
	f(&messages.Recovered{Header: at("p0", 1), StartMessageID: lastOffset - 7, FromCatalog: true})
	f(&messages.Recovered{Header: at("p1", 1)})
	f(&messages.MinimumStalled{Header: at("p0", 1001), Holder: "p0-v003", Checkpoint: lastOffset, Since: began, For: time.Second})
	f(&messages.MinimumStalled{Header: at("p1", 1500), Holder: "p1-v002", Checkpoint: wal.KafkaID(40), Since: began, For: 1500 * time.Millisecond})
	cells := func() map[string]string {
		v := d.view()
		return map[string]string{"p0": holderCell("p0", v.rows["p0"], false), "p1": holderCell("p1", v.rows["p1"], false)}
	}
	got := cells()
	assert.Equal(t, "at end", got["p0"])
	assert.Regexp(t, `^p1-v002 STALLED [0-9.]+s$`, got["p1"])
	table, _ := renderTable(d.view(), nil, 200)
	table = ansi.Strip(table)
	assert.Contains(t, table, "at end")

	// An Add lowers p0's minimum below the end; it rises, and the actor
	// ends its stall: p0 has a holder again, and the view names no stall.
	f(&messages.VChannelAdded{Header: at("p0", 2000), VChannel: "p0-v020", Checkpoint: lastOffset - 12})
	f(&messages.MinimumAdvanced{Header: at("p0", 2100), From: lastOffset - 12, To: lastOffset - 5, Holder: "p0-v020"})
	f(&messages.MinimumResumed{Header: at("p0", 2100), Holder: "p0-v003", StalledFor: 2100 * time.Millisecond})
	assert.Equal(t, "p0-v020", cells()["p0"])

	recent := strings.Join(d.view().recent, "\n")
	assert.Regexp(t, `p0 +at end +minimum at the last offset: none can pass it`, recent)
	assert.Regexp(t, `p1 +STALLED +minimum kafka:40 has not risen for 1.5s: p1-v002 holds it back`, recent)
	assert.NotRegexp(t, `p0 +(STALLED|resumed)`, recent)
}

// At 80 columns, where the holder column is hidden to fit, a pchannel whose
// minimum stands at the last offset says "at end" in its state, and the
// event that says so keeps its key words.
func TestLiveViewAtEndAt80Columns(t *testing.T) {
	began := time.Now().Add(-3 * time.Second)
	names := []string{"p0", "p1", "p2"}
	d := newDashboard(began, 8*time.Second, liveHeader([]string{
		"lowwater demo: 3 pchannels x 20 kafka vchannels, 8s, 50 rounds/s, seed 42",
		"faults: 20% of saves fail, outages 3.2s+1.6s",
		"catalog: bbolt file /tmp/lowwater-demo-2484912296/lowwater.db",
	}), nil)
	d.start("run", names, map[string]int{"p0": 20, "p1": 20, "p2": 20},
		map[string]wal.MessageID{"p0": lastOffset - 100000, "p1": lastOffset, "p2": lastOffset - 3})
	f := feed(d.observe)
	for _, n := range names {
		h := messages.Header{PChannel: n, At: began.Add(time.Millisecond)}
		f(&messages.Recovered{Header: h, StartMessageID: d.view().rows[n].minimum, FromCatalog: true})
	}
	f(&messages.MinimumAdvanced{Header: messages.Header{PChannel: "p2", At: began.Add(500 * time.Millisecond)},
		From: lastOffset - 3, To: lastOffset - 1, Holder: "p2-v004"})
	f(&messages.MinimumStalled{Header: messages.Header{PChannel: "p1", At: began.Add(1001 * time.Millisecond)},
		Holder: "p1-v003", Checkpoint: lastOffset, Since: began, For: time.Second})

	rates := map[string]float64{"p0": 467, "p1": 538, "p2": 459}
	frame := ansi.Strip(renderDashboard(d.view(), rates, 80, 24, false))
	t.Log("\n" + frame)
	_, hidden := renderTable(d.view(), rates, 80)
	require.Contains(t, hidden, "HOLDER", "the case this test is for")
	assert.Regexp(t, `(?m)^│ p1 +│ ● at end +│`, frame)
	assert.Regexp(t, `(?m)^│ p0 +│ ● ok +│`, frame)
	assert.Regexp(t, `(?m)^│ p2 +│ ● ok +│`, frame)
	assert.Regexp(t, `(?m)^ +[0-9.]+s +p1 +at end +minimum at the last offset: none can pass it$`, frame)
	for _, line := range strings.Split(frame, "\n") {
		assert.LessOrEqual(t, lipgloss.Width(line), 80, line)
	}
}

// On a small terminal the table's rows come before the configuration,
// the names of the hidden columns and an empty list of recent events, and
// what is said is said whole. At 40x12 the view showed one pchannel of
// three, its note cut, and at 40x16 one still, below lines of hints.
func TestRenderDashboardOnASmallTerminal(t *testing.T) {
	began := time.Now().Add(-2 * time.Second)
	dashboardOf := func(n int) *dashboard {
		names, vchannels, minima := []string{}, map[string]int{}, map[string]wal.MessageID{}
		for i := range n {
			p := fmt.Sprintf("p%d", i)
			names, vchannels[p], minima[p] = append(names, p), 20, wal.KafkaID(100)
		}
		d := newDashboard(began, 8*time.Second, []string{"lowwater demo: " + strconv.Itoa(n) + " pchannels", "faults: none", "catalog: in memory"}, nil)
		d.start("run", names, vchannels, minima)
		return d
	}
	rowsOf := func(frame string) int {
		rows := 0
		for _, l := range strings.Split(frame, "\n") {
			if strings.HasPrefix(l, "│ p") {
				rows++
			}
		}
		return rows
	}
	for _, h := range []int{12, 16} {
		frame := ansi.Strip(renderDashboard(dashboardOf(3).view(), nil, 40, h, false))
		require.LessOrEqual(t, len(strings.Split(frame, "\n")), h, frame)
		require.Equal(t, 3, rowsOf(frame), "every pchannel is shown at 40x%d:\n%s", h, frame)
		require.NotContains(t, frame, "pchannels shown", frame)
		require.NotContains(t, frame, "…", "a line was cut:\n%s", frame)
		require.True(t, strings.HasSuffix(frame, "\nCtrl-C stops gracefully; twice quits"), frame)
		if strings.Contains(frame, "recent events") {
			require.NotRegexp(t, `recent events\n[^ ]`, frame, "a title with no line under it")
		}
	}
	// Narrower than the table's columns that never go: no cut number
	// reads as another; it says so.
	for _, w := range []int{30, 20} {
		frame := ansi.Strip(renderDashboard(dashboardOf(3).view(), nil, w, 8, false))
		require.Zero(t, rowsOf(frame), frame)
		require.Regexp(t, `(?m)^(the table needs 3\d columns: widen the terminal|widen to 3\d columns)$`, frame, "said whole")
		for _, l := range strings.Split(frame, "\n") {
			require.LessOrEqual(t, lipgloss.Width(l), w, "%q", l)
		}
	}
	frame := ansi.Strip(renderDashboard(dashboardOf(6).view(), nil, 40, 12, false))
	lines := strings.Split(frame, "\n")
	require.Len(t, lines, 12, frame)
	require.Contains(t, lines, fmt.Sprintf("%d of 6 pchannels shown", rowsOf(frame)), "the note is whole:\n%s", frame)
	require.Positive(t, rowsOf(frame))
}
