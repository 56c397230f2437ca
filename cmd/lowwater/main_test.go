package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/internal/testkit/cmdtest"
	"github.com/lowwater/lowwater/internal/testkit/termtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// binary is the lowwater command, built once by TestMain: the tests run
// the real program, flags, exit codes and all.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lowwater-cli")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "lowwater")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// result is one run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// lw runs the binary with args and the environment variables env
// ("K=V"), within a minute.
func lw(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return r
}

// lwWith runs the binary as lw does, with stdout to out unless it is nil
// (a closed pipe, /dev/full), under a file size limit of blocks 512-byte
// blocks unless it is negative: the limit stands in for a full disk.
func lwWith(t *testing.T, out *os.File, blocks int, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script := `exec "$0" "$@"`
	if blocks >= 0 {
		script = fmt.Sprintf("ulimit -f %d && %s", blocks, script)
	}
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", script, binary}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if out != nil {
		cmd.Stdout = out
	}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run %v: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// closedPipe is the write end of a pipe nobody reads: a write to it ends
// the process with SIGPIPE, as `| head` does once head has exited.
func closedPipe(t *testing.T) *os.File {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	require.NoError(t, r.Close())
	t.Cleanup(func() { w.Close() })
	return w
}

// on runs lw against the catalog url.
func on(t *testing.T, url string, args ...string) result {
	t.Helper()
	return lw(t, nil, append([]string{"--catalog", url}, args...)...)
}

// withoutHints drops verify's advice, a line per kind of finding
// ("  KIND: …"): whole for grep, it is the terminal's wrapper that lays it
// out within the width (the cli package's tests).
func withoutHints(out string) string {
	lines := strings.Split(out, "\n")
	return strings.Join(slices.DeleteFunc(lines, verifyHint.MatchString), "\n")
}

var verifyHint = regexp.MustCompile(`^  [A-Z][A-Z ]*: `)

func wantCode(t *testing.T, r result, code int, contains ...string) {
	t.Helper()
	require.Equal(t, code, r.code, "%s", r)
	for _, c := range contains {
		require.Contains(t, r.stdout+r.stderr, c, "%s", r)
	}
}

// seedBolt makes a bbolt catalog holding ids, and corrupt records for the
// names in corrupt, and returns its path.
func seedBolt(t *testing.T, ids map[string]wal.MessageID, corrupt ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	for p, id := range ids {
		require.NoError(t, b.Save(context.Background(), p, id))
	}
	require.NoError(t, b.Close())
	if len(corrupt) > 0 {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		require.NoError(t, err)
		require.NoError(t, db.Update(func(tx *bolt.Tx) error {
			for _, p := range corrupt {
				// Its own bytes damaged: a record that may be another
				// pchannel's would hold back every name with nothing
				// stored.
				rec, err := persistence.EncodeRecord(p, persistence.Record{Checkpoint: wal.KafkaID(1)})
				if err != nil {
					return err
				}
				rec[len(rec)-1] ^= 0x01
				if err := tx.Bucket([]byte("lowwater-checkpoints")).Put([]byte(p), rec); err != nil {
					return err
				}
			}
			return nil
		}))
		require.NoError(t, db.Close())
	}
	return path
}

// stored reads the checkpoints the bbolt file holds now, corrupt records
// left out.
func stored(t *testing.T, path string) map[string]wal.MessageID {
	t.Helper()
	all := map[string]wal.MessageID{}
	for _, e := range stored2(t, path) {
		if e.Err == nil {
			all[e.PChannel] = e.Checkpoint
		}
	}
	return all
}

var seed = map[string]wal.MessageID{
	"by-dev-rootcoord-dml_0": wal.KafkaID(1200),
	"by-dev-rootcoord-dml_1": wal.PulsarID{LedgerID: 88, EntryID: 1402, Partition: 1},
	"by-dev-rootcoord-dml_2": wal.WoodpeckerID{SegmentID: 3, EntryID: 77},
}

