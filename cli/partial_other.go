//go:build !linux

package cli

// createPartial makes the file a dump to path is written into: see
// createNamedPartial.
func createPartial(path string) (*partial, error) { return createNamedPartial(path) }
