// Package invariants hunts for counterexamples to lowwater's invariants
// I1–I7 (README, Guarantees): a rapid model-based test of the PChannel actor against
// a plain reference model, a table of faults × phases, the retry schedule,
// coalescing and bounded state, a load test, and a fuzz target for command
// validation.
//
// Most tests run the real actors inside a testing/synctest bubble: the
// clock is fake, so a 16-minute outage, a hung save or a 10 s backoff cost
// no real time, and synctest.Wait gives a quiescent point (every actor
// idle or waiting on a timer) at which the model's expectations are exact.
// Inside a bubble time.Sleep only moves the fake clock; it is never used to
// wait for something to happen.
//
// Reproducing a failure: rapid prints the seed and a fail file, e.g.
//
//	go test -race -run '^TestModel$' ./tests/invariants -rapid.seed=1234
//	go test -race -run '^TestModel$' ./tests/invariants -rapid.failfile=testdata/rapid/TestModel/TestModel-….fail
//
// make test runs 100 model cases and the full load test (1,000,000
// updates); make soak runs 10,000 model cases (-rapid.checks=10000), the
// load test 5 times, and the kill -9 test of tests/crash 5 times.
package invariants

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