func TestListGetVerify(t *testing.T) {
	path := seedBolt(t, seed, "by-dev-rootcoord-dml_9")
	url := "bolt:" + path

	r := on(t, url, "list")
	wantCode(t, r, cli.ExitOK)
	require.Equal(t, `PCHANNEL                WAL         CHECKPOINT          TERM  VERSION
by-dev-rootcoord-dml_0  kafka       kafka:1200          0     2
by-dev-rootcoord-dml_1  pulsar      pulsar:88:1402:0@1  0     2
by-dev-rootcoord-dml_2  woodpecker  woodpecker:3:77     0     2
by-dev-rootcoord-dml_9  -           CORRUPT             -     -
4 pchannels, 1 unreadable (run verify)
`, r.stdout)
	for _, line := range strings.Split(r.stdout, "\n") {
		require.LessOrEqual(t, len(line), 80, line)
	}

	r = on(t, url, "list", "--json")
	wantCode(t, r, cli.ExitOK)
	// The JSON as a script reads it: key names matter.
	type listed struct {
		PChannel   string `json:"pchannel"`
		WAL        string `json:"wal"`
		Checkpoint string `json:"checkpoint"`
		Term       uint64 `json:"term"`
		Version    int    `json:"version"`
		Error      string `json:"error"`
	}
	var entries []listed
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &entries))
	require.Len(t, entries, 4)
	require.Equal(t, listed{PChannel: "by-dev-rootcoord-dml_1", WAL: "pulsar", Checkpoint: "pulsar:88:1402:0@1", Version: 2}, entries[1])
	require.Equal(t, "by-dev-rootcoord-dml_9", entries[3].PChannel)
	require.Equal(t, "checksum mismatch", entries[3].Error)

	r = on(t, url, "get", "by-dev-rootcoord-dml_1")
	wantCode(t, r, cli.ExitOK)
	require.Equal(t, "pchannel    by-dev-rootcoord-dml_1\nwal         pulsar\ncheckpoint  pulsar:88:1402:0@1\nterm        0\nversion     2\n", r.stdout)
	wantCode(t, on(t, url, "get", "nope"), cli.ExitNotFound, "nope: no checkpoint stored")
	r = on(t, url, "get", "by-dev-rootcoord-dml_9")
	wantCode(t, r, cli.ExitCorrupt)
	// Its header unread, it has no term or version to show.
	require.Equal(t, "pchannel    by-dev-rootcoord-dml_9\nwal         -\ncheckpoint  CORRUPT: checksum mismatch\nterm        -\nversion     -\n", r.stdout)

	r = on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt, "CORRUPT  by-dev-rootcoord-dml_9: checksum mismatch", "4 records, 1 unreadable", "lowwater: 1 unreadable record\n")
	wantCode(t, on(t, "bolt:"+seedBolt(t, seed), "verify"), cli.ExitOK, "3 records, 0 unreadable")

	// Reads never write: the file is byte for byte the same.
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	on(t, url, "list")
	on(t, url, "dump")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestSetRaisesAndLowersOnlyWithForce(t *testing.T) {
	path := seedBolt(t, seed, "broken")
	url := "bolt:" + path
	p := "by-dev-rootcoord-dml_0"

	wantCode(t, on(t, url, "set", p, "kafka:1500"), cli.ExitOK, p+": raised from kafka:1200 to kafka:1500")
	require.Equal(t, wal.KafkaID(1500), stored(t, path)[p])
	wantCode(t, on(t, url, "set", p, "1500"), cli.ExitOK, "unchanged at kafka:1500")

	// Lowering: refused, with the replay it would cause; nothing written.
	r := on(t, url, "set", p, "kafka:1000")
	wantCode(t, r, cli.ExitRefused, "lowering needs --force", "(500 messages)")
	require.Equal(t, wal.KafkaID(1500), stored(t, path)[p])
	wantCode(t, on(t, url, "set", p, "kafka:1000", "--force", "--dry-run"), cli.ExitOK, "would LOWER from kafka:1500 to kafka:1000")
	require.Equal(t, wal.KafkaID(1500), stored(t, path)[p])
	r = on(t, url, "set", "--force", p, "kafka:1000")
	wantCode(t, r, cli.ExitOK, "LOWERED from kafka:1500 to kafka:1000", "warning: by-dev-rootcoord-dml_0: replay")
	require.Equal(t, wal.KafkaID(1000), stored(t, path)[p])

	// A new pchannel needs its WAL in the text.
	wantCode(t, on(t, url, "set", "fresh", "rocksmq:5"), cli.ExitOK, "fresh: created at rocksmq:5")
	wantCode(t, on(t, url, "set", "fresh2", "5"), cli.ExitUsage,
		`lowwater: ID "5": nothing is stored for the pchannel to take a WAL from: give one (kafka:5, say); known WALs: kafka, `)

	// Bad text and unknown WALs are usage errors and write nothing.
	wantCode(t, on(t, url, "set", p, "kafka:12x"), cli.ExitUsage, "malformed message ID text")
	wantCode(t, on(t, url, "set", "by-dev-rootcoord-dml_1", "pulsar:1:2"), cli.ExitUsage, "malformed")
	wantCode(t, on(t, url, "set", p, "nats:5"), cli.ExitUsage, `unknown WAL name: "nats"`, "known WALs: kafka, pulsar")

	// A Pulsar ID without its partition keeps the stored one (@1); a
	// partition that differs alone is no raise, and needs --force.
	pulsar := "by-dev-rootcoord-dml_1"
	wantCode(t, on(t, url, "set", pulsar, "88:1402:0@5"), cli.ExitRefused,
		"pulsar:88:1402:0@5 differs from the stored pulsar:88:1402:0@1 only in what orders neither")
	wantCode(t, on(t, url, "set", pulsar, "88:1402:0"), cli.ExitOK, "unchanged at pulsar:88:1402:0@1")
	wantCode(t, on(t, url, "set", pulsar, "88:1500:0"), cli.ExitOK, "raised from pulsar:88:1402:0@1 to pulsar:88:1500:0@1")
	wantCode(t, on(t, url, "set", pulsar, "88:1500:0@5", "--force"), cli.ExitOK, "replaced from pulsar:88:1500:0@1 to pulsar:88:1500:0@5")
	require.Equal(t, wal.PulsarID{LedgerID: 88, EntryID: 1500, Partition: 5}, stored(t, path)[pulsar])
	wantCode(t, on(t, url, "set", pulsar, "88:1402:0@1", "--force"), cli.ExitOK, "LOWERED")

	// Switching WAL, or writing over a corrupt record, needs --force.
	wantCode(t, on(t, url, "set", p, "pulsar:1:2:3"), cli.ExitRefused, "stores a kafka checkpoint, not pulsar")
	wantCode(t, on(t, url, "set", "broken", "kafka:9"), cli.ExitRefused, "corrupt", "--force replaces it")
	wantCode(t, on(t, url, "set", "broken", "kafka:9", "--force"), cli.ExitOK, "broken: replaced from a corrupt record to kafka:9")

	require.Equal(t, map[string]wal.MessageID{
		p:                        wal.KafkaID(1000),
		"by-dev-rootcoord-dml_1": seed["by-dev-rootcoord-dml_1"],
		"by-dev-rootcoord-dml_2": seed["by-dev-rootcoord-dml_2"],
		"fresh":                  wal.RocksMQID(5),
		"broken":                 wal.KafkaID(9),
	}, stored(t, path))
}

func TestDelete(t *testing.T) {
	path := seedBolt(t, seed, "broken")
	url := "bolt:" + path
	wantCode(t, on(t, url, "delete", "broken", "--dry-run"), cli.ExitOK, "broken: would delete a corrupt record")
	require.Len(t, stored2(t, path), 4)
	wantCode(t, on(t, url, "delete", "broken"), cli.ExitOK, "broken: deleted a corrupt record")
	// A record a node recovers from goes only with --force: deleting it
	// is a lowering, to whatever the vchannels hold.
	for _, args := range [][]string{{"delete", "by-dev-rootcoord-dml_2"}, {"delete", "by-dev-rootcoord-dml_2", "--dry-run"}} {
		wantCode(t, on(t, url, args...), cli.ExitRefused,
			"by-dev-rootcoord-dml_2: delete removes woodpecker:3:77, and a node that recovers by-dev-rootcoord-dml_2 then starts "+
				"from its vchannels' own checkpoints, re-reading the WAL from the lowest of them: --force deletes it")
	}
	require.Len(t, stored(t, path), 3)
	wantCode(t, on(t, url, "delete", "by-dev-rootcoord-dml_2", "--force", "--dry-run"), cli.ExitOK, "would delete woodpecker:3:77")
	wantCode(t, on(t, url, "delete", "by-dev-rootcoord-dml_2", "--force"), cli.ExitOK, "deleted woodpecker:3:77")
	wantCode(t, on(t, url, "delete", "by-dev-rootcoord-dml_2"), cli.ExitOK, "nothing stored")
	wantCode(t, on(t, url, "verify"), cli.ExitOK, "2 records, 0 unreadable")
	require.Len(t, stored(t, path), 2)
}

// stored2 counts the records, corrupt ones included.
func stored2(t *testing.T, path string) []persistence.Entry {
	t.Helper()
	b, err := persistence.OpenBolt(path, persistence.WithReadOnly(true))
	require.NoError(t, err)
	defer b.Close()
	entries, err := b.Inspect(context.Background())
	require.NoError(t, err)
	return entries
}

