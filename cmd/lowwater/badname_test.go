package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Records under names lowwater refuses (not UTF-8, a NUL, over 512 bytes),
// as another writer or an older build may have left them, are unreadable:
// verify reports them, a dump refuses to leave them out or rewrite them
// (JSON turned the bytes that are not UTF-8 into U+FFFD: another name),
// and get and delete --quoted reach them. verify called them fine, and
// nothing could delete them.
func TestRecordsUnderNamesNoNodeCanUse(t *testing.T) {
	path := seedBolt(t, seed)
	bad := []string{"bad\xffutf8", "a\x00b", strings.Repeat("L", 600)}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("lowwater-checkpoints"))
		for _, p := range bad {
			// Whole records, each for its own name, as another writer
			// would write them.
			good, err := persistence.EncodeRecord(p, persistence.Record{Checkpoint: wal.KafkaID(1200)})
			if err != nil {
				return err
			}
			if err := b.Put([]byte(p), good); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
	url := "bolt:" + path

	r := on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt, "6 records, 3 unreadable", "BAD NAME", "delete --quoted NAME")
	for _, p := range bad {
		require.Contains(t, r.stdout, "BAD NAME  "+strconv.Quote(p)+": ")
	}
	wantCode(t, on(t, url, "list"), cli.ExitOK, "3 unreadable (run verify)")
	// JSON cannot carry a name that is not UTF-8: quoted gives it exactly.
	r = on(t, url, "list", "--json")
	wantCode(t, r, cli.ExitOK)
	var listed []struct{ PChannel, Quoted, Error string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &listed))
	quoted := map[string]bool{}
	for _, l := range listed {
		if l.Quoted != "" {
			name, err := strconv.Unquote(l.Quoted)
			require.NoError(t, err)
			quoted[name] = true
			require.Contains(t, l.Error, "pchannel name")
		}
	}
	require.Equal(t, map[string]bool{bad[0]: true, bad[1]: true, bad[2]: true}, quoted)
	r = on(t, url, "dump")
	wantCode(t, r, cli.ExitCorrupt, "nothing dumped")
	require.Empty(t, r.stdout)
	// Named as verify names them, quoted for delete --quoted, the
	// printable 600 letters too.
	for _, p := range bad {
		require.Contains(t, r.stderr, "BAD NAME  "+strconv.Quote(p)+": ")
	}

	wantCode(t, on(t, url, "get", "--quoted", strconv.Quote(bad[1])), cli.ExitCorrupt, "checkpoint  BAD NAME: ", "holds a NUL byte")
	wantCode(t, on(t, url, "get", "--quoted", "not quoted"), cli.ExitUsage, "is not a Go-quoted string")
	wantCode(t, on(t, url, "delete", "--quoted", "'r'"), cli.ExitUsage, "is not a Go-quoted string") // a rune, not a string
	wantCode(t, on(t, url, "get", "--quoted", `""`), cli.ExitUsage, "empty pchannel name")
	wantCode(t, on(t, url, "delete", bad[0]), cli.ExitUsage, "not valid UTF-8") // without --quoted, as before
	for _, p := range bad {
		wantCode(t, on(t, url, "delete", "--quoted", strconv.Quote(p), "--dry-run"), cli.ExitOK, "would delete kafka:1200")
		wantCode(t, on(t, url, "delete", "--quoted", strconv.Quote(p)), cli.ExitOK, "deleted kafka:1200")
	}
	wantCode(t, on(t, url, "verify"), cli.ExitOK, "3 records, 0 unreadable")
	wantCode(t, on(t, url, "dump"), cli.ExitOK)
	require.Equal(t, seed, stored(t, path))
}
