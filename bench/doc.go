// Package bench puts lowwater and the design it replaces (package
// bench/baseline, a re-implementation of Milvus' mutex and condition
// variable pchannelCheckpointManager) side by side, in one process, on the
// same catalogs and the same wal IDs. It holds benchmarks only; every
// benchmark has an impl=baseline and an impl=lowwater variant, and each
// iteration count is fixed by the caller (-benchtime=Nx) so that a run is
// bounded in time.
//
// `make bench` runs them through ./bench/report, which takes medians over
// interleaved rounds and writes the table to bench/RESULTS.md. One
// benchmark by hand:
//
//	go test -run='^$' -bench='^BenchmarkUpdate$' -benchtime=2000000x -count=5 -benchmem ./bench/
//
// What each measures, and the issue item it answers:
//
//	BenchmarkUpdate        2a  one update at a time, 1000 vchannels, 1 and 8 producers
//	BenchmarkUpdateBatch   2b  UpdateBatch of 64 (the baseline applies them one by one)
//	BenchmarkSaves         2c  catalog saves per million updates, 100 µs and 1 ms
//	                           catalogs, updates paced at 1M/s
//	BenchmarkPersistLag    2d  last update of a burst to its minimum durable, 1 ms catalog
//	BenchmarkScale         2e  10,000 pchannels × 100 vchannels: memory, goroutines,
//	                           recovery from bbolt, aggregate update rate
//	BenchmarkGroupCommit   2f  1,000 pchannels advancing together on bbolt, one
//	                           transaction per save against bbolt's Batch
//
// Catalog latency is simulated by blocking the saving thread in nanosleep
// (catalogs_test.go), as fsync or a socket read blocks it; Go's timers
// would round a 100 µs wait up to a millisecond on an idle machine.
package bench
