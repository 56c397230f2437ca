package main

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The program the README's Quick start shows, run as a newcomer would.
func Example() {
	main()
	// Output:
	// start at kafka:100
	// stopped; persisted: kafka:120 flushed: true
	// durable: kafka:120
}

// TestREADME checks that the README's Quick start is this program, to the
// letter, so that what a newcomer pastes is what the Example runs.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```go\n"+string(program)+"```\n") {
		t.Fatal("README.md does not show examples/quickstart/main.go as it is: copy it into the Quick start")
	}
}
