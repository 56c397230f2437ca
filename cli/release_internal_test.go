package cli

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The release a hint names is one the shell hands the tool as the very
// name: a name shown quoted goes behind --quoted, quoted for the shell.
// Copied as shown, "x\ny" was the name x, backslash, n, y, whose owner
// the tool reported as none, exit 0.
func TestReleaseCommandReadsBackInAShell(t *testing.T) {
	long := strings.Repeat("L", 513)
	for name, want := range map[string]string{
		"p":      "'release p'",
		"-x":     "'release -- -x'",
		"x\ny":   `release --quoted '"x\ny"'`,
		"":       `release --quoted '""'`,
		long:     `release --quoted '"` + long + `"'`,
		"a'b\tc": `release --quoted '"a'\''b\tc"'`,
	} {
		got := commandLine("release", name)
		require.Equal(t, want, got)
		if !strings.HasPrefix(got, "release --quoted ") {
			continue
		}
		out, err := exec.Command("sh", "-c", "printf %s "+strings.TrimPrefix(got, "release --quoted ")).Output()
		require.NoError(t, err)
		require.Equal(t, `"`+strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(name)+`"`, string(out))
	}
}
