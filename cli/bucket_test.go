package cli_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// TestBucket: a catalog kept under another bucket (persistence.WithBucket)
// is read and written with --bucket; without it, the error names the
// bucket the file has; and a write under a mistyped bucket is refused
// rather than made into a new, empty catalog beside the real one.
func TestBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path, persistence.WithBucket("mine"))
	require.NoError(t, err)
	require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(7)))
	require.NoError(t, b.Close())
	catalog := "--catalog=bolt:" + path

	out, code := run(t, catalog, "list")
	require.Equal(t, cli.ExitFailed, code, out)
	require.Contains(t, out, `has no bucket "lowwater-checkpoints", only "mine"`)
	require.Contains(t, out, "give --bucket NAME")

	out, code = run(t, catalog, "--bucket", "mine", "get", "p")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, "kafka:7")

	out, code = run(t, catalog, "set", "--bucket", "mien", "p", "kafka:9")
	require.Equal(t, cli.ExitUsage, code, out)
	require.Contains(t, out, `--bucket mien: `)
	require.Contains(t, out, `has no bucket "mien", only "mine"`)
	require.NotContains(t, out, "give --bucket NAME", "it was given")
	out, code = run(t, catalog, "--bucket", persistence.DefaultBucket, "list")
	require.Equal(t, cli.ExitUsage, code, "given, even as the default: %s", out)
	require.NotContains(t, out, "give --bucket NAME", "it was given")
	out, code = run(t, catalog, "set", "p", "kafka:9")
	require.Equal(t, cli.ExitFailed, code, out)

	b, err = persistence.OpenBolt(path, persistence.WithBucket("mine"), persistence.WithReadOnly(true))
	require.NoError(t, err)
	entries, err := b.Inspect(context.Background())
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.Len(t, entries, 1)
	require.Equal(t, wal.KafkaID(7), entries[0].Checkpoint, "a refused set changed the record")
	b, err = persistence.OpenBolt(path, persistence.WithReadOnly(true))
	require.Error(t, err, "a refused set made the default bucket")
	require.Nil(t, b)

	out, code = run(t, catalog, "--bucket", "mine", "set", "p", "kafka:9")
	require.Equal(t, cli.ExitOK, code, out)

	out, code = run(t, "--catalog=etcd://127.0.0.1:1/x", "--bucket", "mine", "list")
	require.Equal(t, cli.ExitUsage, code, out)
	require.Contains(t, out, "--bucket is for a bbolt catalog")
}
