package cli_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lsn is a WAL this test registers, as a program with its own WAL would
// before handing over to cli.Main.
type lsn uint64

func (lsn) WALName() wal.Name { return "test-lsn" }
func (l lsn) LT(o wal.MessageID) bool {
	v, ok := o.(lsn)
	return ok && l < v
}
func (l lsn) LTE(o wal.MessageID) bool {
	v, ok := o.(lsn)
	return ok && l <= v
}
func (l lsn) EQ(o wal.MessageID) bool {
	v, ok := o.(lsn)
	return ok && l == v
}
func (l lsn) Marshal() []byte { return binary.BigEndian.AppendUint64(nil, uint64(l)) }
func (l lsn) String() string  { return fmt.Sprintf("test-lsn:%X/%X", uint32(l>>32), uint32(l)) }

func init() {
	err := wal.Register("test-lsn", wal.Codec[lsn]{
		Unmarshal: func(b []byte) (lsn, error) {
			if len(b) != 8 {
				return 0, fmt.Errorf("%d bytes", len(b))
			}
			return lsn(binary.BigEndian.Uint64(b)), nil
		},
		Parse: func(text string) (lsn, error) {
			hi, lo, _ := strings.Cut(text, "/")
			h, err := strconv.ParseUint(hi, 16, 32)
			if err != nil {
				return 0, err
			}
			l, err := strconv.ParseUint(lo, 16, 32)
			return lsn(h<<32 | l), err
		},
	})
	if err != nil {
		panic(err)
	}
}

func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := cli.Main(context.Background(), args, func(string) string { return "" }, nil, &out, &out)
	return out.String(), code
}

// TestRegisteredWAL: every command takes a registered WAL's IDs as it does
// the built-in ones, with no change to the tool.
func TestRegisteredWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Save(context.Background(), "slot", lsn(0x16_B374D848)))
	require.NoError(t, b.Close())
	url := "--catalog=bolt:" + path

	out, code := run(t, url, "list")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, "slot      test-lsn  test-lsn:16/B374D848  0     2")
	out, code = run(t, url, "set", "slot", "17/0")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, "slot: raised from test-lsn:16/B374D848 to test-lsn:17/0")
	out, code = run(t, url, "set", "slot", "test-lsn:16/FFFFFFFF")
	require.Equal(t, cli.ExitRefused, code, out)
	require.Contains(t, out, "lowering needs --force")

	dump := filepath.Join(t.TempDir(), "d.json")
	out, code = run(t, url, "dump", dump)
	require.Equal(t, cli.ExitOK, code, out)
	other := filepath.Join(t.TempDir(), "other.db")
	out, code = run(t, "--catalog=bolt:"+other, "restore", dump)
	require.Equal(t, cli.ExitOK, code, out)
	out, code = run(t, "--catalog=bolt:"+other, "get", "slot")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, "checkpoint  test-lsn:17/0")
}

// A record of a WAL this build was not made with is whole: a node built
// with that WAL recovers from it. delete took it for a corrupt record and
// removed it without --force; it is refused now, as set refuses it.
func TestUnknownWALIsNotDeletedUnforced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Save(context.Background(), "slot", lsn(7)))
	require.NoError(t, b.Close())
	// The record as a build with a WAL named test-xyz, unknown here, wrote
	// it: the name renamed in place, the checksum over the rest redone.
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(persistence.DefaultBucket))
		rec := bytes.Clone(bk.Get([]byte("slot")))
		at := bytes.Index(rec, []byte("test-lsn"))
		require.Positive(t, at)
		copy(rec[at:], "test-xyz")
		body := rec[:len(rec)-4]
		binary.BigEndian.PutUint32(rec[len(body):], crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
		return bk.Put([]byte("slot"), rec)
	}))
	require.NoError(t, db.Close())
	url := "--catalog=bolt:" + path

	out, code := run(t, url, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Contains(t, out, "UNKNOWN WAL  slot: ")
	const refusal = "lowwater: slot stores a checkpoint of WAL test-xyz, which this build of lowwater does not know, " +
		"and a node built with it recovers from: delete it with one built with that WAL (package cli), or --force\n"
	for _, args := range [][]string{{url, "delete", "slot"}, {url, "delete", "--dry-run", "slot"}} {
		stdout, stderr, code := runSplit(t, args...)
		require.Equal(t, cli.ExitRefused, code, stderr)
		require.Empty(t, stdout)
		require.Equal(t, refusal, stderr)
	}
	stdout, stderr, code := runSplit(t, url, "delete", "--dry-run", "--force", "slot")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "slot: would delete a checkpoint of WAL test-xyz\n", stdout)
	out, code = run(t, url, "verify")
	require.Equal(t, cli.ExitCorrupt, code, "the record is still there: %s", out)
	stdout, stderr, code = runSplit(t, url, "delete", "--force", "slot")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "slot: deleted a checkpoint of WAL test-xyz\n", stdout)
	out, code = run(t, url, "verify")
	require.Equal(t, cli.ExitOK, code, out)
}

