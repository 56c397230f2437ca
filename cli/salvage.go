package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// salvageDump is dump --salvage: the whole records a bbolt file's pages
// hold, read without bbolt, written as a dump for restore to put into a
// new file. It exits ExitCorrupt when the file is damaged, or holds
// records a later commit freed, with the dump written all the same: what
// it says needs reading before the dump is restored.
func salvageDump(ctx context.Context, e *env, args []string) error {
	u := e.opts.url
	if u.Kind != catalogurl.Bolt {
		return usagef("dump --salvage reads a bbolt file's pages: an etcd catalog has none; dump it as it is")
	}
	s, err := persistence.SalvageBolt(ctx, u.Path, persistence.WithBucket(e.opts.bucket), persistence.WithOpenTimeout(max(e.opts.lockTimeout, 1)))
	switch {
	case errors.Is(err, persistence.ErrLocked):
		return fmt.Errorf("%s is locked by another process, most likely a running "+
			"lowwater node: stop it first (waited %v, see --lock-timeout)", u.Path, e.opts.lockTimeout)
	case errors.Is(err, persistence.ErrCorruptStore):
		return &exitError{code: ExitCorrupt, err: err}
	case err != nil:
		return err
	}
	source := "bbolt file " + u.Path + " (salvaged)"
	// On stdout goes the dump itself, when it is no file.
	report := e.stdout
	if len(args) == 0 || args[0] == "-" {
		report = e.stderr
	}
	var good []dumpEntry
	freed, higher, unfit := 0, 0, 0
	for _, r := range s.Records {
		if err := persistence.ValidatePChannel(r.PChannel); err != nil {
			unfit++
			fmt.Fprintf(e.stderr, "UNFIT  %s: %s\n", typed(r.PChannel), shownText(err.Error()))
			continue
		}
		raw, err := wal.Marshal(r.Checkpoint)
		text := wal.Text(r.Checkpoint)
		if err == nil {
			err = readsBack(r.WAL, text, r.Checkpoint)
		}
		if err != nil {
			unfit++
			fmt.Fprintf(e.stderr, "UNFIT  %s: %s\n", typed(r.PChannel), shownText(err.Error()))
			continue
		}
		if r.State == persistence.PageFreed {
			freed++
			fmt.Fprintf(e.stderr, "FREED  %s: %s, on page %d\n", typed(r.PChannel), shownID(r.Checkpoint), r.Page)
		}
		if r.Higher != nil {
			higher++
			fmt.Fprintf(e.stderr, "HIGHER  %s: %s dumped, %s on freed page %d\n", typed(r.PChannel), shownID(r.Checkpoint), shownID(r.Higher), r.HigherPage)
		}
		good = append(good, dumpEntry{PChannel: r.PChannel, WAL: r.WAL, Checkpoint: text, ID: raw, Term: r.Term})
	}
	var warnings []string
	if freed > 0 {
		warnings = append(warnings, fmt.Sprintf("%s (FREED above) found only on pages a later commit freed: "+
			"each was deleted since, or its newer record is on a damaged page; the dump holds the highest found, "+
			"which may be one deleted or lowered since: check them before restoring", count(freed, "pchannel")))
	}
	if higher > 0 {
		why := "each was lowered or replaced since (set --force), or the commit that wrote the higher one is hidden by a damaged meta page"
		if d := s.MetaDamage; d != nil && (d.Newer || !d.Known) {
			why = fmt.Sprintf("%s: the higher ones may be that commit's, which bbolt would not read either", d)
		}
		warnings = append(warnings, fmt.Sprintf("%s (HIGHER above) have a higher checkpoint on a freed page than the live one dumped: %s. "+
			"A checkpoint too low replays records, one too high skips them: raise one in the dump only if it is known to be the last saved",
			count(higher, "pchannel"), why))
	}
	if len(s.Records) > 0 && s.Records[0].State == persistence.PageUnknown {
		warnings = append(warnings, "the file's meta pages are damaged, so which pages its last commit holds is not known: "+
			"the dump holds each pchannel's highest record found, which may be one deleted or lowered since")
	}
	if s.LeftOut > 0 {
		warnings = append(warnings, fmt.Sprintf("%s left out: they lie on pages the bucket's tree no longer reaches, "+
			"and the file holds other buckets (%s), whose they may be", count(s.LeftOut, "record"), bucketNames(s.OtherBuckets)))
	}
	if unfit > 0 {
		warnings = append(warnings, fmt.Sprintf("%s (UNFIT above) not dumped: restore could not read them back", count(unfit, "record")))
	}
	for _, w := range warnings {
		fmt.Fprintln(e.stderr, "warning: "+w)
	}
	fmt.Fprintf(report, "salvaged %s of bucket %s from %s: %s of %d bytes, %d unreadable; %s damaged\n",
		count(len(good), "checkpoint"), shorten.QuotedText(e.opts.bucket), shorten.Cut(u.Path, 1<<10, shownText),
		count(s.Pages, "page"), s.PageSize, s.Unreadable, count(s.Damaged, "record"))
	if len(good) == 0 {
		return &exitError{code: ExitCorrupt, err: fmt.Errorf("no whole record of bucket %s found in %s: nothing dumped",
			shorten.QuotedText(e.opts.bucket), shorten.Cut(u.Path, 1<<10, shownText))}
	}
	if err := emitDump(ctx, e, args, source, good); err != nil {
		return err
	}
	switch {
	case len(warnings) > 0:
		return &exitError{code: ExitCorrupt, err: errors.New("the dump is written: read the warnings above before restoring it")}
	case s.Unreadable > 0 || s.Damaged > 0:
		return &exitError{code: ExitCorrupt, err: fmt.Errorf("%s is damaged: the dump is written, with every whole record its pages hold; "+
			"restore it into a new file", shorten.Cut(u.Path, 1<<10, shownText))}
	}
	return nil
}

// bucketNames lists names, shown as the tool shows a name, cut to a few.
func bucketNames(names []string) string {
	shown := make([]string, 0, min(len(names), 4))
	for _, n := range names[:min(len(names), 3)] {
		shown = append(shown, typed(n))
	}
	if len(names) > 3 {
		shown = append(shown, fmt.Sprintf("%d more", len(names)-3))
	}
	return strings.Join(shown, ", ")
}
