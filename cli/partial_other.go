//go:build !linux

package cli

// createPartial makes the file a dump is written into, in dir: see
// createNamedPartial.
func createPartial(dir string) (*partial, error) { return createNamedPartial(dir) }
