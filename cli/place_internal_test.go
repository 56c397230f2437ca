package cli

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// The rename place falls back on where a file system has no hard links
// refuses to replace a file made at the path meanwhile, in one step.
func TestRenameNoReplaceKeepsAFileThere(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("renameat2 is Linux's")
	}
	dir := t.TempDir()
	from, to := filepath.Join(dir, "aside"), filepath.Join(dir, "placed")
	for _, f := range []string{from, to} {
		if err := os.WriteFile(f, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err := renameNoReplace(from, to)
	if errors.Is(err, errNoReplace) {
		t.Skip("the temporary directory's file system cannot")
	}
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("renameNoReplace over a file = %v, want fs.ErrExist", err)
	}
	if got, _ := os.ReadFile(to); string(got) != to {
		t.Fatalf("the file there was replaced: %q", got)
	}
	if err := os.Remove(to); err != nil {
		t.Fatal(err)
	}
	if err := renameNoReplace(from, to); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(to); string(got) != from {
		t.Fatalf("renamed, it holds %q", got)
	}
}
