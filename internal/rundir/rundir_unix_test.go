//go:build unix

package rundir

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

const prefix = "lowwater-test-"

// A run killed with SIGKILL cannot remove its directory; the next run
// does, once nothing holds the directory's lock. A live run's directory,
// one with no lock file yet and anything else in the temporary directory
// are left alone.
func TestDirsOfKilledRunsAreSwept(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	mkdir := func(name string, lock bool) string {
		dir := filepath.Join(tmp, name)
		require.NoError(t, os.Mkdir(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "catalog.db"), []byte("x"), 0o600))
		if lock {
			require.NoError(t, os.WriteFile(filepath.Join(dir, LockName), nil, 0o600))
		}
		return dir
	}
	killed := mkdir(prefix+"1", true)
	making := mkdir(prefix+"2", false)
	other := mkdir("someone-elses", true)
	live, err := New(prefix)
	require.NoError(t, err)
	require.Equal(t, 1, live.Swept)
	require.Equal(t, "removed the directory of an earlier run that was killed", live.SweptNote())
	require.NoDirExists(t, killed)
	require.DirExists(t, making, "a run making its directory")
	require.DirExists(t, other)
	require.Equal(t, tmp, filepath.Dir(live.Path))
	require.FileExists(t, filepath.Join(live.Path, LockName))

	// Held: another run's sweep leaves it.
	require.Zero(t, sweep(tmp, prefix))
	require.DirExists(t, live.Path)
	f, err := os.Open(filepath.Join(live.Path, LockName))
	require.NoError(t, err)
	defer f.Close()
	require.ErrorIs(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB), syscall.EWOULDBLOCK)

	// A run that let go of its directory without removing it.
	live.release()
	require.Equal(t, 1, sweep(tmp, prefix))
	require.NoDirExists(t, live.Path)
}

// Remove removes the run's own directory, and the next run has nothing to
// sweep.
func TestRemove(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	d, err := New(prefix)
	require.NoError(t, err)
	require.Empty(t, d.SweptNote())
	require.NoError(t, os.WriteFile(filepath.Join(d.Path, "data"), []byte("x"), 0o600))
	require.NoError(t, d.Remove())
	require.NoDirExists(t, d.Path)
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	require.Empty(t, entries)
}

// Several runs killed: the note counts them.
func TestSweptNoteCounts(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, name := range []string{prefix + "a", prefix + "b"} {
		require.NoError(t, os.MkdirAll(filepath.Join(tmp, name), 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(tmp, name, LockName), nil, 0o600))
	}
	d, err := New(prefix)
	require.NoError(t, err)
	defer d.Remove()
	require.Equal(t, "removed the directories of 2 earlier runs that were killed", d.SweptNote())
}
