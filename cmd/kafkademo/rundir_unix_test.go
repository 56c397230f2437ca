//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run killed with SIGKILL cannot remove its directory; the next run
// does, once nothing holds the directory's lock. A live run's directory,
// one with no lock file yet and anything else in the temporary directory
// are left alone.
func TestRunDirsOfKilledRunsAreSwept(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mkdir := func(name string, lock bool) string {
		dir := filepath.Join(tmp, name)
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "catalog.db"), []byte("x"), 0o600))
		if lock {
			require.NoError(t, os.WriteFile(filepath.Join(dir, runLock), nil, 0o600))
		}
		return dir
	}
	killed := mkdir(runDirPrefix+"1", true)
	making := mkdir(runDirPrefix+"2", false)
	other := mkdir("someone-elses", true)
	live, release, swept, err := makeRunDir()
	require.NoError(t, err)
	require.Equal(t, 1, swept)
	require.NoDirExists(t, killed)
	require.DirExists(t, making, "a run making its directory")
	require.DirExists(t, other)
	require.Equal(t, tmp, filepath.Dir(live))
	require.FileExists(t, filepath.Join(live, runLock))

	// Held: another run's sweep leaves it.
	require.Zero(t, sweepRunDirs(tmp))
	require.DirExists(t, live)
	f, err := os.Open(filepath.Join(live, runLock))
	require.NoError(t, err)
	defer f.Close()
	require.ErrorIs(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)

	release()
	require.Equal(t, 1, sweepRunDirs(tmp), "a run that let go of its directory")
	require.NoDirExists(t, live)
}