// TestLockedBolt: a running node holds the file; every command says so
// within --lock-timeout, and nothing hangs. On Linux it names the
// process that holds it, as /proc/locks tells it.
func TestLockedBolt(t *testing.T) {
	path := seedBolt(t, seed)
	node, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	defer node.Close()
	holder := "is locked by another process"
	if runtime.GOOS == "linux" {
		comm, err := os.ReadFile("/proc/self/comm")
		require.NoError(t, err)
		holder += fmt.Sprintf(" (pid %d, %s), most likely", os.Getpid(), strings.TrimSpace(string(comm)))
	}
	for _, args := range [][]string{{"list"}, {"verify"}, {"set", "by-dev-rootcoord-dml_0", "kafka:9999"}, {"delete", "x"}} {
		began := time.Now()
		r := on(t, "bolt:"+path, append(args, "--lock-timeout", "200ms")...)
		wantCode(t, r, cli.ExitFailed, holder, "running lowwater node")
		assert.Less(t, time.Since(began), 10*time.Second, args)
	}
	require.NoError(t, node.Close())
	require.Equal(t, wal.KafkaID(1200), stored(t, path)["by-dev-rootcoord-dml_0"])
}

// A damaged bbolt file is exit 3 on every command, with what to do about it,
// never a "catalog failure" a script would take for an unreachable store.
func TestDamagedBolt(t *testing.T) {
	path := seedBolt(t, seed)
	require.NoError(t, os.Truncate(path, 4096)) // one page: bbolt's "file size too small"
	empty := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for _, file := range []string{path, empty} {
		for _, args := range [][]string{{"list"}, {"verify"}, {"set", "by-dev-rootcoord-dml_0", "kafka:9999"}} {
			r := on(t, "bolt:"+file, args...)
			wantCode(t, r, cli.ExitCorrupt, "checkpoint store is damaged", "restore the file from a backup")
			// The library's own names mean nothing to an operator.
			require.NotContains(t, r.stderr, "OpenBolt")
			if file == empty {
				require.Contains(t, r.stderr, "the file is empty")
			}
		}
	}
}

// A damaged file opened for a write (set) names the damage, as a read does,
// not a panic inside bbolt: here a file cut short of its pages.
func TestDamagedBoltNamedOnWrite(t *testing.T) {
	path := seedBolt(t, seed)
	require.NoError(t, os.Truncate(path, 8192)) // the two meta pages, no freelist
	for _, args := range [][]string{{"list"}, {"set", "by-dev-rootcoord-dml_0", "kafka:9999"}} {
		r := on(t, "bolt:"+path, args...)
		wantCode(t, r, cli.ExitCorrupt, "checkpoint store is damaged", "the file has 8192 bytes")
		require.NotContains(t, r.stderr, "panicked", args)
	}
}

// A write to a bbolt file that does not exist is refused, dry run or not,
// and says which command creates one: a mistyped path is not made into a
// new, empty catalog. restore creates the file.
func TestWritesNeedAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	url := "bolt:" + path
	for _, args := range [][]string{
		{"set", "by-dev-rootcoord-dml_0", "kafka:1"},
		{"set", "--dry-run", "by-dev-rootcoord-dml_0", "kafka:1"},
		{"delete", "by-dev-rootcoord-dml_0"},
	} {
		wantCode(t, on(t, url, args...), cli.ExitFailed, "no such file or directory", "restore creates one")
		_, err := os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist, args)
	}
	dump := filepath.Join(t.TempDir(), "dump.json")
	wantCode(t, on(t, "bolt:"+seedBolt(t, seed), "dump", dump), cli.ExitOK)
	wantCode(t, on(t, url, "restore", dump), cli.ExitOK)
	require.Equal(t, wal.KafkaID(1200), stored(t, path)["by-dev-rootcoord-dml_0"])
}

func TestCommandLine(t *testing.T) {
	path := seedBolt(t, seed)
	r := lw(t, nil, "--help")
	wantCode(t, r, cli.ExitOK, "usage: lowwater", "Exit codes:")
	for _, line := range strings.Split(r.stdout, "\n") {
		require.LessOrEqual(t, len(line), 80, line)
	}
	wantCode(t, lw(t, nil), cli.ExitUsage, "no command")
	wantCode(t, lw(t, nil, "list"), cli.ExitUsage, "no catalog")
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "frobnicate"), cli.ExitUsage, `unknown command "frobnicate"`)
	help := lw(t, nil, "help")
	wantCode(t, help, cli.ExitOK)
	require.Equal(t, r.stdout, help.stdout, "lowwater help is lowwater --help")
	// A command's flag before the command says where it goes.
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "--dry-run", "set", "p0", "kafka:60"), cli.ExitUsage,
		"flag provided but not defined: --dry-run: a command's own flags go after it (lowwater COMMAND --dry-run …)")
	r = lw(t, nil, "--catalog", "bolt:"+path, "--bogus", "list")
	wantCode(t, r, cli.ExitUsage, "flag provided but not defined: --bogus\n")
	// A flag is named as --help names it, with two dashes.
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "--timeout", "abc", "list"), cli.ExitUsage, `invalid value "abc" for flag --timeout`)
	for _, spec := range []string{"memory", "memory:", "memory:x"} {
		r := lw(t, nil, "--catalog", spec, "list")
		wantCode(t, r, cli.ExitUsage, "--catalog "+strconv.Quote(spec)+": a memory catalog lives inside one process; use bolt:PATH or etcd://HOST:PORT/PREFIX")
		require.NotContains(t, r.stderr, "takes no argument")
	}
	wantCode(t, lw(t, nil, "--catalog", "nats://x", "list"), cli.ExitUsage, "unknown kind")
	// Credentials in the URL: refused, said where they go, the password
	// never quoted.
	r = lw(t, nil, "--catalog", "etcd://u:s3/cr@t@127.0.0.1:2379/p", "list")
	wantCode(t, r, cli.ExitUsage, `"etcd://…@127.0.0.1:2379/p"; give --etcd-user NAME, and the password in $LOWWATER_ETCD_PASSWORD`)
	require.NotContains(t, r.stderr, "s3")
	wantCode(t, lw(t, nil, "--catalog", "bolt", "list"), cli.ExitUsage, "bolt:PATH")
	wantCode(t, lw(t, nil, "--catalog", "etcd://127.0.0.1:1/lowwater/", "list"), cli.ExitUsage, `prefix "lowwater/" ends with '/'`)
	// Nothing listens on port 1: said at once, not after --timeout.
	wantCode(t, lw(t, nil, "--catalog", "etcd://127.0.0.1:1/lowwater", "--timeout", "1m", "list"), cli.ExitFailed,
		"nothing listens at 127.0.0.1:1 (connection refused)")
	// restore prints its own errors; the hint comes after them.
	dump := filepath.Join(t.TempDir(), "d.json")
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "dump", dump), cli.ExitOK)
	// An endpoint that takes connections and never answers runs out of
	// --timeout.
	silent := cmdtest.SilentListener(t)
	r = lw(t, nil, "--catalog", "etcd://"+silent+"/lowwater", "--timeout", "500ms", "restore", dump)
	wantCode(t, r, cli.ExitFailed, "(--timeout 500ms passed): "+silent+" takes connections but answers no request "+
		"within 1s: is etcd stopped, or without a quorum?")
	require.Equal(t, 1, strings.Count(r.stderr, "--timeout"), "the timeout said once: %s", r.stderr)
	// Named beside an endpoint that has a reason of its own: it was not.
	wantCode(t, lw(t, nil, "--catalog", "etcd://127.0.0.1:1,"+silent+"/lowwater", "--timeout", "500ms", "list"), cli.ExitFailed,
		"(--timeout 500ms passed): cannot connect to 127.0.0.1:1: ", "; "+silent+" takes connections but answers no request")
	// What the environment says for etcd is no business of a bbolt command.
	etcdEnv := []string{"LOWWATER_CATALOG=bolt:" + path, "LOWWATER_ETCD_CACERT=/nonexistent", "LOWWATER_ETCD_CERT=/x",
		"LOWWATER_ETCD_USER=u"}
	wantCode(t, lw(t, etcdEnv, "get", "by-dev-rootcoord-dml_0"), cli.ExitOK, "kafka:1200")
	wantCode(t, lw(t, etcdEnv, "--etcd-user", "u", "get", "by-dev-rootcoord-dml_0"), cli.ExitUsage,
		"--etcd-user is for an etcd catalog, not bbolt file "+path)
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "get"), cli.ExitUsage, "usage: lowwater get [--quoted] PCHANNEL")
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "list", "--force"), cli.ExitUsage, "flag provided but not defined")
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+filepath.Join(t.TempDir(), "none.db"), "list"), cli.ExitFailed, "no such file")
	wantCode(t, lw(t, []string{"LOWWATER_CATALOG=bolt:" + path}, "get", "by-dev-rootcoord-dml_0"), cli.ExitOK, "kafka:1200")
	// After "--" what begins with "-" is an argument: it was taken for a
	// flag. dump's "-" is standard output, not a file named "-".
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "get", "-p"), cli.ExitUsage, "flag provided but not defined: -p\n")
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "get", "--", "-p"), cli.ExitNotFound, "-p: no checkpoint stored")
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "set", "by-dev-rootcoord-dml_0", "--", "-5"), cli.ExitRefused,
		"kafka:-5 is not an offset") // the argument reached set
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "dump", "-"), cli.ExitOK, `"format": "lowwater-checkpoints/1"`)
	// A "--" that is a flag's value ends nothing.
	wantCode(t, lw(t, nil, "--catalog", "bolt:"+path, "set", "--bucket", "--", "p0", "kafka:60", "--dry-run"), cli.ExitUsage,
		`has no bucket "--"`)
}

