package cmdhelp_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/cmdhelp"
)

func TestPrintFlagsLeavesTheHiddenOut(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("records", 20, "records to write")
	fs.Duration("wait", time.Second, "how long to wait")
	fs.String("node", "", "node: run as this node (the parent passes it)")
	var b strings.Builder
	cmdhelp.PrintFlags(&b, fs, "node")
	want := "  -records int\n    \trecords to write (default 20)\n" +
		"  -wait duration\n    \thow long to wait (default 1s)\n"
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
