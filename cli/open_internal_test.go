package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// A restore into a new file cut short while its file is being made says
// so of the path it was given, not of the name the file was built under,
// and leaves nothing at the path; what the creation left running finishes
// making goes with the next restore, once old enough that no restore
// still writing can own it. It named the temporary file, and left it for
// good.
func TestARestoreCutWhileItMakesItsFileLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	reading := make(chan struct{})
	release := make(chan struct{})
	made := make(chan struct{})
	openFile = func(path string, opts ...persistence.BoltOption) (*persistence.Bolt, error) {
		close(reading)
		<-release
		defer close(made)
		return persistence.OpenBolt(path, opts...)
	}
	t.Cleanup(func() { openFile = persistence.OpenBolt })

	u, err := catalogurl.Parse("bolt:" + path)
	require.NoError(t, err)
	e := &env{opts: options{url: u, timeout: time.Minute, lockTimeout: time.Minute, bucket: persistence.DefaultBucket},
		stdout: io.Discard, stderr: io.Discard}
	ctx, cancel := context.WithCancelCause(context.Background())
	opened := make(chan error, 1)
	go func() {
		s, err := e.open(ctx, createFile)
		if err == nil {
			s.close()
		}
		opened <- err
	}()
	<-reading
	cancel(context.Canceled)
	select {
	case err := <-opened:
		require.ErrorIs(t, err, context.Canceled)
		require.EqualError(t, err, "opening "+path+": context canceled; nothing written")
	case <-time.After(10 * time.Second):
		t.Fatal("the open still waits 10 s after the command ended")
	}
	close(release)
	<-made
	openFile = persistence.OpenBolt
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, left, 1, "the file the creation left running made")
	aside := filepath.Join(dir, left[0].Name())
	require.True(t, strings.HasPrefix(left[0].Name(), ".new.db.lowwater-new-"), aside)
	// Its Bolt, closed by the open left behind, lets go of the lock.
	b, err := persistence.OpenBolt(aside, persistence.WithReadOnly(true), persistence.WithOpenTimeout(30*time.Second))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	old := time.Now().Add(-2 * time.Minute)
	require.NoError(t, os.Chtimes(aside, old, old))

	dump := filepath.Join(t.TempDir(), "dump.json")
	require.NoError(t, os.WriteFile(dump, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"p","wal":"kafka","checkpoint":"kafka:7"}]}`), 0o600))
	var stderr strings.Builder
	code := Main(context.Background(), []string{"--catalog", "bolt:" + path, "restore", dump}, func(string) string { return "" }, nil, io.Discard, &stderr)
	require.Equal(t, ExitOK, code, stderr.String())
	left, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, left, 1, "only the file restored")
	require.Equal(t, "new.db", left[0].Name())
}
