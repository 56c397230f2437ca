package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/internal/testkit/recordtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// TestBadFlagsStopBeforeTheRun gives flags that could only fail at the end
// of a run (a chart or log nobody can write, an address or catalog that
// cannot be parsed): each is refused before anything runs, with exit 2,
// nothing on standard output and one line on standard error naming the
// flag.
func TestBadFlagsStopBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--chart=/nonexistent/x.svg"}, "--chart"},
		{[]string{"--chart=" + dir + ".svg"}, "--chart"}, // a directory named like a chart
		{[]string{"--chart=out.txt"}, "--chart"},
		{[]string{"--log=/nonexistent/demo.log"}, "--log"},
		{[]string{"--metrics-addr=localhost"}, "--metrics-addr"},
		{[]string{"--metrics-addr=:http"}, "--metrics-addr"},
		{[]string{"--catalog=bolt:/nonexistent/x.db"}, "--catalog"},
		{[]string{"--catalog=etcd://nohostport/prefix"}, "--catalog"},
		{[]string{"--catalog=carrier-pigeon"}, "--catalog"},
		{[]string{"--duration=0s"}, "--duration"},
		{[]string{"--latency=-1ms"}, "--latency"},
		{[]string{"--vchannels=10001"}, "--vchannels"},
		{[]string{"--rate=0"}, "--rate"},
		{[]string{"--rate=NaN"}, "--rate"}, // every comparison with NaN fails
		{[]string{"--fail-rate=NaN"}, "--fail-rate"},
		{[]string{"--churn=NaN"}, "--churn"},
		{[]string{"--bad-rate=NaN"}, "--bad-rate"},
		{[]string{"--duration=1000000h"}, "--duration"}, // its default outage overflowed, and began at once
		{[]string{"--outage=1s"}, "outage"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--stall=p0-v003"}, "stall"},                          // no START
		{[]string{"--stall=p0-v3@1s"}, "stall"},                         // not the demo's spelling
		{[]string{"--stall=v003@1s"}, "stall"},                          // no pchannel
		{[]string{"--stall=p0-v003@-1s"}, "stall"},                      // negative start
		{[]string{"--stall=p0-v003@1s+0s"}, "stall"},                    // empty freeze
		{[]string{"--stall=p3-v000@1s"}, "--stall"},                     // --pchannels 3: p0..p2
		{[]string{"--stall=p0-v020@1s"}, "--stall"},                     // --vchannels 20: v000..v019
		{[]string{"--stall=p0-v003@7s"}, "--stall"},                     // 1s left of an 8s run: too short to see
		{[]string{"--stall=p0-v003@1s+1500ms"}, "--stall"},              // shorter than --stall-after + 1s
		{[]string{"--stall=p0-v003@1s", "--stall=p1-v003@1s"}, "stall"}, // one only
		{[]string{"--stall=p0-v003@1s", "--stall-after=0"}, "--stall"},  // nothing would detect it
		{[]string{"--stall-after=1us"}, "--stall-after"},                // below actors.MinStallAfter
		{[]string{"--stall=p0-v003@1s", "--stall-after=-1s"}, "--stall-after"},
		{[]string{"--pchannels=0", "--chart=/nonexistent/x.svg"}, "--pchannels"}, // two errors, one line
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if err := os.MkdirAll(dir+".svg", 0o755); err != nil {
				t.Fatal(err)
			}
			var out, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &out, &stderr)
			if code != exitSetup {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitSetup, out.String(), stderr.String())
			}
			if out.Len() != 0 {
				t.Fatalf("the demo ran:\n%s", out.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "demo: ") || !strings.Contains(msg, tc.flag) {
				t.Fatalf("stderr = %q, want one line naming %s", msg, tc.flag)
			}
		})
	}
}

// TestHelpListsExitCodes: --help documents every exit status the demo uses.
func TestHelpListsExitCodes(t *testing.T) {
	var out, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &stderr); code != exitOK {
		t.Fatalf("--help: exit %d", code)
	}
	for _, code := range []int{exitOK, exitViolated, exitSetup, exitDamaged, exitInterrupted} {
		if !strings.Contains(out.String(), fmt.Sprintf("\n  %-4d ", code)) {
			t.Errorf("--help does not list exit status %d:\n%s", code, out.String())
		}
	}
	// On standard output, for a pager, and within an 80-column terminal.
	if stderr.Len() > 0 {
		t.Errorf("--help wrote to standard error: %q", stderr.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if len([]rune(line)) > 80 {
			t.Errorf("--help line over 80 columns: %q", line)
		}
	}
}

