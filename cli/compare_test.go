package cli_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// panicky is a registered WAL whose LT panics on the value 666, as a
// third party's ID type might on bytes that decoded to nonsense: the tool
// must refuse such a write, not crash with the exit code of a bad command
// line.
type panicky int64

// panickyCalm, while set, keeps panicky's LT from panicking: a test stores
// 666 with it, as an older build could have, since a catalog now refuses an
// ID that cannot be ordered (wal.Marshal).
var panickyCalm atomic.Bool

func (panicky) WALName() wal.Name { return "test-panicky" }
func (a panicky) LT(o wal.MessageID) bool {
	b, ok := o.(panicky)
	if !panickyCalm.Load() && (a == 666 || b == 666) {
		panic("LT bug")
	}
	return ok && a < b
}
func (a panicky) LTE(o wal.MessageID) bool { return !o.LT(a) }
func (a panicky) EQ(o wal.MessageID) bool {
	b, ok := o.(panicky)
	return ok && a == b
}
func (a panicky) Marshal() []byte { return binary.BigEndian.AppendUint64(nil, uint64(a)) }
func (a panicky) String() string  { return "test-panicky:" + strconv.FormatInt(int64(a), 10) }

func init() {
	err := wal.Register("test-panicky", wal.Codec[panicky]{
		Unmarshal: func(b []byte) (panicky, error) {
			if len(b) != 8 {
				return 0, errors.New("not 8 bytes")
			}
			return panicky(binary.BigEndian.Uint64(b)), nil
		},
		Parse: func(s string) (panicky, error) {
			n, err := strconv.ParseInt(s, 10, 64)
			return panicky(n), err
		},
	})
	if err != nil {
		panic(err)
	}
}

// runSplit runs the tool as run does, with stdout and stderr apart, and
// fails the test, instead of crashing it, if Main panics.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("cli.Main(%q) panicked: %v", args, r)
			}
		}()
		code = cli.Main(context.Background(), args, func(string) string { return "" }, nil, &out, &errb)
	}()
	return out.String(), errb.String(), code
}

// boltWith makes a bbolt catalog holding ids and returns its --catalog flag.
func boltWith(t *testing.T, ids map[string]wal.MessageID) (flag, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	for p, id := range ids {
		require.NoError(t, b.Save(context.Background(), p, id))
	}
	require.NoError(t, b.Close())
	return "--catalog=bolt:" + path, path
}

// storedIn reads what the bbolt file at path holds now.
func storedIn(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := persistence.OpenBolt(path, persistence.WithReadOnly(true))
	require.NoError(t, err)
	defer b.Close()
	entries, err := b.Inspect(context.Background())
	require.NoError(t, err)
	got := map[string]string{}
	for _, e := range entries {
		require.NoError(t, e.Err)
		got[e.PChannel] = e.Checkpoint.String()
	}
	return got
}