// A set or delete that writes nothing (refused, unchanged, nothing to
// delete, a dry run) leaves the file byte for byte as it was: opening it
// for writing used to commit a transaction of its own.
func TestWritesThatWriteNothingLeaveTheFile(t *testing.T) {
	path := seedBolt(t, seed)
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, c := range []struct {
		code int
		args []string
	}{
		{cli.ExitRefused, []string{"set", "by-dev-rootcoord-dml_0", "kafka:1"}},
		{cli.ExitOK, []string{"set", "by-dev-rootcoord-dml_0", "kafka:1200"}},
		{cli.ExitOK, []string{"set", "by-dev-rootcoord-dml_0", "kafka:9999", "--dry-run"}},
		{cli.ExitOK, []string{"delete", "nothing-here"}},
	} {
		r := on(t, "bolt:"+path, c.args...)
		wantCode(t, r, c.code)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, bytes.Equal(before, after), "%v changed the file", c.args)
	}
}

// A dump that runs out of room keeps no file: the same command succeeds
// once there is room again, where the partial file used to block it
// ("file exists"). The file size limit stands in for a full disk.
func TestDumpOutOfRoomKeepsNoFile(t *testing.T) {
	src := seedBolt(t, seed)
	file := filepath.Join(t.TempDir(), "dump.json")
	wantCode(t, lwWith(t, nil, 0, "--catalog", "bolt:"+src, "dump", file), cli.ExitFailed, "nothing kept")
	_, err := os.Stat(file)
	require.ErrorIs(t, err, os.ErrNotExist, "the partial dump was kept")

	wantCode(t, on(t, "bolt:"+src, "dump", file), cli.ExitOK, "dumping 3 checkpoints")
}

// Output that cannot be written (a closed pipe, whose SIGPIPE ends the
// process, or a full disk) never cuts a restore short, nor leaves a dump
// file behind: restore prints once its writes are done, and dump before it
// makes the file. A restore piped to `head` used to die after a few
// records, its output lost and the restore half done.
func TestLostOutputCutsNoWriteShort(t *testing.T) {
	src := seedBolt(t, seed)
	file := filepath.Join(t.TempDir(), "dump.json")
	wantCode(t, on(t, "bolt:"+src, "dump", file), cli.ExitOK, "dumping 3 checkpoints")

	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	require.NoError(t, err)
	defer full.Close()

	for name, out := range map[string]*os.File{"closed pipe": closedPipe(t), "full disk": full} {
		dst := filepath.Join(t.TempDir(), "new.db")
		r := lwWith(t, out, -1, "--catalog", "bolt:"+dst, "restore", file)
		require.NotEqual(t, cli.ExitOK, r.code, "%s: %s", name, r)
		require.Equal(t, seed, stored(t, dst), "%s: the restore was cut short", name)

		again := filepath.Join(t.TempDir(), "again.json")
		r = lwWith(t, out, -1, "--catalog", "bolt:"+src, "dump", again)
		require.NotEqual(t, cli.ExitOK, r.code, "%s: %s", name, r)
		_, err := os.Stat(again)
		require.ErrorIs(t, err, os.ErrNotExist, "%s: a dump file was left", name)
	}
	wantCode(t, lwWith(t, full, -1, "--help"), cli.ExitFailed, "writing the help")
}

// A bbolt file that could not be made (a full disk) is not left behind:
// bbolt writes its first pages as it creates one, and the empty file a
// failed write left was called damaged by the next open, exit 3, "restore
// the file from a backup".
func TestFileThatCouldNotBeMadeIsNotLeft(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dump.json")
	wantCode(t, on(t, "bolt:"+seedBolt(t, seed), "dump", file), cli.ExitOK)
	dst := filepath.Join(t.TempDir(), "new.db")
	wantCode(t, lwWith(t, nil, 0, "--catalog", "bolt:"+dst, "restore", file), cli.ExitFailed)
	_, err := os.Stat(dst)
	require.ErrorIs(t, err, os.ErrNotExist, "the file that could not be made was left")

	wantCode(t, on(t, "bolt:"+dst, "restore", file), cli.ExitOK, "restored 3 checkpoints")
	require.Equal(t, seed, stored(t, dst))
}