// TestHelpStallAfterDefault: --help gives --stall-after's true default,
// off unless --stall turns it on, not the 1s that --stall uses.
func TestHelpStallAfterDefault(t *testing.T) {
	var out, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &stderr); code != exitOK {
		t.Fatalf("--help: exit %d", code)
	}
	_, entry, _ := strings.Cut(out.String(), "\n  --stall-after ")
	entry, _, _ = strings.Cut(entry, "\n  --")
	entry = strings.Join(strings.Fields(entry), " ")
	if !strings.HasSuffix(entry, "0: off (default: off; 1s with --stall)") || strings.Contains(entry, "(default 1s)") {
		t.Errorf("--stall-after's help: %q", entry)
	}
}

// TestDamagedRecord runs the demo on a bbolt file holding a record that
// fails its checksum: a damaged store, exit 3, with the tool that repairs
// it named.
func TestDamagedRecord(t *testing.T) {
	path := boltHolding(t, []byte("not a record at all"))
	msg, _ := runDamaged(t, path)
	if !strings.Contains(msg, "corrupt checkpoint record") || strings.Count(msg, "verify") != 1 {
		t.Fatalf("stderr = %q, want one line naming the corrupt record and the tool, once", msg)
	}
}

// TestRecordOfAnotherWAL runs the demo on a bbolt file holding a whole
// record of a WAL this build does not know: the demo refuses it, and
// names no repair, which would lose it.
func TestRecordOfAnotherWAL(t *testing.T) {
	rec, err := persistence.EncodeRecord("p1", persistence.Record{Checkpoint: wal.KafkaID(5)})
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := runDamaged(t, boltHolding(t, recordtest.WithWAL(rec, "pglsn")))
	if !strings.Contains(msg, `"pglsn"`) || !strings.Contains(msg, "built with that WAL") || strings.Contains(msg, "delete") {
		t.Fatalf("stderr = %q, want one line naming the WAL and the tool built with it, and no repair", msg)
	}
}

// boltHolding makes a bbolt file whose checkpoints' bucket holds record,
// as it is, for the pchannel p1, and returns its path, closed.
func boltHolding(t *testing.T, record []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lowwater.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("lowwater-checkpoints"))
		if err != nil {
			return err
		}
		return b.Put([]byte("p1"), record)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// runDamaged runs the demo on the bbolt file at path, wants the exit of a
// damaged store and one line on standard error, and returns that line and
// what the demo printed on standard output.
func runDamaged(t *testing.T, path string) (stderrLine, stdout string) {
	t.Helper()
	var out, stderr bytes.Buffer
	code := run(context.Background(), []string{"--duration=1s", "--view=plain", "--catalog=bolt:" + path}, &out, &stderr)
	if code != exitDamaged {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", code, exitDamaged, stderr.String())
	}
	if strings.Count(stderr.String(), "\n") != 1 {
		t.Fatalf("stderr = %q, want one line", stderr.String())
	}
	return stderr.String(), out.String()
}

// savedBolt makes a bbolt catalog of n saves, one commit each, the i-th
// of kafka:i+1 to the pchannel name(i), and returns its path, closed.
func savedBolt(t *testing.T, n int, name func(i int) string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lowwater.db")
	b, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := b.Save(context.Background(), name(i), wal.KafkaID(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDamagedMetaPage runs the demo on a bbolt file with a meta page
// zeroed: bbolt would open it as of the other page's commit, and the
// demo's first save would make the loss of the newer one permanent. It
// refuses the file in one line, and leaves it as it was.
func TestDamagedMetaPage(t *testing.T) {
	for page := range 2 {
		t.Run(fmt.Sprintf("page %d", page), func(t *testing.T) {
			path := savedBolt(t, 3, func(i int) string { return "p0" })
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			size := os.Getpagesize() // bbolt's page size for a file it made
			clear(data[page*size : (page+1)*size])
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			msg, _ := runDamaged(t, path)
			if !strings.Contains(msg, fmt.Sprintf("meta page %d is damaged", page)) || !strings.Contains(msg, path) {
				t.Fatalf("stderr = %q, want one line naming %s and its damaged meta page", msg, path)
			}
			if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, data) {
				t.Fatalf("the demo changed the damaged file (%v)", err)
			}
		})
	}
}

// TestDamagedBoltFile runs the demo on a bbolt file that was emptied or
// truncated: it says so in one line on standard error, names the file, and
// exits with the status of a damaged store, not a stack trace.
func TestDamagedBoltFile(t *testing.T) {
	for _, size := range []int64{0, 8 << 10} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			path := savedBolt(t, 200, func(i int) string { return fmt.Sprintf("p%d", i) })
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
			msg, out := runDamaged(t, path)
			if !strings.Contains(msg, "damaged") || !strings.Contains(msg, path) {
				t.Fatalf("stderr = %q, want one line saying %s is damaged", msg, path)
			}
			if strings.Contains(out, "PASS") {
				t.Fatalf("the demo ran on a damaged store:\n%s", out)
			}
		})
	}
}