// TestSetIDsThatCannotBeCompared: a registered ID type whose comparison
// panics makes set and restore refuse the write. An ID that cannot be
// ordered even against itself cannot be stored by any catalog: a usage
// error, --force or not, and nothing written. One stored already (by an
// older build, say) is a corrupt record to every command: set refuses to
// write over it (ExitRefused), naming the pchannel and why, and --force
// replaces it.
func TestSetIDsThatCannotBeCompared(t *testing.T) {
	url, path := boltWith(t, nil)

	stdout, stderr, code := runSplit(t, url, "set", "slot", "test-panicky:10")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "slot: created at test-panicky:10\n", stdout)

	const unstorable = `ID "test-panicky:666" cannot be stored: wal: corrupt message ID:` +
		" comparing test-panicky:666 with test-panicky:666 panicked: LT bug"
	for _, flags := range [][]string{nil, {"--dry-run"}, {"--force"}} {
		stdout, stderr, code = runSplit(t, append([]string{url, "set", "slot", "test-panicky:666"}, flags...)...)
		require.Equal(t, cli.ExitUsage, code, stderr)
		require.Empty(t, stdout)
		require.Contains(t, stderr, "lowwater: "+unstorable+"\n", flags)
	}
	require.Equal(t, map[string]string{"slot": "test-panicky:10"}, storedIn(t, path))

	// restore checks the same: refused, and nothing written.
	dump := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(dump, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[
		{"pchannel":"other","wal":"kafka","checkpoint":"kafka:1"},
		{"pchannel":"slot","wal":"test-panicky","checkpoint":"test-panicky:666"}]}`), 0o600))
	stdout, stderr, code = runSplit(t, url, "restore", dump)
	require.Equal(t, cli.ExitUsage, code, stderr)
	require.Empty(t, stdout)
	require.Equal(t, "lowwater: "+dump+`: checkpoint 1 ("slot"): wal: corrupt message ID:`+
		" comparing test-panicky:666 with test-panicky:666 panicked: LT bug\n", stderr)
	require.Equal(t, map[string]string{"slot": "test-panicky:10"}, storedIn(t, path))

	// A stored ID that cannot be compared even with itself (stored by an
	// older build, say): a node would recover from it and then never save
	// over it. Every command reports it as the corrupt record it is, and
	// set replaces it with --force only.
	func() {
		panickyCalm.Store(true)
		defer panickyCalm.Store(false)
		url, path = boltWith(t, map[string]wal.MessageID{"other": wal.KafkaID(1), "slot": panicky(666)})
	}()
	const why = "wal: corrupt message ID: comparing test-panicky:666 with test-panicky:666 panicked: LT bug"
	stdout, _, code = runSplit(t, url, "list")
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, stdout, "\nslot      test-panicky  CORRUPT     0     2\n")
	require.Contains(t, stdout, "2 pchannels, 1 unreadable (run verify)\n")
	stdout, _, code = runSplit(t, url, "get", "slot")
	require.Equal(t, cli.ExitCorrupt, code)
	require.Contains(t, stdout, "checkpoint  CORRUPT: "+why+"\n")
	stdout, stderr, code = runSplit(t, url, "verify")
	require.Equal(t, cli.ExitCorrupt, code)
	require.Equal(t, "CORRUPT  slot: "+why+"\n2 records, 1 unreadable\n", stdout)
	require.Contains(t, stderr, "CORRUPT: repair with 'set --force PCHANNEL ID' or 'delete PCHANNEL'")
	_, stderr, code = runSplit(t, url, "dump", filepath.Join(t.TempDir(), "d.json"))
	require.Equal(t, cli.ExitCorrupt, code)
	require.Contains(t, stderr, "CORRUPT  slot: "+why+"\n")

	const refusal = "lowwater: slot: the stored record is corrupt (" + why + "): --force replaces it\n"
	for _, dry := range []string{"", "--dry-run"} {
		args := []string{url, "set", "slot", "11"}
		if dry != "" {
			args = append(args, dry)
		}
		stdout, stderr, code = runSplit(t, args...)
		require.Equal(t, cli.ExitRefused, code, stderr)
		require.Empty(t, stdout)
		require.Equal(t, refusal, stderr)
	}
	require.Equal(t, map[string]string{"other": "kafka:1", "slot": "test-panicky:666"}, storedIn(t, path))

	stdout, stderr, code = runSplit(t, url, "set", "slot", "11", "--dry-run", "--force")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "slot: would replace from a corrupt record to test-panicky:11\n", stdout)
	require.Equal(t, map[string]string{"other": "kafka:1", "slot": "test-panicky:666"}, storedIn(t, path))

	stdout, stderr, code = runSplit(t, url, "set", "slot", "11", "--force")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "slot: replaced from a corrupt record to test-panicky:11\n", stdout)
	require.Equal(t, map[string]string{"other": "kafka:1", "slot": "test-panicky:11"}, storedIn(t, path))
	_, _, code = runSplit(t, url, "verify")
	require.Equal(t, cli.ExitOK, code)

	// IDs whose comparison works are still raised, kept and lowered as ever.
	url, _ = boltWith(t, map[string]wal.MessageID{"slot": panicky(10)})
	stdout, _, code = runSplit(t, url, "set", "slot", "10")
	require.Equal(t, cli.ExitOK, code)
	require.Equal(t, "slot: unchanged at test-panicky:10\n", stdout)
	stdout, _, code = runSplit(t, url, "set", "slot", "12")
	require.Equal(t, cli.ExitOK, code)
	require.Equal(t, "slot: raised from test-panicky:10 to test-panicky:12\n", stdout)
	_, stderr, code = runSplit(t, url, "set", "slot", "11")
	require.Equal(t, cli.ExitRefused, code)
	require.Equal(t, "lowwater: slot: test-panicky:11 is below the stored test-panicky:12; lowering needs --force\n"+
		"replay: consumers restart at test-panicky:11 and re-read what follows it up to test-panicky:12\n", stderr)
}

// The replay a lowering causes is counted in offsets whatever their span:
// from the largest RocksMQ offset down to the smallest is more messages
// than an int64 holds, and was printed as a negative count. (A negative
// Kafka offset is a sentinel, told as such rather than as a replay.)
func TestReplayCountsTheWholeSpan(t *testing.T) {
	url, _ := boltWith(t, map[string]wal.MessageID{"p": wal.RocksMQID(math.MaxInt64)})
	stdout, stderr, code := runSplit(t, url, "set", "--force", "--dry-run", "p", "rocksmq:-9223372036854775808")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stdout+stderr, "up to rocksmq:9223372036854775807 (18446744073709551615 messages)")

	url, _ = boltWith(t, map[string]wal.MessageID{"p": wal.KafkaID(math.MaxInt64)})
	stdout, stderr, code = runSplit(t, url, "set", "--force", "--dry-run", "p", "kafka:-9223372036854775808")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stdout+stderr, "kafka:-9223372036854775808 is no offset")
	require.NotContains(t, stdout+stderr, "replay")

	// Forced in as a new record, it is said as well: no node recovers
	// from it, whatever was stored before.
	stdout, stderr, code = runSplit(t, url, "set", "--force", "new", "kafka:-1")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "new: created at kafka:-1\n", stdout)
	require.Equal(t, "warning: new: kafka:-1 is no offset (Kafka's clients read -1 as the end of the log and -2 as its start): "+
		"no node recovers from it until 'set' gives an offset\n", stderr)
}

// A forced switch to another WAL printed no warning, as a lowering does,
// though it drops the stored position, and a node still on the old WAL
// then recovers nothing: it takes the record for a corrupt one.
func TestWALSwitchWarns(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"p": wal.KafkaID(1000)})
	dump := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(dump, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[`+
		`{"pchannel":"p","wal":"pulsar","checkpoint":"pulsar:1:2:3"}]}`), 0o600))
	const warning = "warning: p: WAL switch from kafka to pulsar: kafka:1000 is dropped and consumers restart at pulsar:1:2:3@0; " +
		"a node still on kafka takes the record for a corrupt one and does not recover p\n"
	for _, c := range []struct {
		args   []string
		stdout string
	}{
		{[]string{"set", "--force", "--dry-run", "p", "pulsar:1:2:3"}, "p: would replace from kafka:1000 to pulsar:1:2:3@0\n"},
		{[]string{"restore", "--force", "--dry-run", dump}, "p: would replace from kafka:1000 to pulsar:1:2:3@0\n"},
		{[]string{"set", "--force", "p", "pulsar:1:2:3"}, "p: replaced from kafka:1000 to pulsar:1:2:3@0\n"},
	} {
		stdout, stderr, code := runSplit(t, append([]string{url}, c.args...)...)
		require.Equal(t, cli.ExitOK, code, stderr)
		require.Equal(t, c.stdout, stdout, c.args)
		require.Equal(t, warning, stderr, c.args)
	}
	require.Equal(t, map[string]string{"p": "pulsar:1:2:3@0"}, storedIn(t, path))

	// A replacement within one WAL is no switch; to another partition, it
	// is said.
	stdout, stderr, code := runSplit(t, url, "set", "--force", "p", "pulsar:1:2:3@5")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "p: replaced from pulsar:1:2:3@0 to pulsar:1:2:3@5\n", stdout)
	require.Equal(t, "warning: p: from partition 0 to 5: its consumers seek another partition\n", stderr)
}