// Nor does lost output hide why a restore failed or was refused: the
// error goes to stderr before the lines for stdout, which a closed pipe
// ends with SIGPIPE. The failure here is the file size limit, part-way.
func TestLostOutputHidesNoFailure(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	writeDump(t, big, 3000)
	empty := filepath.Join(dir, "empty.json")
	require.NoError(t, os.WriteFile(empty, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[]}`), 0o600))
	dst := filepath.Join(dir, "dst.db")
	wantCode(t, on(t, "bolt:"+dst, "restore", empty), cli.ExitOK)
	makeBolt(t, dst) // a restore into a new file lists nothing it wrote: it made no file

	r := lwWith(t, closedPipe(t), 64, "--catalog", "bolt:"+dst, "restore", big) // 64 blocks: the empty store's 32 KiB
	require.NotEqual(t, cli.ExitOK, r.code)
	require.Regexp(t, `after [1-9][0-9]* of 3000 checkpoints written: .*file too large`, r.stderr)

	// A dry run that would be refused: the refusal, not a SIGPIPE.
	lower := filepath.Join(dir, "lower.json")
	data, err := os.ReadFile(big)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(lower, []byte(strings.Replace(string(data), `"kafka:1"}`, `"kafka:0"}`, 1)), 0o600))
	wantCode(t, on(t, "bolt:"+dst, "set", "p00000", "kafka:5"), cli.ExitOK)
	wantCode(t, lwWith(t, closedPipe(t), -1, "--catalog", "bolt:"+dst, "restore", lower, "--dry-run"), cli.ExitRefused, "refused: ")
}

// makeBolt makes an empty catalog at path, as a node's first start does.
func makeBolt(t *testing.T, path string) {
	t.Helper()
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

// A bbolt restore whose writes share commits, failing part way (the file
// size limit stands in for a full disk), counts only the records it
// wrote, whatever order they were written in: it lists them, each is in
// the file, and a rerun writes the rest.
func TestRestoreFailingPartWayResumes(t *testing.T) {
	const n = 20000
	dir := t.TempDir()
	file := filepath.Join(dir, "dump.json")
	writeDump(t, file, n)
	dst := filepath.Join(dir, "dst.db")
	makeBolt(t, dst)
	r := lwWith(t, nil, 2048, "--catalog", "bolt:"+dst, "restore", file) // 1 MiB
	require.Equal(t, cli.ExitFailed, r.code, "%s", r)
	m := regexp.MustCompile(`after ([0-9]+) of 20000 checkpoints written: .*file too large; ` +
		`those written are listed on standard output, and a rerun writes the rest\n`).FindStringSubmatch(r.stderr)
	require.NotNil(t, m, "%s", r)
	// The file is named as the command named it, not by the temporary
	// name bbolt opened it under when it was made.
	require.NotContains(t, r.stderr, ".lowwater-new-", "%s", r)
	written, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.Greater(t, written, 0)
	require.Less(t, written, n)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, written, "%s", r)
	got := stored(t, dst)
	require.Len(t, got, written, "a commit that failed wrote none of its records")
	last := -1
	for _, line := range lines {
		var i, id int
		_, err := fmt.Sscanf(line, "p%05d: created at kafka:%d", &i, &id)
		require.NoError(t, err, line)
		require.Greater(t, i, last, "not in the dump's order")
		last = i
		require.Equal(t, i+1, id, line)
		require.Equal(t, wal.KafkaID(id), got[fmt.Sprintf("p%05d", i)], line)
	}

	wantCode(t, on(t, "bolt:"+dst, "restore", file), cli.ExitOK,
		fmt.Sprintf("restored 20000 checkpoints into bbolt file %s (%d written)", dst, n-written))
	got = stored(t, dst)
	require.Len(t, got, n)
	for i := range n {
		require.Equal(t, wal.KafkaID(i+1), got[fmt.Sprintf("p%05d", i)])
	}
}

// A restore into a new bbolt file builds it aside and places it once
// every record is in it: one that fails part way, or is killed (SIGKILL,
// the OOM killer, a dropped ssh session), leaves no file at the path. It
// left one holding part of the dump, which verify passed and a node
// started on, replaying the pchannels left out.
func TestRestoreIntoANewFileMakesItWholeOrNotAtAll(t *testing.T) {
	const n = 20000
	dir := t.TempDir()
	file := filepath.Join(dir, "dump.json")
	writeDump(t, file, n)
	data := filepath.Join(dir, "data")
	require.NoError(t, os.Mkdir(data, 0o700))
	dst := filepath.Join(data, "dst.db")
	r := lwWith(t, nil, 2048, "--catalog", "bolt:"+dst, "restore", file) // 1 MiB
	require.Equal(t, cli.ExitFailed, r.code, "%s", r)
	require.Regexp(t, `^lowwater: .*file too large; the new file `+regexp.QuoteMeta(dst)+
		` was not made, and nothing was written: a rerun restores the whole dump\n$`, r.stderr)
	require.NotContains(t, r.stderr, ".lowwater-new-", "%s", r)
	require.Equal(t, "", r.stdout)
	left, err := os.ReadDir(data)
	require.NoError(t, err)
	require.Empty(t, left, "no file at the path, and no temporary one beside it")

	// Killed part way, with records written: what is left is a
	// temporary file, which the node's first open removes once it is a
	// minute old.
	many := filepath.Join(dir, "many.json")
	writeDump(t, many, 100_000)
	cmd := exec.Command(binary, "--catalog", "bolt:"+dst, "restore", many)
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool {
		entries, _ := os.ReadDir(data)
		for _, e := range entries {
			if info, err := e.Info(); err == nil && info.Size() > 1<<20 {
				return true
			}
		}
		return false
	}, 30*time.Second, time.Millisecond, "the restore wrote no MiB")
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	_, err = os.Stat(dst)
	require.ErrorIs(t, err, os.ErrNotExist, "a restore killed part way left a file at the path")

	wantCode(t, on(t, "bolt:"+dst, "restore", file), cli.ExitOK,
		fmt.Sprintf("restored 20000 checkpoints into bbolt file %s (%d written)", dst, n))
	got := stored(t, dst)
	require.Len(t, got, n)
	for i := range n {
		require.Equal(t, wal.KafkaID(i+1), got[fmt.Sprintf("p%05d", i)])
	}
}

func TestDumpRestoreBoltToBolt(t *testing.T) {
	src := seedBolt(t, seed)
	file := filepath.Join(t.TempDir(), "dump.json")
	wantCode(t, on(t, "bolt:"+src, "dump", file), cli.ExitOK, "dumping 3 checkpoints")
	// Refused before it says it dumps: it said so, then failed with the
	// system's "file exists".
	r := on(t, "bolt:"+src, "dump", file)
	wantCode(t, r, cli.ExitRefused)
	require.Equal(t, "", r.stdout)
	require.Equal(t, "lowwater: "+file+" exists, and a dump never writes over a file: name another, or - for standard output\n", r.stderr)
	// A directory, and a path through a file: said before the dump is.
	dir := t.TempDir()
	r = on(t, "bolt:"+src, "dump", dir)
	wantCode(t, r, cli.ExitRefused)
	require.Equal(t, "", r.stdout)
	require.Equal(t, "lowwater: "+dir+" is a directory: name a file in it, or - for standard output\n", r.stderr)
	r = on(t, "bolt:"+src, "dump", filepath.Join(file, "x.json"))
	wantCode(t, r, cli.ExitFailed)
	require.Equal(t, "", r.stdout)
	require.Equal(t, "lowwater: dumping to "+filepath.Join(file, "x.json")+": "+file+" is not a directory; nothing written\n", r.stderr)
	nowhere := filepath.Join(t.TempDir(), "nodir", "dump.json")
	r = on(t, "bolt:"+src, "dump", nowhere)
	wantCode(t, r, cli.ExitFailed)
	require.Equal(t, "", r.stdout)
	require.Equal(t, "lowwater: dumping to "+nowhere+": stat "+filepath.Dir(nowhere)+": no such file or directory; nothing written\n", r.stderr)

	dst := filepath.Join(t.TempDir(), "new.db")
	wantCode(t, on(t, "bolt:"+dst, "restore", file, "--dry-run"), cli.ExitOK, "would create")
	_, err := os.Stat(dst)
	require.ErrorIs(t, err, os.ErrNotExist, "a dry run creates no file")
	wantCode(t, on(t, "bolt:"+dst, "restore", file), cli.ExitOK, "restored 3 checkpoints")
	require.Equal(t, seed, stored(t, dst))
	wantCode(t, on(t, "bolt:"+dst, "restore", file), cli.ExitOK, "(0 written)")

	// A dump of a catalog with a corrupt record is refused whole.
	wantCode(t, on(t, "bolt:"+seedBolt(t, seed, "bad"), "dump"), cli.ExitCorrupt, "CORRUPT  bad", "nothing dumped")

	// Restoring below what is stored is refused, and writes nothing at all.
	bigger := seedBolt(t, map[string]wal.MessageID{"by-dev-rootcoord-dml_0": wal.KafkaID(5000)})
	wantCode(t, on(t, "bolt:"+bigger, "restore", file), cli.ExitRefused, "1 of 3 checkpoints refused; nothing written")
	require.Len(t, stored(t, bigger), 1)
	// Forced, it says what the lowering costs, as set does.
	wantCode(t, on(t, "bolt:"+bigger, "restore", "--force", file), cli.ExitOK, "by-dev-rootcoord-dml_0: LOWERED from kafka:5000 to kafka:1200",
		"warning: by-dev-rootcoord-dml_0: replay: consumers restart at kafka:1200 and re-read what follows it up to kafka:5000 (3800 messages)")
	require.Equal(t, seed, stored(t, bigger))

	// A file that does not parse, or whose id bytes and text disagree, is
	// a usage error, with no word of --help: the file is to mend.
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[
		{"pchannel":"a","wal":"kafka","checkpoint":"kafka:1"},
		{"pchannel":"b","wal":"kafka","checkpoint":"kafka:x"}]}`), 0o600))
	r = on(t, "bolt:"+dst, "restore", bad)
	wantCode(t, r, cli.ExitUsage, `checkpoint 1 ("b")`)
	require.NotContains(t, r.stderr, "--help", "%s", r)
	require.NoError(t, os.WriteFile(bad, []byte(`not json`), 0o600))
	r = on(t, "bolt:"+dst, "restore", bad)
	wantCode(t, r, cli.ExitUsage, "bad.json: not a dump file")
	require.NotContains(t, r.stderr, "--help", "%s", r)
	require.NoError(t, os.WriteFile(bad, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[
		{"pchannel":"a","wal":"kafka","checkpoint":"kafka:1","id":"AAAAAAAAAAI="}]}`), 0o600))
	wantCode(t, on(t, "bolt:"+dst, "restore", bad), cli.ExitUsage, "id bytes say kafka:2, checkpoint says kafka:1")
	require.Equal(t, seed, stored(t, dst))

	// Two dumps in one file, or one followed by garbage: only the first
	// would have been restored.
	one := `{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"late","wal":"kafka","checkpoint":"kafka:1"}]}`
	for _, tail := range []string{"\n" + one, "garbage", "}"} {
		require.NoError(t, os.WriteFile(bad, []byte(one+tail), 0o600))
		wantCode(t, on(t, "bolt:"+dst, "restore", bad), cli.ExitUsage, "bad.json: more follows the dump's end")
	}
	require.NoError(t, os.WriteFile(bad, []byte(one+"\n\n"), 0o600))
	wantCode(t, on(t, "bolt:"+dst, "restore", bad, "--dry-run"), cli.ExitOK, "would create")
	// A pipe, which cannot be read twice.
	pipe := exec.Command(binary, "--catalog", "bolt:"+dst, "restore", "/dev/stdin", "--dry-run")
	pipe.Stdin = strings.NewReader(one)
	out, err := pipe.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "late: would create at kafka:1")
	require.Equal(t, seed, stored(t, dst))

	// A key given twice, of which encoding/json keeps the last, matching
	// keys without regard to case.
	for key, dup := range map[string]string{
		"checkpoints": `{"format":"lowwater-checkpoints/1","checkpoints":[],` + one[len(`{"format":"lowwater-checkpoints/1",`):],
		"pchannel":    `{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"a","pchannel":"late","wal":"kafka","checkpoint":"kafka:1"}]}`,
		"Checkpoint":  `{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"a","wal":"kafka","checkpoint":"kafka:9","Checkpoint":"kafka:1"}]}`,
		"PCHANNEL":    `{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"a","PCHANNEL":"late","wal":"kafka","checkpoint":"kafka:1"}]}`,
	} {
		require.NoError(t, os.WriteFile(bad, []byte(dup), 0o600))
		where := "checkpoint 0: " // a checkpoint's key is named with its index
		if key == "checkpoints" {
			where = ""
		}
		wantCode(t, on(t, "bolt:"+dst, "restore", bad), cli.ExitUsage, fmt.Sprintf("bad.json: %skey %q given twice in one object", where, key))
	}
	require.Equal(t, seed, stored(t, dst))
}

// A Pulsar ID in a dump follows set's rule: its text without a partition
// keeps the stored one, and its bytes, when given, are what is written;
// their text must say the same partition; another partition than the
// stored one needs --force.
func TestRestorePulsarPartition(t *testing.T) {
	p := "by-dev-rootcoord-dml_1"
	dst := seedBolt(t, map[string]wal.MessageID{p: wal.PulsarID{LedgerID: 88, EntryID: 1402, Partition: 1}})
	file := filepath.Join(t.TempDir(), "dump.json")
	restore := func(entry string, flags ...string) result {
		require.NoError(t, os.WriteFile(file, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[`+entry+`]}`), 0o600))
		return on(t, "bolt:"+dst, append(append([]string{"restore"}, flags...), file)...)
	}
	wantCode(t, restore(`{"pchannel":"`+p+`","wal":"pulsar","checkpoint":"pulsar:88:1500:0"}`), cli.ExitOK,
		"raised from pulsar:88:1402:0@1 to pulsar:88:1500:0@1")

	raw, err := wal.Marshal(wal.PulsarID{LedgerID: 88, EntryID: 1600, Partition: 5})
	require.NoError(t, err)
	id := base64.StdEncoding.EncodeToString(raw)
	wantCode(t, restore(`{"pchannel":"`+p+`","wal":"pulsar","checkpoint":"pulsar:88:1600:0@1","id":"`+id+`"}`), cli.ExitUsage,
		"id bytes say pulsar:88:1600:0@5, checkpoint says pulsar:88:1600:0@1")
	moved := `{"pchannel":"` + p + `","wal":"pulsar","checkpoint":"pulsar:88:1600:0","id":"` + id + `"}`
	wantCode(t, restore(moved), cli.ExitRefused,
		"pulsar:88:1600:0@5 is of partition 5, the stored pulsar:88:1500:0@1 of partition 1: one pchannel is one partition; --force moves it")
	wantCode(t, restore(moved, "--force"), cli.ExitOK, "raised from pulsar:88:1500:0@1 to pulsar:88:1600:0@5")
	require.Equal(t, map[string]wal.MessageID{p: wal.PulsarID{LedgerID: 88, EntryID: 1600, Partition: 5}}, stored(t, dst))
}

