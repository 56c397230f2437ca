package cmdhelp_test

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/cmdhelp"
)

func TestPrintFlagsLeavesTheHiddenOut(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Int("records", 20, "records to write")
	fs.Duration("wait", time.Second, "how long to wait")
	fs.String("node", "", "node: run as this node (the parent passes it)")
	if err := fs.Parse([]string{"--records=5", "--help"}); err != flag.ErrHelp {
		t.Fatalf("parse: %v", err)
	}
	var b strings.Builder
	cmdhelp.PrintFlags(&b, fs, "node")
	want := "  -records int\n    \trecords to write (default 20)\n" +
		"  -wait duration\n    \thow long to wait (default 1s)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
