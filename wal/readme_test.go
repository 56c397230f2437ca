package wal_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEShowsRegister checks that the README's registration of a WAL
// is example_lsn_test.go to the letter, from its imports on: what a
// newcomer pastes into a package of their own is what ExampleRegister
// runs.
func TestREADMEShowsRegister(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("example_lsn_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, program, ok := strings.Cut(string(file), "package wal_test\n\n")
	if !ok {
		t.Fatal("example_lsn_test.go does not start with its package clause")
	}
	if !strings.Contains(string(readme), "```go\n"+program+"```\n") {
		t.Fatal("README.md does not show wal/example_lsn_test.go as it is, from its imports on: copy it under \"Your own WAL, your own catalog\"")
	}
}