// seqID is a WAL this test process registers and the binary does not: its
// records are well formed, but the binary cannot read their IDs.
type seqID uint32

func (seqID) WALName() wal.Name          { return "test-seq" }
func (s seqID) LT(o wal.MessageID) bool  { v, ok := o.(seqID); return ok && s < v }
func (s seqID) LTE(o wal.MessageID) bool { v, ok := o.(seqID); return ok && s <= v }
func (s seqID) EQ(o wal.MessageID) bool  { v, ok := o.(seqID); return ok && s == v }
func (s seqID) Marshal() []byte          { return []byte{byte(s >> 24), byte(s >> 16), byte(s >> 8), byte(s)} }
func (s seqID) String() string           { return fmt.Sprintf("test-seq:%d", uint32(s)) }

var registerSeq = sync.OnceValue(func() error {
	return wal.Register("test-seq", wal.Codec[seqID]{
		Unmarshal: func(b []byte) (seqID, error) {
			if len(b) != 4 {
				return 0, fmt.Errorf("%d bytes, want 4", len(b))
			}
			return seqID(b[0])<<24 | seqID(b[1])<<16 | seqID(b[2])<<8 | seqID(b[3]), nil
		},
		Parse: func(string) (seqID, error) { return 0, nil },
	})
})

func TestUnknownWALInThisBuild(t *testing.T) {
	require.NoError(t, registerSeq())
	path := seedBolt(t, map[string]wal.MessageID{"a": wal.KafkaID(1), "b": seqID(7)})
	url := "bolt:" + path
	r := on(t, url, "list")
	wantCode(t, r, cli.ExitOK, "b         test-seq  UNKNOWN WAL", "2 pchannels, 1 unreadable")
	r = on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt, `UNKNOWN WAL  b: wal: unknown WAL name: "test-seq"`, "built with that WAL")
	wantCode(t, on(t, url, "set", "b", "test-seq:9"), cli.ExitUsage, `unknown WAL name: "test-seq"`)
	// The record is whole: set says so, rather than calling it corrupt.
	wantCode(t, on(t, url, "set", "b", "kafka:5"), cli.ExitRefused, "b stores a checkpoint of WAL test-seq, which this build"+
		" of lowwater does not know: read and write it with one built with that WAL (package cli); --force replaces it unread")
	wantCode(t, on(t, url, "dump"), cli.ExitCorrupt, "nothing dumped")
}

