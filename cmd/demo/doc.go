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
//	go run ./cmd/demo [--duration 8s] [--pchannels 3] [--vchannels 20]
//	                  [--rate 50] [--churn 0.5] [--bad-rate 0.4]
//	                  [--catalog bolt|bolt:PATH|memory] [--data DIR]
//	                  [--fail-rate 0.2] [--latency 0] [--outage 3s+2s ...]
//	                  [--seed N] [--chart out.svg|out.png] [--metrics-addr :9464]
//	                  [--view auto|live|plain] [--log FILE] [--verbose]
//
// When standard output is a terminal it draws a live view four times a
// second (per pchannel: state, vchannels, minimum, persisted, lag, saves,
// failures, updates per second; the outage in progress; recent events);
// otherwise it prints one line per event. Ctrl-C ends the run early and the
// demo still stops gracefully, restarts and checks; a second Ctrl-C exits
// at once with status 130. --chart draws the minimum and the persisted
// checkpoint of each pchannel over time with the outages shaded;
// --metrics-addr serves package metrics' collector at /metrics.
//
// Every flag is checked before the run starts. Exit status: 0 when every
// check passed, 1 when one failed (an invariant was violated), 2 on a usage
// error (one line on standard error) or a setup error, 3 when the
// checkpoint store is damaged (persistence.ErrCorruptStore: a bbolt file
// emptied, truncated or with damaged pages), 130 after a second Ctrl-C.
//
// Files: main.go holds the flags and the two-stage Ctrl-C; demo.go the
// phases; catalog.go and catalog_etcd.go the --catalog kinds (bolt,
// memory, etcd); faults.go the fault profile and the outages; sim.go the
// simulated vchannels; node.go the lossless event feed the checks read (events.Lossless);
// timeline.go, chart.go the chart; dashboard.go, live.go the live view;
// report.go the plain output; metricsrv.go /metrics; verify.go the checks.
package main
