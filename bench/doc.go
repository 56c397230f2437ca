// Package bench puts lowwater and the design it replaces (package
// bench/baseline, a re-implementation of Milvus' mutex and condition
// variable pchannelCheckpointManager) side by side, in one process, on the
// same catalogs and the same wal IDs. It holds benchmarks only; every
// benchmark has an impl=baseline and an impl=lowwater variant, and each
// iteration count is fixed by the caller (-benchtime=Nx) so that a run is
// bounded in time.
//
// `make bench` runs them through ./bench/report in interleaved rounds,
// keeps the raw output in bench/raw.txt, and a copy in bench/runs named by
// when the run began, and writes bench/RESULTS.md with benchstat's tables
// (-col /impl) and bench/HISTORY.md, each goal over the runs kept since
// the save path took its present form: one run is one state of a shared
// machine. bench/EXPERIMENTS.md keeps what was measured and not kept. One
// benchmark by hand:
//
//	go test -run='^$' -bench='^BenchmarkUpdate$' -benchtime=2000000x \
//	  -count=6 -benchmem ./bench/ | tee new.txt
//	go tool benchstat -col '/impl@(mutex sender lowwater)' new.txt
//
// What each measures:
//
//   - BenchmarkUpdate: one update at a time, 1000 vchannels, 1 and 8
//     producers; beside baseline and lowwater (raw Send): floor (a
//     buffered channel to a goroutine fixing a heap), mutex (mutex +
//     container/heap of int64), sender (actors.Sender).
//   - BenchmarkUpdateBatch: UpdateBatch of 64 (the baseline applies them
//     one by one).
//   - BenchmarkUpdateRising: one update at a time, each raising the
//     minimum, 100 vchannels; beside them, sender (actors.Sender).
//   - BenchmarkSaves: catalog saves per million updates, 100 µs and 1 ms
//     catalogs, updates paced at 1M/s.
//   - BenchmarkPersistLag: last update of a burst to its minimum durable,
//     1 ms catalog; saves per burst, and when the last save began; beside
//     them, sender (actors.Sender).
//   - BenchmarkScale: 10,000 pchannels × 100 vchannels: memory,
//     goroutines, recovery from bbolt, aggregate update rate, persist lag
//     p99, and the last round's p99 counted from its first update; run
//     again with 500,000 updates/s offered (-scale-rate).
//   - BenchmarkGroupCommit: 1,000 pchannels advancing together on bbolt,
//     one transaction per save against group commit; raw db.Batch with
//     1,000 writers (bboltbatch); CPU per save; and on a catalog that
//     costs nothing (the save path's own cost).
//   - BenchmarkGroupCommitFew: the same group commit with 100 pchannels,
//     where a batch never fills; raw db.Batch with 100 writers.
//   - BenchmarkEtcdSaves: 1,000 pchannels saving on a 3-member etcd
//     cluster: one txn at a time, concurrent txns, etcdcatalog.Batcher.
//   - BenchmarkEtcdFleet: 100,000 pchannels saving at once on etcd, with
//     and without the catalog's bound on calls in flight, through a
//     Batcher, and owned (not in make bench: minutes a run).
//
// Three flags take a benchmark apart (after -args): -group-pchannels N
// runs BenchmarkGroupCommit with N pchannels, whose state no longer fits
// in the caches at 10,000; -scale-drained makes BenchmarkScale drain the
// producers' backlog before the last update of each pchannel, so that its
// persist lag is the last round of saves alone; -scale-rate R paces its
// producers to R updates per second in all (they park between steps, as
// a consumer waiting on its WAL does), so that the two implementations'
// lags are compared at one load rather than each at its own top speed.
// make bench runs it at 500,000: at full speed lowwater's producers send
// twice the baseline's updates and leave a backlog, which is its lag.
//
// Catalog latency is simulated by blocking the saving thread in nanosleep
// (catalogs_test.go), as fsync or a socket read blocks it; Go's timers
// would round a 100 µs wait up to a millisecond on an idle machine.
package bench
