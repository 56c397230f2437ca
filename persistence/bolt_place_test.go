package persistence_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A file deleted, renamed or replaced under an open Bolt took every save
// after it, acknowledged, into a file no later open of its path found: a
// node restarted there started from nothing, or from the older copy put in
// its place, below what it had acknowledged, and nothing said so. The
// commit that finds its path leading elsewhere fails its saves, and the
// Bolt is damaged from then on, saying what happened.
func TestASaveAfterTheFileWasMovedFails(t *testing.T) {
	ctx := context.Background()
	for _, move := range []struct {
		name string
		// do moves the file at path; older is a copy of it made after its
		// first save.
		do   func(t *testing.T, path, older string)
		what string
	}{
		{"deleted", func(t *testing.T, path, _ string) { require.NoError(t, os.Remove(path)) }, deletedWhileOpen},
		{"renamed", func(t *testing.T, path, _ string) { require.NoError(t, os.Rename(path, path+".old")) }, "was deleted or renamed while open"},
		{"replaced by an older copy", func(t *testing.T, path, older string) { require.NoError(t, os.Rename(older, path)) },
			"was replaced by another file while open"},
	} {
		for _, group := range []bool{true, false} {
			t.Run(move.name+map[bool]string{true: ", group commit", false: ", a commit a save"}[group], func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "checkpoints.db")
				b, err := persistence.OpenBolt(path, persistence.WithGroupCommit(group))
				require.NoError(t, err)
				defer b.Close()
				require.NoError(t, b.Save(ctx, "p", wal.KafkaID(1)))
				older := filepath.Join(dir, "older.db")
				copyFile(t, path, older)
				require.NoError(t, b.Save(ctx, "p", wal.KafkaID(2)))

				move.do(t, path, older)
				err = b.Save(ctx, "p", wal.KafkaID(3))
				require.ErrorIs(t, err, persistence.ErrCorruptStore)
				require.ErrorContains(t, err, path+" "+move.what)
				// Damaged from then on, whatever the path leads to.
				_, err = b.Load(ctx, "p")
				require.ErrorContains(t, err, move.what)
				require.ErrorIs(t, b.Save(ctx, "p", wal.KafkaID(4)), persistence.ErrCorruptStore)
			})
		}
	}
}

// deletedWhileOpen is what a Bolt says of its file deleted: where the
// system cannot tell a deleted file from one renamed, it says both.
var deletedWhileOpen = map[bool]string{true: "was deleted while open", false: "was deleted or renamed while open"}[runtime.GOOS != "windows" && runtime.GOOS != "plan9"]

// A file deleted under a running node is, until the node stops, still
// whole in the file the process holds open, and only there: the error says
// to copy it back before the stop, as a command that works. It said to
// stop the node first, which lost every save since the last backup.
func TestAFileDeletedWhileOpenIsToBeCopiedBackBeforeTheStop(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the command given reads /proc")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Save(ctx, "p", wal.KafkaID(2)))
	require.NoError(t, os.Remove(path))

	err = b.Save(ctx, "p", wal.KafkaID(3))
	require.ErrorIs(t, err, persistence.ErrCorruptStore)
	cp := regexp.MustCompile(`\(cp -p (/proc/\d+/fd/\d+) (\S+)\), then restart$`).FindStringSubmatch(err.Error())
	require.NotNil(t, cp, err.Error())
	require.Equal(t, fmt.Sprintf("/proc/%d/fd/", os.Getpid()), cp[1][:len(fmt.Sprintf("/proc/%d/fd/", os.Getpid()))])
	require.Equal(t, path, cp[2])
	require.ErrorContains(t, err, "that file is gone once this process ends: copy it back before you stop the node")

	copyFile(t, cp[1], cp[2])
	require.NoError(t, b.Close())
	b, err = persistence.OpenBolt(path)
	require.NoError(t, err)
	defer b.Close()
	got, err := b.Load(ctx, "p")
	require.NoError(t, err)
	// The save refused was written all the same (its commit found the
	// file gone): never below the one acknowledged.
	require.Equal(t, wal.KafkaID(3), got)
}

// A Bolt whose path still leads to its file, through a link, saves on.
func TestASaveThroughALinkToTheFileSucceeds(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "checkpoints.db")
	link := filepath.Join(dir, "link.db")
	require.NoError(t, os.Symlink(target, link))
	b, err := persistence.OpenBolt(link)
	require.NoError(t, err)
	defer b.Close()
	for v := range 3 {
		require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(v+1)))
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.Create(to)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
}

// A Bolt opened at a relative path saves on after its process changes its
// working directory: the path is the one it named then.
func TestASaveAfterTheWorkingDirectoryChangedSucceeds(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	b, err := persistence.OpenBolt("checkpoints.db")
	require.NoError(t, err)
	defer b.Close()
	require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(1)))
	t.Chdir(t.TempDir())
	require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(2)))
	// Moved then, it is named by where it was.
	require.NoError(t, os.Rename(filepath.Join(dir, "checkpoints.db"), filepath.Join(dir, "old.db")))
	err = b.Save(context.Background(), "p", wal.KafkaID(3))
	require.ErrorContains(t, err, filepath.Join(dir, "checkpoints.db")+" was deleted or renamed while open")
}
