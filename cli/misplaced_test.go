package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A record whose key was damaged ("orders-dml-0" read as "nrders-dml-0")
// is told for what it is, and what it holds, and the tool leads to its
// repair: the checkpoint written under its own name, then the record
// deleted. get of the real name said "no checkpoint stored" while a node
// of it refused to start; verify advised 'set --force' on the damaged
// name, which made a clean record under the wrong one, and the node then
// started from nothing.
func TestAMisplacedRecordIsToldAndRepaired(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"orders-dml-0": wal.KafkaID(120)})
	moveRecord(t, path, "orders-dml-0", "nrders-dml-0")
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	stdout, stderr, code := runSplit(t, url, "get", "orders-dml-0")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, `orders-dml-0: nothing stored under this name, but `+path+` holds a record under "nrders-dml-0"`)
	require.Contains(t, stderr, "(lowwater verify says how to repair it)\n")

	stdout, stderr, code = runSplit(t, url, "verify")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Equal(t, "MISPLACED  nrders-dml-0: another pchannel's record: its key was damaged, or it was copied under this name; it holds kafka:120\n"+
		"1 record, 1 unreadable\n", stdout)
	require.Contains(t, stderr, "MISPLACED: a whole record under another name")
	require.Contains(t, stderr, "'set --force PCHANNEL ID' with the ID it holds, then delete it")

	for _, args := range [][]string{{"set", "orders-dml-0", "kafka:120"}, {"set", "--dry-run", "orders-dml-0", "kafka:120"}} {
		stdout, stderr, code = runSplit(t, append([]string{url}, args...)...)
		require.Equal(t, cli.ExitRefused, code, "%v: %s", args, stderr)
		require.Empty(t, stdout)
		require.Contains(t, stderr, "may be this one's under a damaged key")
		require.Contains(t, stderr, "--force writes it all the same")
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a refused set changed the file")

	stdout, stderr, code = runSplit(t, url, "set", "--force", "--dry-run", "orders-dml-0", "kafka:120")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "orders-dml-0: would create at kafka:120\n", stdout)
	stdout, stderr, code = runSplit(t, url, "set", "--force", "orders-dml-0", "kafka:120")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "orders-dml-0: created at kafka:120\n", stdout)
	_, stderr, code = runSplit(t, url, "delete", "nrders-dml-0")
	require.Equal(t, cli.ExitOK, code, stderr)

	require.Equal(t, map[string]string{"orders-dml-0": "kafka:120"}, storedIn(t, path))
	_, stderr, code = runSplit(t, url, "verify")
	require.Equal(t, cli.ExitOK, code, stderr)
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	defer b.Close()
	id, err := b.Load(context.Background(), "orders-dml-0")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(120), id)
	id, err = b.Load(context.Background(), "orders-dml-1")
	require.NoError(t, err, "a new pchannel starts again")
	require.Nil(t, id)
}

// A restore that creates pchannels beside a misplaced record is refused
// as set is, before anything is written, and --force writes them.
func TestARestoreBesideAMisplacedRecordNeedsForce(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"orders-dml-0": wal.KafkaID(120)})
	moveRecord(t, path, "orders-dml-0", "nrders-dml-0")
	dump := writeDumpFile(t, `{"pchannel":"a","wal":"kafka","checkpoint":"kafka:1"},{"pchannel":"b","wal":"kafka","checkpoint":"kafka:2"}`)
	_, stderr, code := runSplit(t, url, "restore", dump)
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Contains(t, stderr, "2 of 2 checkpoints refused; nothing written")
	_, stderr, code = runSplit(t, url, "restore", "--force", dump)
	require.Equal(t, cli.ExitOK, code, stderr)
	b, err := persistence.OpenBolt(path, persistence.WithReadOnly(true))
	require.NoError(t, err)
	defer b.Close()
	for p, want := range map[string]wal.MessageID{"a": wal.KafkaID(1), "b": wal.KafkaID(2)} {
		id, err := b.Load(context.Background(), p)
		require.NoError(t, err)
		require.Equal(t, want, id)
	}
}

// moveRecord moves the record of from under the key to, as a damaged key
// would read, in the bbolt file at path.
func moveRecord(t *testing.T, path, from, to string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(persistence.DefaultBucket))
		if err := bk.Put([]byte(to), bytes.Clone(bk.Get([]byte(from)))); err != nil {
			return err
		}
		return bk.Delete([]byte(from))
	}))
	require.NoError(t, db.Close())
}

// writeDumpFile writes a dump of the given checkpoint objects.
func writeDumpFile(t *testing.T, checkpoints string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[`+checkpoints+`]}`), 0o600))
	return path
}
