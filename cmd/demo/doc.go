// Command demo shows lowwater end to end, and checks it.
//
// Pchannels whose vchannels advance at random rates (with adds, drops and a
// few commands that must be rejected) save their low-water mark to a
// catalog that fails: a share of the saves, optional latency, and outage
// windows during which every call fails. When the run ends, the faults end
// and the demo waits for each persisted checkpoint to reach its minimum;
// then it stops gracefully (flushing), reopens the catalog, respawns the
// pchannels and checks that they restart from the last persisted
// checkpoints. At the end it checks, on everything it observed:
//
//	I1 safe        every persisted value was a minimum the pchannel had
//	I2 monotonic   persisted values strictly increase, across the restart
//	I3 live        once the catalog is healthy, persisted reaches the minimum
//	               within one backoff cap plus one save
//
// and that the restart, the rejections and the graceful stops went right.
//
// --stall VCHANNEL@START[+LENGTH] is a fault of the log side rather than
// the catalog's: one vchannel stops advancing, as a hung consumer would,
// so that its pchannel's minimum stalls. VCHANNEL is one its pchannel
// starts with, named as the demo names them (pP-vNNN, e.g. p0-v003); it
// is never dropped, and it starts at its pchannel's minimum and moves as
// slowly as the slowest vchannel, so that it holds the minimum when it
// freezes (a vchannel far ahead would hold nothing back until every other
// one passed it). It stands still from START (since the demo started) for
// LENGTH, or to the end of the run without one, then moves on. The freeze
// must last --stall-after plus a second within the run, and begin below
// the largest Kafka offset, where every vchannel stops (as at the end of a
// log) and none can pass the frozen one: a pchannel whose stored
// checkpoint is too near it is refused (exit 2). --stall turns on
// stall detection (actors.WithStallAfter with --stall-after, default 1s;
// --stall-after alone turns it on too): the plain output prints STALLED
// and resumed lines naming the holder, the live view's HOLDER column
// marks the stall and how long, the chart shades each stall from the
// minimum's last rise to its end with the holder named on top, and a
// further check requires a MinimumStalled naming the frozen vchannel,
// published after START (exit 1 if none, unless Ctrl-C ended the run).
// Other stalls can show too: the slowest vchannels sometimes stand still
// for a second by chance. A minimum that stands at the largest offset is
// no stall: nothing lies past it to rise to. The plain output and the live
// view say "at end" for it, and neither the chart nor the check counts it.
//
//	go run ./cmd/demo [--duration 8s] [--pchannels 3] [--vchannels 20]
//	  [--rate 50] [--churn 0.5] [--bad-rate 0.4]
//	  [--catalog bolt|bolt:PATH|memory|etcd://HOST:PORT/PREFIX]
//	  [--data DIR] [--fail-rate 0.2] [--latency 0] [--outage 3s+2s ...]
//	  [--stall p0-v003@2s[+3s]] [--stall-after 1s] [--seed N]
//	  [--chart out.svg|out.png] [--metrics-addr :9464]
//	  [--metrics-pchannel-label=false] [--min-save-interval 250ms]
//	  [--sample 500ms] [--view auto|live|plain] [--log FILE]
//	  [--etcd-cacert|--etcd-cert|--etcd-key FILE] [--etcd-user NAME]
//	  [--verbose]
//
// When standard output is a terminal, and the demo runs in its
// foreground, it draws a live view four times a second (per pchannel:
// state, vchannels, minimum and the vchannel holding it, persisted, lag,
// saves, failures, updates per second; the outage in progress; recent
// events); otherwise it prints one line per event, in 80
// columns: a longer one goes on in lines indented under its details, so
// that every line that starts an event starts with its time, pchannel and
// kind. Ctrl-C ends the run early and the demo still stops gracefully,
// restarts and checks, exiting 130 if they pass (a run cut short is
// no whole run to a script); a second Ctrl-C exits at once with status
// 130. --chart draws the minimum and the persisted
// checkpoint of each pchannel over time with the outages shaded;
// --metrics-addr serves package metrics' collector at /metrics.
//
// Every flag is checked before the run starts. Exit status: 0 when every
// check passed, 1 when one failed (an invariant was violated), 2 on a usage
// error (one line on standard error) or a setup error, 3 when the
// checkpoint store is damaged (persistence.ErrCorruptStore: a bbolt file
// emptied, truncated or with damaged pages) or a record in it is
// (persistence.ErrCorruptRecord), 130 after Ctrl-C.
//
// Files: main.go holds the flags and the two-stage Ctrl-C; demo.go the
// phases; catalog.go and catalog_etcd.go the --catalog kinds (bolt,
// memory, etcd); faults.go the fault profile and the outages; stall.go the
// --stall fault; sim.go the simulated vchannels; node.go the lossless
// event feed the checks read (events.Lossless);
// timeline.go, chart.go the chart; dashboard.go, live.go the live view;
// report.go the plain output; metricsrv.go /metrics; verify.go the checks.
package main
