package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/wal"
)

// A key under <prefix>/wal/ that is neither a record nor an owner key is
// another writer's: the binary's verify reports it on stdout and exits 3,
// as for an owner key with no lease; list and a dump to a file warn on
// stderr, and the file holds the records alone, as it did.
func TestEtcdStrayKeyExitCodes(t *testing.T) {
	url, cat := etcdURL(t, "stray")
	require.NoError(t, cat.Save(ctxT(t), "p", wal.KafkaID(5)))
	clean := filepath.Join(t.TempDir(), "clean.json")
	r := on(t, url, "dump", clean)
	wantCode(t, r, cli.ExitOK)
	require.Empty(t, r.stderr)

	_, err := cat.Client().Put(ctxT(t), "stray/wal/p/consume-checkpoint.bak", "a copy")
	require.NoError(t, err)
	r = on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt)
	require.Equal(t, "STRAY  stray/wal/p/consume-checkpoint.bak: neither a record nor an owner key\n"+
		"1 record, 0 unreadable, 1 stray key\n", r.stdout)
	require.Contains(t, r.stderr, "lowwater: 1 stray key under stray/wal/\n  STRAY: not lowwater's")

	const warning = "warning: 1 stray key under stray/wal/ (neither a record nor an owner key): run verify\n"
	r = on(t, url, "list")
	wantCode(t, r, cli.ExitOK, "p         kafka  kafka:5", "1 pchannel\n")
	require.Equal(t, warning, r.stderr)
	withStray := filepath.Join(t.TempDir(), "stray.json")
	r = on(t, url, "dump", withStray)
	wantCode(t, r, cli.ExitOK, "dumping 1 checkpoint")
	require.Equal(t, warning, r.stderr)
	want, err := os.ReadFile(clean)
	require.NoError(t, err)
	got, err := os.ReadFile(withStray)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
