package etcdcatalog_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEShowsServe checks that the README's etcd section shows serve
// as example_actors_test.go has it, which Example_actors runs against an
// embedded etcd: what a newcomer pastes compiles and does what it says.
func TestREADMEShowsServe(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile("example_actors_test.go")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(file), "// serve owns")
	if i < 0 {
		t.Fatal("example_actors_test.go has no serve")
	}
	if !strings.Contains(string(readme), "```go\n"+string(file[i:])+"```\n") {
		t.Fatal("README.md does not show serve as example_actors_test.go has it: copy it under \"Sharing pchannels across machines: etcd\"")
	}
}
