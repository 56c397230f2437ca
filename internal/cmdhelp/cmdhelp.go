// Package cmdhelp prints the flags of the demos' commands for --help:
// those a user gives, not those a parent process passes its nodes, in
// the flag package's own layout.
package cmdhelp

import (
	"flag"
	"io"
	"slices"
)

// PrintFlags prints fs's flags to w as flag.PrintDefaults does, but those
// named in hidden.
func PrintFlags(w io.Writer, fs *flag.FlagSet, hidden ...string) {
	shown := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	shown.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(hidden, f.Name) {
			shown.Var(f.Value, f.Name, f.Usage)
			// Its default, not what a flag before --help set it to.
			shown.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	shown.PrintDefaults()
}
