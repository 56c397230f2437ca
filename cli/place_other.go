//go:build !linux

package cli

// renameNoReplace cannot rename without replacing in one step here.
func renameNoReplace(string, string) error { return errNoReplace }
