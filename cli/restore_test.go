package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/wal"
)

// dumpOf writes a dump of n pchannels, p00000 on, whose checkpoints are
// kafka:from on, and returns its path.
func dumpOf(t *testing.T, n, from int) string {
	t.Helper()
	var d strings.Builder
	d.WriteString(`{"format":"lowwater-checkpoints/1","checkpoints":[`)
	for i := range n {
		if i > 0 {
			d.WriteString(",")
		}
		fmt.Fprintf(&d, `{"pchannel":"p%05d","wal":"kafka","checkpoint":"kafka:%d"}`, i, from+i)
	}
	d.WriteString("]}")
	path := filepath.Join(t.TempDir(), "dump.json")
	require.NoError(t, os.WriteFile(path, []byte(d.String()), 0o600))
	return path
}

// commits is how many write transactions the bbolt file at path has
// committed: its last transaction's ID.
func commits(t *testing.T, path string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	require.NoError(t, err)
	defer db.Close()
	var id int
	require.NoError(t, db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil }))
	return id
}

// TestBigRestoreSharesCommits: a bbolt restore's writes share commits, and
// print, store and count as they did one commit each. A commit each, a
// million records took over 20 minutes, far past the default --timeout.
func TestBigRestoreSharesCommits(t *testing.T) {
	const n = 20000
	url, path := boltWith(t, nil)
	before := commits(t, path)
	stdout, stderr, code := runSplit(t, url, "restore", dumpOf(t, n, 10))
	require.Equal(t, cli.ExitOK, code, stderr)
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "p%05d: created at kafka:%d\n", i, 10+i)
	}
	fmt.Fprintf(&want, "restored %d checkpoints into bbolt file %s (%d written)\n", n, path, n)
	require.Equal(t, want.String(), stdout)
	require.Less(t, commits(t, path)-before, n/50)
	got := storedIn(t, path)
	require.Len(t, got, n)
	for i := range n {
		require.Equal(t, fmt.Sprintf("kafka:%d", 10+i), got[fmt.Sprintf("p%05d", i)])
	}

	// A forced lowering replaces each record in one write, and those
	// writes share commits as saves do (a delete and a save apart took
	// a commit per delete; a replacement at a time took two).
	const lowered = 500
	before = commits(t, path)
	stdout, stderr, code = runSplit(t, url, "restore", "--force", dumpOf(t, lowered, 0))
	require.Equal(t, cli.ExitOK, code, stderr)
	want.Reset()
	for i := range lowered {
		fmt.Fprintf(&want, "p%05d: LOWERED from kafka:%d to kafka:%d\n", i, 10+i, i)
	}
	fmt.Fprintf(&want, "restored %d checkpoints into bbolt file %s (%d written)\n", lowered, path, lowered)
	require.Equal(t, want.String(), stdout)
	// The writers' slow start carries 500 records in nine commits at
	// best (1, 2, 4… 256); its rounds do not keep together, a write
	// joining the batch after the one that started its round, and it
	// took 17 commits on a quiet machine, 13–22 under the race detector
	// beside other tests. Writes that did not share commits would take
	// 500 or more.
	require.Less(t, commits(t, path)-before, 50)
	got = storedIn(t, path)
	require.Len(t, got, n)
	for i := range n {
		want := 10 + i
		if i < lowered {
			want = i
		}
		require.Equal(t, fmt.Sprintf("kafka:%d", want), got[fmt.Sprintf("p%05d", i)])
	}
}

// A hand-written dump entry that leaves "wal" out is read by its
// checkpoint's text, which names the WAL: restore said `unknown WAL name
// ""`. One whose text names none is still refused.
func TestARestoreEntryWithoutItsWALTakesItFromItsText(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"p": wal.KafkaID(1)})
	dump := writeDumpFile(t, `{"pchannel":"q","checkpoint":"kafka:5"},{"pchannel":"r","checkpoint":"pulsar:7:3:0@2"}`)
	_, stderr, code := runSplit(t, url, "restore", dump)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, map[string]string{"p": "kafka:1", "q": "kafka:5", "r": "pulsar:7:3:0@2"}, storedIn(t, path))
	_, stderr, code = runSplit(t, url, "restore", writeDumpFile(t, `{"pchannel":"s","checkpoint":"5"}`))
	require.Equal(t, cli.ExitUsage, code, stderr)
	require.Contains(t, stderr, `checkpoint 0 ("s")`)
}