// A command cut short said "context canceled" or "context deadline
// exceeded" and nothing of why: the error now names the --timeout or the
// signal.
func TestCutShortSaysWhy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Close())

	out, code := run(t, "--catalog=bolt:"+path, "--timeout=1ns", "list")
	require.Equal(t, cli.ExitFailed, code, out)
	require.Contains(t, out, "context deadline exceeded (--timeout 1ns passed)")

	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received")) // as signal.NotifyContext's
	var buf bytes.Buffer
	code = cli.Main(ctx, []string{"--catalog=bolt:" + path, "list"}, func(string) string { return "" }, nil, &buf, &buf)
	require.Equal(t, cli.ExitInterrupted, code, buf.String())
	require.Contains(t, buf.String(), "context canceled (interrupt signal received)")
}

// version, as a command or a flag, says which lowwater and which Go the
// tool was built with, and needs no catalog.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"--catalog", "bolt:/nowhere", "version"}} {
		var out, errs bytes.Buffer
		code := cli.Main(context.Background(), args, func(string) string { return "" }, nil, &out, &errs)
		require.Equal(t, cli.ExitOK, code, errs.String())
		require.Regexp(t, `^lowwater \S.*, go1\.\d+`, out.String(), "%v", args)
		require.Empty(t, errs.String())
	}
	for _, args := range [][]string{{"version", "extra"}, {"--version", "extra"}, {"help", "extra"}} {
		var out, errs bytes.Buffer
		code := cli.Main(context.Background(), args, func(string) string { return "" }, nil, &out, &errs)
		require.Equal(t, cli.ExitUsage, code, "%v: an argument it does not take", args)
		require.Empty(t, out.String(), "%v", args)
	}
}

// --help after a command gives that command's usage on one screen, with
// the write flags for a command that writes, and where the rest is.
func TestCommandHelp(t *testing.T) {
	for _, name := range []string{"list", "get", "verify", "set", "delete", "release", "dump", "restore", "version"} {
		for _, flag := range []string{"--help", "-h"} {
			out, code := run(t, name, flag)
			require.Equal(t, cli.ExitOK, code, out)
			require.True(t, strings.HasPrefix(out, "usage: lowwater "), out)
			require.Contains(t, out, "\n  "+name+" ", "its entry among the commands")
			require.True(t, strings.HasSuffix(out, ": lowwater --help\n"), out)
			writes := name == "set" || name == "delete" || name == "restore"
			require.Equal(t, writes, strings.Contains(out, "\n  --force "), "the write flags: %s", out)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			require.LessOrEqual(t, len(lines), 23, "one screen of 80×24 with the prompt: %s", out)
			for _, l := range lines {
				require.LessOrEqual(t, len(l), 80, l)
			}
		}
	}
	out, code := run(t, "version", "--help")
	require.Equal(t, cli.ExitOK, code)
	require.True(t, strings.HasPrefix(out, "usage: lowwater version\n"), "version takes no common flag: %s", out)
	require.NotContains(t, out, "common flags")
	out, code = run(t, "delete", "--help")
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, out, "usage: lowwater [common flags] delete [--dry-run] [--force] [--quoted] PCHANNEL\n")
	require.Contains(t, out, "\n  --quoted ")
	help, code := run(t, "--help")
	require.Equal(t, cli.ExitOK, code)
	out, code = run(t, "help", "--help")
	require.Equal(t, cli.ExitOK, code)
	require.Equal(t, help, out, "help --help is the help")
	out, code = run(t, "help", "help")
	require.Equal(t, cli.ExitOK, code)
	require.Equal(t, help, out, "help help is the help")
	for _, name := range []string{"set", "version"} {
		out, code = run(t, "help", name)
		require.Equal(t, cli.ExitOK, code)
		own, _ := run(t, name, "--help")
		require.Equal(t, own, out, "help %s is %s --help", name, name)
	}
	// A command that is none is named, as it is without help.
	out, code = run(t, "help", "frobnicate")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, out, `unknown command "frobnicate"`)
	out, code = run(t, "help", "verfy")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, out, `unknown command "verfy"; did you mean verify?`)
	out, code = run(t, "help", "set", "get")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, out, "usage: lowwater help [COMMAND]")
}