// A dump that holds no checkpoint restores nothing, and makes no file at
// a path where none is: a mistyped path is not made into an empty catalog
// by an empty dump either.
func TestRestoreOfAnEmptyDumpCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	for i, body := range []string{`{"format":"lowwater-checkpoints/1"}`, `{"format":"lowwater-checkpoints/1","checkpoints":[]}`,
		`{"format":"lowwater-checkpoints/1","checkpoints":null}`} {
		dump := filepath.Join(dir, fmt.Sprintf("empty%d.json", i))
		require.NoError(t, os.WriteFile(dump, []byte(body), 0o600))
		wantCode(t, on(t, "bolt:"+missing, "restore", dump), cli.ExitOK, "the dump holds no checkpoint: nothing to restore, nothing written")
		_, err := os.Stat(missing)
		require.ErrorIs(t, err, os.ErrNotExist, "%s made a file", body)
	}
	// Nor one whose every checkpoint is refused, or whose first write
	// fails: nothing written, no file left.
	refusedOnly := filepath.Join(dir, "refused.json")
	require.NoError(t, os.WriteFile(refusedOnly, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"a","wal":"kafka","checkpoint":"kafka:-1"}]}`), 0o600))
	wantCode(t, on(t, "bolt:"+missing, "restore", refusedOnly), cli.ExitRefused, "nothing written")
	_, err := os.Stat(missing)
	require.ErrorIs(t, err, os.ErrNotExist, "a restore that wrote nothing made a file")
	// An empty dump over a file that is not a catalog says so.
	notBolt := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notBolt, []byte("not a catalog"), 0o600))
	wantCode(t, on(t, "bolt:"+notBolt, "restore", filepath.Join(dir, "empty0.json")), cli.ExitCorrupt, "not a bbolt file")
}

// A negative Kafka offset is one of Kafka's sentinels, not a position:
// set and restore refuse it unless forced.
func TestANegativeKafkaOffsetIsRefused(t *testing.T) {
	path := seedBolt(t, seed)
	url := "bolt:" + path
	for _, text := range []string{"kafka:-1", "kafka:-2", "kafka:-9"} {
		wantCode(t, on(t, url, "set", "q", text), cli.ExitRefused, "q: "+text+" is not an offset")
		wantCode(t, on(t, url, "set", "by-dev-rootcoord-dml_0", text), cli.ExitRefused, text+" is not an offset")
	}
	dump := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(dump, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"q","wal":"kafka","checkpoint":"kafka:-1"}]}`), 0o600))
	wantCode(t, on(t, url, "restore", dump), cli.ExitRefused, "q: kafka:-1 is not an offset")
	wantCode(t, on(t, url, "get", "q"), cli.ExitNotFound)
	wantCode(t, on(t, url, "set", "--force", "q", "kafka:-1"), cli.ExitOK)
	// Stored all the same, it is a finding: no node recovers from it.
	// get and list mark it; they showed it as any offset.
	wantCode(t, on(t, url, "get", "q"), cli.ExitOK,
		"checkpoint  kafka:-1\n            a sentinel, not an offset: no node recovers from it (see verify)\n")
	wantCode(t, on(t, url, "list"), cli.ExitOK, "\n4 pchannels, 1 at a sentinel, not an offset (run verify)\n")
	r := on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt, `SENTINEL  q: kafka:-1 is not an offset; no node recovers from it`)
	require.Contains(t, r.stderr, "1 record holding a sentinel, not an offset")
	require.Contains(t, r.stderr, "SENTINEL: Kafka's clients read -1")
	require.Empty(t, termtest.Wider(withoutHints(r.stdout+r.stderr), 80))
	// dump writes it, as stored, and warns that restore refuses it: the
	// refusal came only at the restore.
	r = on(t, url, "dump", "-")
	wantCode(t, r, cli.ExitOK, `"checkpoint": "kafka:-1"`)
	require.Equal(t, "warning: q: kafka:-1 is not an offset; no node recovers from it, and restore writes it only with --force (see verify)\n", r.stderr)
	// No node recovers from it: delete needs no --force, as for a corrupt
	// record.
	wantCode(t, on(t, url, "delete", "--dry-run", "q"), cli.ExitOK, "q: would delete kafka:-1")
	wantCode(t, on(t, url, "set", "q", "kafka:0"), cli.ExitOK, "raised from kafka:-1 to kafka:0") // no force: a raise
	wantCode(t, on(t, url, "verify"), cli.ExitOK)
	r = on(t, url, "set", "--force", "by-dev-rootcoord-dml_0", "kafka:-1")
	wantCode(t, r, cli.ExitOK, "kafka:-1 is no offset", "no node recovers from it")
	require.NotContains(t, r.stdout+r.stderr, "re-read", "a stall told as a replay")
}

