package cli

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Opening a big bbolt file reads every page before it returns, and bbolt
// cannot cut that short: the command
// ends with its --timeout or a Ctrl-C all the same, and the open left
// behind lets go of the file's lock once it returns.
func TestOpenOfABigFileEndsWithTheCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(7)))
	require.NoError(t, b.Close())

	reading := make(chan struct{})
	release := make(chan struct{})
	openFile = func(path string, opts ...persistence.BoltOption) (*persistence.Bolt, error) {
		b, err := persistence.OpenBolt(path, opts...) // holds the lock
		close(reading)
		<-release // the page checks of a big file
		return b, err
	}
	t.Cleanup(func() { openFile = persistence.OpenBolt })

	u, err := catalogurl.Parse("bolt:" + path)
	require.NoError(t, err)
	e := &env{opts: options{url: u, timeout: time.Minute, lockTimeout: time.Minute, bucket: persistence.DefaultBucket},
		stdout: io.Discard, stderr: io.Discard}
	ctx, cancel := context.WithCancelCause(context.Background())
	opened := make(chan error, 1)
	go func() {
		s, err := e.open(ctx, readWrite)
		if err == nil {
			s.close()
		}
		opened <- err
	}()
	<-reading
	signal := context.Canceled
	cancel(signal)
	select {
	case err := <-opened:
		require.ErrorIs(t, err, signal)
		require.ErrorContains(t, err, "opening "+path)
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("the open still waits on the file's checks 10 s after the command ended")
	}

	// Once the checks end, the lock is let go: the file opens for writing.
	close(release)
	b, err = persistence.OpenBolt(path, persistence.WithOpenTimeout(30*time.Second))
	require.NoError(t, err)
	require.NoError(t, b.Close())
}

// The commands a refusal suggests paste into a shell as they are shown.
func TestShellWordReadsBackAsItWas(t *testing.T) {
	for s, want := range map[string]string{
		"bolt:/var/lib/lowwater/checkpoints.db": "bolt:/var/lib/lowwater/checkpoints.db",
		"bolt:/data/my checkpoints.db":          `'bolt:/data/my checkpoints.db'`,
		"bolt:/data/it's.db":                    `'bolt:/data/it'\''s.db'`,
		"":                                      "''",
		"$HOME":                                 "'$HOME'",
	} {
		if got := shellWord(s); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", s, got, want)
		}
	}
}
