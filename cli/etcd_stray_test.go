package cli_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
)

// Keys under cli/wal/ that are neither a record nor an owner key (another
// tool given the same prefix, a botched hand edit, a later version's
// layout) were in no command's sight: list, verify and dump said nothing.
// verify lists them, one line each and quoted as names are, and exits 3;
// list and dump warn on stderr and print what they printed. Keys outside
// cli/wal/ are not the catalog's, and a catalog with no stray key prints
// what it printed before.
func TestEtcdStrayKeys(t *testing.T) {
	catalog, client := onDamagedEtcd(t)
	out, code := run(t, catalog, "set", "good", "kafka:1")
	require.Equal(t, cli.ExitOK, code, out)
	for _, k := range []string{"cli/other", "cli/walrus", "clix/wal/p/notes", "other/wal/p/notes"} {
		_, err := client.Put(ctxT(t), k, "not the catalog's")
		require.NoError(t, err)
	}

	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, "1 record, 0 unreadable\n", out)
	commands := [][]string{{"list"}, {"list", "--json"}, {"dump"}}
	before := map[string]string{} // stdout, by command
	for _, args := range commands {
		stdout, stderr, code := runSplit(t, append([]string{catalog}, args...)...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", args, stderr)
		require.Empty(t, stderr, args)
		before[fmt.Sprint(args)] = stdout
	}

	for _, k := range []string{
		"cli/wal/p/consume-checkpoint.bak", "cli/wal/p/notes", "cli/wal/stray", "cli/wal/p/owner/extra", "cli/wal/x\x1b[31m\n",
	} {
		_, err := client.Put(ctxT(t), k, "another writer's")
		require.NoError(t, err)
	}
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Equal(t, `STRAY  cli/wal/p/consume-checkpoint.bak: neither a record nor an owner key
STRAY  cli/wal/p/notes: neither a record nor an owner key
STRAY  cli/wal/p/owner/extra: neither a record nor an owner key
STRAY  cli/wal/stray: neither a record nor an owner key
STRAY  "cli/wal/x\x1b[31m\n": neither a record nor an owner key
1 record, 0 unreadable, 5 stray keys
lowwater: 5 stray keys under cli/wal/
  STRAY: not lowwater's: something else writes among the catalog's keys (a tool given the same prefix, a hand edit, a later lowwater); lowwater neither reads nor removes them: find what wrote them
`, out)
	const warning = "warning: 5 stray keys under cli/wal/ (neither a record nor an owner key): run verify\n"
	for _, args := range commands {
		stdout, stderr, code := runSplit(t, append([]string{catalog}, args...)...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", args, stderr)
		require.Equal(t, warning, stderr, args)
		require.Equal(t, before[fmt.Sprint(args)], stdout, args)
	}

	// With other findings, the first names the error, and each kind has
	// its hint.
	_, err := client.Put(ctxT(t), "cli/wal/good/owner", "by hand")
	require.NoError(t, err)
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Contains(t, out, "1 record, 0 unreadable, 5 stray keys\nlowwater: 1 owner key with no lease; 5 stray keys under cli/wal/\n  NO LEASE: ")
	require.Contains(t, out, "\n  STRAY: not lowwater's")

	for _, k := range []string{"cli/wal/good/owner", "cli/wal/p/consume-checkpoint.bak", "cli/wal/p/notes", "cli/wal/stray",
		"cli/wal/x\x1b[31m\n"} {
		_, err := client.Delete(ctxT(t), k)
		require.NoError(t, err)
	}
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Equal(t, `STRAY  cli/wal/p/owner/extra: neither a record nor an owner key
1 record, 0 unreadable, 1 stray key
lowwater: 1 stray key under cli/wal/
  STRAY: not lowwater's: something else writes among the catalog's keys (a tool given the same prefix, a hand edit, a later lowwater); lowwater neither reads nor removes them: find what wrote them
`, out)
	stdout, stderr, code := runSplit(t, catalog, "list")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, before["[list]"], stdout)
	require.Equal(t, "warning: 1 stray key under cli/wal/ (neither a record nor an owner key): run verify\n", stderr)

	// A key of 100 KiB is shown by its head and its length: the operator
	// finds it by that, and a screenful of it helps no one.
	_, err = client.Delete(ctxT(t), "cli/wal/p/owner/extra")
	require.NoError(t, err)
	_, err = client.Put(ctxT(t), "cli/wal/é"+strings.Repeat("x", 100<<10), "another writer's")
	require.NoError(t, err)
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.True(t, strings.HasPrefix(out, "STRAY  cli/wal/é"+strings.Repeat("x", 54)+"… (102410 bytes): neither a record nor an owner key\n"), out)
}