// A Pulsar ID of another partition is refused, raised or not, as at an
// equal position: one pchannel is one partition, and a consumer seeks
// with the stored one. A raise moved it with nothing said.
func TestSetToAnotherPartitionNeedsForce(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"pp": wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 4}})
	for _, id := range []string{"pulsar:1:2:6@0", "pulsar:1:2:3@0"} {
		stdout, stderr, code := runSplit(t, url, "set", "pp", id)
		require.Equal(t, cli.ExitRefused, code, stderr)
		require.Empty(t, stdout)
		require.Contains(t, stderr, "--force")
	}
	_, stderr, _ := runSplit(t, url, "set", "pp", "pulsar:1:2:6@0")
	require.Equal(t, "lowwater: pp: pulsar:1:2:6@0 is of partition 0, the stored pulsar:1:2:3@4 of partition 4: "+
		"one pchannel is one partition; --force moves it\n", stderr)
	require.Equal(t, map[string]string{"pp": "pulsar:1:2:3@4"}, storedIn(t, path))
	_, stderr, _ = runSplit(t, url, "set", "pp", "pulsar:1:2:1@0")
	require.Equal(t, "lowwater: pp: pulsar:1:2:1@0 is below the stored pulsar:1:2:3@4, and of partition 0, not 4; lowering needs --force\n", stderr,
		"positions of two partitions bound no replay")

	// Without @P, the stored partition is kept, and a raise goes in.
	stdout, stderr, code := runSplit(t, url, "set", "pp", "pulsar:1:2:5")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "pp: raised from pulsar:1:2:3@4 to pulsar:1:2:5@4\n", stdout)
	stdout, stderr, code = runSplit(t, url, "set", "--force", "pp", "pulsar:1:2:6@0")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "pp: raised from pulsar:1:2:5@4 to pulsar:1:2:6@0\n", stdout)
	require.Equal(t, map[string]string{"pp": "pulsar:1:2:6@0"}, storedIn(t, path))
}
