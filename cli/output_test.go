package cli_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// errFull is what a write to a full disk returns.
var errFull = errors.New("no space left on device")

// fullWriter takes the first n bytes, then fails.
type fullWriter struct{ n int }

func (f *fullWriter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errFull
	}
	f.n -= len(p)
	return len(p), nil
}

// A command whose output could not be written fails, whichever command
// it is: get and verify used to exit 0 with their output lost.
func TestLostOutputFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(7)))
	require.NoError(t, b.Close())

	for _, args := range [][]string{{"get", "p"}, {"verify"}, {"list"}, {"list", "--json"}, {"dump"}, {"set", "p", "kafka:7"}} {
		for _, room := range []int{0, 10} {
			var stderr bytes.Buffer
			code := cli.Main(context.Background(), append([]string{"--catalog", "bolt:" + path}, args...),
				func(string) string { return "" }, nil, &fullWriter{n: room}, &stderr)
			require.Equal(t, cli.ExitFailed, code, "%v with room for %d bytes: %s", args, room, stderr.String())
			require.Contains(t, stderr.String(), errFull.Error(), "%v", args)
		}
	}
}