// A long name is cut in list's table, so that one name does not widen
// every row past the terminal; list --json gives it whole.
func TestListCutsALongName(t *testing.T) {
	path := seedBolt(t, seed)
	url := "bolt:" + path
	long := strings.Repeat("n", 300)
	wantCode(t, on(t, url, "set", long, "kafka:1"), cli.ExitOK)
	r := on(t, url, "list")
	wantCode(t, r, cli.ExitOK, `"`+strings.Repeat("n", 40)+`"… (300 bytes)  kafka`, "names over 64 bytes are cut: list --json gives them whole")
	for _, line := range strings.Split(r.stdout, "\n") {
		require.LessOrEqual(t, len(line), 110, "a row as wide as the name: %q", line)
	}
	wantCode(t, on(t, url, "list", "--json"), cli.ExitOK, `"pchannel": "`+long+`"`)
	wantCode(t, on(t, url, "get", long), cli.ExitOK, "kafka:1")
}

// writeDump writes a dump of n pchannels, p00000 at kafka:1 and on, to
// path.
func writeDump(t *testing.T, path string, n int) {
	t.Helper()
	var d strings.Builder
	d.WriteString(`{"format":"lowwater-checkpoints/1","checkpoints":[`)
	for i := range n {
		if i > 0 {
			d.WriteString(",")
		}
		fmt.Fprintf(&d, `{"pchannel":"p%05d","wal":"kafka","checkpoint":"kafka:%d"}`, i, i+1)
	}
	d.WriteString("]}")
	require.NoError(t, os.WriteFile(path, []byte(d.String()), 0o600))
}

// A bbolt file whose newest meta page is damaged opens as of the commit
// before, and its records read back older, with no error: verify reads
// the two pages itself and says which is damaged and what the file reads
// as, and every other read warns. A write, whose commit would rewrite the
// page and make the loss permanent, is refused unless forced; where the
// damaged page held the older commit, it goes ahead.
func TestVerifyFindsADamagedMetaPage(t *testing.T) {
	path := seedBolt(t, seed)
	url := "bolt:" + path
	wantCode(t, on(t, url, "set", "by-dev-rootcoord-dml_0", "kafka:1300"), cli.ExitOK)
	newest, txid := newestMeta(t, path)
	pageSize := int64(os.Getpagesize())
	// Its checksum's last byte, flipped: the commit it holds still reads.
	flipByte(t, path, int64(newest)*pageSize+16+63)
	damage := fmt.Sprintf("meta page %d is damaged; it held commit %d, newer than commit %d, which the file reads as", newest, txid, txid-1)

	for _, read := range [][]string{{"get", "by-dev-rootcoord-dml_0"}, {"list"}, {"dump", "--force", "-"}} {
		r := on(t, url, read...)
		wantCode(t, r, cli.ExitOK, "kafka:1200") // the commit before
		require.Contains(t, r.stderr, "warning: "+path+": "+damage+": what is shown may be older than what was saved; run verify", read[0])
	}
	// A dump is restored elsewhere, where no warning follows it: it is
	// refused unless forced. It exited 0, and a dump | restore carried
	// the older checkpoint on.
	r := on(t, url, "dump", "-")
	wantCode(t, r, cli.ExitRefused, damage+": a dump would carry checkpoints that may be older than what was saved")
	require.Equal(t, "", r.stdout)
	r = on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt, "DAMAGED META  "+path+": "+damage, "a damaged meta page",
		"DAMAGED META: a page newer than the one read may hide the file's last commit")
	require.NotContains(t, r.stderr, "warning:")

	for _, write := range [][]string{{"set", "by-dev-rootcoord-dml_0", "kafka:1400"}, {"set", "--dry-run", "by-dev-rootcoord-dml_0", "kafka:1400"},
		{"delete", "by-dev-rootcoord-dml_1"}} {
		wantCode(t, on(t, url, write...), cli.ExitRefused, damage+": a write would rewrite that page, and make the loss of what it held permanent")
	}
	wantCode(t, on(t, url, "verify"), cli.ExitCorrupt, damage)
	r = on(t, url, "set", "--force", "by-dev-rootcoord-dml_0", "kafka:1400")
	wantCode(t, r, cli.ExitOK)
	require.Contains(t, r.stderr, damage+": writing over it, as --force asks: what it held is lost for good")
	wantCode(t, on(t, url, "verify"), cli.ExitOK)

	// The older page damaged hides nothing, is said to be older, and a
	// write goes ahead.
	newest, txid = newestMeta(t, path)
	flipByte(t, path, int64(1-newest)*pageSize+16+63)
	r = on(t, url, "get", "by-dev-rootcoord-dml_0")
	wantCode(t, r, cli.ExitOK, "kafka:1400")
	require.Contains(t, r.stderr, "which the file reads as: what is shown is the newest; run verify")
	require.NotContains(t, r.stderr, "may be older")
	r = on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt, fmt.Sprintf("meta page %d is damaged; it held commit %d, older than commit %d", 1-newest, txid-1, txid),
		"DAMAGED META: the damaged page held the commit before the one read: nothing is hidden")
	require.NotContains(t, r.stderr, "refuses to write")
	wantCode(t, on(t, url, "set", "by-dev-rootcoord-dml_0", "kafka:1500"), cli.ExitOK)
	wantCode(t, on(t, url, "verify"), cli.ExitOK)
}

// flipByte inverts the byte at offset in the file at path.
func flipByte(t *testing.T, path string, offset int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var b [1]byte
	_, err = f.ReadAt(b[:], offset)
	require.NoError(t, err)
	b[0] ^= 0xff
	_, err = f.WriteAt(b[:], offset)
	require.NoError(t, err)
}

// newestMeta returns which of a bbolt file's two meta pages holds its
// newest commit, and that commit's transaction ID.
func newestMeta(t *testing.T, path string) (page int, txid uint64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	tx, err := db.Begin(false)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	id := uint64(tx.ID())
	return int(id % 2), id
}
