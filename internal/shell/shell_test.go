package shell

import (
	"os/exec"
	"testing"
)

// What Word writes, a shell reads back as it was: the commands the tool
// and the catalog's errors suggest paste as they are shown.
func TestWordReadsBackAsItWas(t *testing.T) {
	for s, want := range map[string]string{
		"bolt:/var/lib/lowwater/checkpoints.db": "bolt:/var/lib/lowwater/checkpoints.db",
		"bolt:/data/my checkpoints.db":          `'bolt:/data/my checkpoints.db'`,
		"bolt:/data/it's.db":                    `'bolt:/data/it'\''s.db'`,
		"":                                      "''",
		"$HOME":                                 "'$HOME'",
		"/data/a;rm -rf b":                      `'/data/a;rm -rf b'`,
	} {
		got := Word(s)
		if got != want {
			t.Errorf("Word(%q) = %s, want %s", s, got, want)
		}
		out, err := exec.Command("sh", "-c", "printf %s "+got).Output()
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if string(out) != s {
			t.Errorf("Word(%q) = %s, read back as %q", s, got, out)
		}
	}
}
