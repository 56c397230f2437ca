# lowwater: every command a developer or CI needs. Nothing here relies on a
# tool installed by hand: linters run through `go run module@version`.
GO            ?= go
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT  ?= 9m
FUZZTIME      ?= 30s

.PHONY: all build test test-core demo bench lint fuzz soak

all: build test

build:
	$(GO) build ./...

# go vet, then every test (unit, black-box, Examples, fuzz seed corpora)
# under the race detector; then the one that times the scheduler without
# it (the race detector shuffles the order of ready goroutines).
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -count=1 -run 'NotStuckBehind' ./actors/

# The core alone (WAL IDs, the pure core, the actors, events, metrics, the
# bbolt catalog), without the race detector: a loop of about half a minute
# on 2 cores while you change them. make test before you push.
test-core:
	$(GO) test -count=1 ./wal/... ./internal/core/... ./internal/promoted/ \
		./messages/... ./actors/... ./events/... ./metrics/... ./persistence/

# The demo on the embedded default catalog (a bbolt file in a temp dir).
# Built, then run: ./bin/demo exits with the demo's own status (0 ok, 1 an
# invariant violated, 2 a usage or setup error, 3 a damaged store, 130 a
# second Ctrl-C), where go run reported every failure as 1. make itself
# reports any failing recipe as 2.
demo: bin/demo
	./bin/demo $(DEMO_FLAGS)

.PHONY: bin/demo
bin/demo:
	$(GO) build -o bin/demo ./cmd/demo

# The demo for 10 s with a chart of each pchannel's minimum and persisted
# checkpoint, outages shaded: `make demo-chart CHART=out.png` for a PNG.
CHART ?= demo-chart.svg
.PHONY: demo-chart
demo-chart: bin/demo
	./bin/demo --duration 10s --chart $(CHART)

# The chart in the docs, from a fixed seed: the same faults at the same
# moments every time (the timings of a real run still vary a little).
.PHONY: docs
docs: bin/demo
	./bin/demo --duration 10s --seed 42 --chart docs/demo-chart.svg

# Failover on etcd: an embedded etcd and two node processes sharing 4
# pchannels through ownership; one is killed, the other takes over.
# FAILOVER_FLAGS=--help lists its flags. Built, then run, as the demo is.
.PHONY: demo-etcd
demo-etcd: bin/failover
	./bin/failover $(FAILOVER_FLAGS)

.PHONY: bin/failover
bin/failover:
	$(GO) build -o bin/failover ./cmd/failover

# lowwater behind a real Kafka wire protocol (kfake, in this process): a
# consumer node SIGKILLed and restarted for several rounds; fails on a lost
# record or a replay over its bound, and shows kgo's autocommit beside it.
# KAFKADEMO_FLAGS=--help lists its flags. Built, then run, as the demo is:
# the binary's own exit status, which go run would make 1.
.PHONY: demo-kafka
demo-kafka: bin/kafkademo
	./bin/kafkademo $(KAFKADEMO_FLAGS)

.PHONY: bin/kafkademo
bin/kafkademo:
	$(GO) build -o bin/kafkademo ./cmd/kafkademo

# Every benchmark of ./bench in BENCH_COUNT (default 6) interleaved rounds:
# the raw `go test -bench` output goes to bench/raw.txt and, named by when
# the run began, to bench/runs; bench/RESULTS.md gets the machine, its
# load, the goals and the benchstat tables of it (medians, 95 % intervals,
# -col /impl), and bench/HISTORY.md each goal over every run kept. About
# 4-10 minutes on 2 cores.
# `make bench-micro` runs every other package's micro-benchmarks.
# HISTORY.md judges the runs since the save path took its present form.
BENCH_COUNT ?= 6
BENCH_SINCE ?= 2026-12-02-0429
bench:
	$(GO) run ./bench/report -go $(GO) -count $(BENCH_COUNT) -out bench/RESULTS.md -raw bench/raw.txt \
	  -runs bench/runs -history bench/HISTORY.md -since $(BENCH_SINCE)

# bench/HISTORY.md again from the runs kept in bench/runs, running nothing.
.PHONY: bench-history
bench-history:
	$(GO) run ./bench/report -history-only -runs bench/runs -history bench/HISTORY.md -since $(BENCH_SINCE)

.PHONY: bench-micro
bench-micro:
	$(GO) test -run='^$$' -bench=. -benchmem $$($(GO) list ./... | grep -v -e '/bench$$' -e '/bench/')

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff

# Each fuzz target for FUZZTIME; `go test -fuzz` takes one target at a time.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$t"; $(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

# The long forms of tests/invariants and tests/crash: 10,000 model cases
# (make test runs 100), the 1,000,000-update load test 5 times, and 5 × 20
# kill -9 rounds. A failing model case prints its seed and fail file:
#   go test -race -run '^TestModel$$' ./tests/invariants -rapid.seed=N
soak:
	$(GO) test -race -count=1 -timeout 3h -run '^TestModel$$' ./tests/invariants -rapid.checks=10000
	$(GO) test -race -count=5 -timeout 3h -run '^TestLoad$$' -v ./tests/invariants
	$(GO) test -race -count=5 -timeout 3h -run '^TestKill9$$' ./tests/crash
	$(GO) test -race -count=1 -timeout 3h -tags soak -run '^TestSoak' ./tests/etcd