// A mistyped command is named, with the one it most likely meant.
func TestUnknownCommandSuggestsOne(t *testing.T) {
	for _, c := range []struct{ typed, want string }{
		{"lsit", `unknown command "lsit"; did you mean list?`},
		{"verfy", `unknown command "verfy"; did you mean verify?`},
		{"dmup", `unknown command "dmup"; did you mean dump?`},
		{"restor", `unknown command "restor"; did you mean restore?`},
		{"versoin", `unknown command "versoin"; did you mean version?`},
		{"frobnicate", `unknown command "frobnicate"` + "\n"},
		{"et", `unknown command "et"` + "\n"}, // get and set alike: no guess
	} {
		out, code := run(t, "--catalog", "bolt:/nonexistent/x.db", c.typed)
		require.Equal(t, cli.ExitUsage, code, out)
		require.Contains(t, out, c.want)
	}
}

// A TLS file the command line names that holds no certificate is a bad
// command line (exit 2), as a file given to restore that is no dump is;
// one that cannot be read is a failed read (exit 1), as a dump file's. It
// exited 1 for both. Either is told before etcd is asked: where nothing
// listened, "nothing listens" hid the bad file.
func TestATLSFileWithNoCertificateIsABadCommandLine(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))
	// A certificate block whose contents are no certificate: told as
	// such, not as no certificate at all.
	badCert := filepath.Join(t.TempDir(), "bad.pem")
	require.NoError(t, os.WriteFile(badCert, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o600))
	listening := "--catalog=etcd://" + l.Addr().String() + "/p"
	deaf, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	nobody := "--catalog=etcd://" + deaf.Addr().String() + "/p"
	require.NoError(t, deaf.Close())
	for _, catalog := range []string{listening, nobody} {
		for _, c := range []struct {
			flag string
			code int
			want string
		}{
			{"--etcd-cacert=/nonexistent/ca.pem", cli.ExitFailed, "lowwater: --etcd-cacert: open /nonexistent/ca.pem: no such file or directory\n"},
			{"--etcd-cacert=" + notPEM, cli.ExitUsage, "lowwater: --etcd-cacert: " + notPEM + ": no PEM certificate in it\n"},
			{"--etcd-cacert=" + badCert, cli.ExitUsage, "lowwater: --etcd-cacert: " + badCert + ": its PEM certificate cannot be read: x509: "},
		} {
			stdout, stderr, code := runSplit(t, catalog, c.flag, "list")
			require.Equal(t, c.code, code, "%s %s: %s", catalog, c.flag, stderr)
			require.Empty(t, stdout)
			require.True(t, strings.HasPrefix(stderr, c.want), "%s %s: %q, want it to begin %q", catalog, c.flag, stderr, c.want)
		}
	}
}
