package cli

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A link of the unnamed dump that the system refuses (a security
// module's policy) is made up for by a copy under a name: the dump was
// whole, and failing it there would throw it away.
func TestADumpWhoseLinkIsRefusedIsCopied(t *testing.T) {
	refuse := func(proc, to string) error { return &os.LinkError{Op: "link", Old: proc, New: to, Err: unix.EPERM} }
	create := func(path string) (*partial, error) { return createUnnamed(path, refuse) }
	testADumpCutShortLeavesNoFile(t, create, true)
}
