//go:build unix

package persistence

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A file cut short while its mapping is read (by a program that ignores
// the lock) faults on the pages it no longer has: a read that failed, not
// damage, and no runtime error's text.
func TestSalvageOfAFileCutWhileRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	require.NoError(t, os.WriteFile(path, salvageSeed(t), 0o600))
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	info, err := f.Stat()
	require.NoError(t, err)
	data, unmap, err := mapFile(f, info.Size())
	require.NoError(t, err)
	defer unmap()
	require.NoError(t, os.Truncate(path, 0))
	_, err = salvageMapped(context.Background(), data, []byte(DefaultBucket))
	require.True(t, errors.Is(err, errCutWhileRead), "%v", err)
	require.NotErrorIs(t, err, ErrCorruptStore)
}
