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
// new file. It exits ExitCorrupt when the file is damaged, or when what
// it dumps needs reading before the dump is restored, with the dump
// written all the same.
func salvageDump(ctx context.Context, e *env, args []string) error {
	u := e.opts.url
	if u.Kind != catalogurl.Bolt {
		return usagef("dump --salvage reads a bbolt file's pages: an etcd catalog has none; dump it as it is")
	}
	if err := checkDumpTarget(args); err != nil {
		return err // before the work
	}
	s, err := persistence.SalvageBolt(ctx, u.Path, persistence.WithBucket(e.opts.bucket), persistence.WithOpenTimeout(max(e.opts.lockTimeout, 1)))
	switch {
	case errors.Is(err, persistence.ErrLocked):
		return fmt.Errorf("%s is locked by another process%s, most likely a running "+
			"lowwater node: stop it first (waited %v, see --lock-timeout)", u.Path, lockHolder(u.Path), e.opts.lockTimeout)
	case errors.Is(err, persistence.ErrNoBucket):
		return usagef("--bucket %s: %v", shorten.Cut(e.opts.bucket, shorten.TextLen, shownText), err)
	case errors.Is(err, persistence.ErrCorruptStore):
		return &exitError{code: ExitCorrupt, err: err}
	case err != nil:
		return err
	}
	// On stdout goes the dump itself, when it is no file. Both are
	// wrapped on a terminal, where a path made the line run past it.
	report := e.prose
	if len(args) == 0 || args[0] == "-" {
		report = e.stderr
	}
	good, warnings := salvaged(e, s)
	for _, w := range warnings {
		fmt.Fprintln(e.stderr, "warning: "+w)
	}
	path := shorten.Cut(u.Path, 1<<10, shownText)
	fmt.Fprintf(report, "salvaged %s of bucket %s from %s: %s of %d bytes, %d unreadable; %s damaged\n",
		count(len(good), "checkpoint"), shorten.QuotedText(e.opts.bucket), path,
		count(s.Pages, "page"), s.PageSize, s.Unreadable, count(s.Damaged, "element"))
	if s.Broken != "" {
		// What makes the file damaged where no count above says it: a
		// branch key out of its range, a page cut off the tree.
		fmt.Fprintf(report, "damaged: %s\n", s.Broken)
	}
	if s.Deleted > 0 {
		fmt.Fprintf(report, "left out: %s found only on pages a later commit freed, deleted since (the file's tree is whole)\n", count(s.Deleted, "pchannel"))
	}
	switch {
	case len(good) == 0 && len(warnings) > 0:
		return &exitError{code: ExitCorrupt, err: errors.New("nothing dumped: read the warnings above")}
	case len(good) == 0:
		return &exitError{code: ExitCorrupt, err: fmt.Errorf("no whole record of bucket %s found in %s: nothing dumped",
			shorten.QuotedText(e.opts.bucket), path)}
	}
	if err := emitDump(ctx, e, args, "bbolt file "+u.Path+" (salvaged)", good); err != nil {
		return err
	}
	damaged := s.Unreadable > 0 || s.Damaged > 0 || !s.Whole
	switch {
	case len(warnings) > 0 && damaged:
		return &exitError{code: ExitCorrupt, err: fmt.Errorf("%s is damaged: the dump is written: read the warnings above before restoring it", path)}
	case len(warnings) > 0:
		return &exitError{code: ExitCorrupt, err: errors.New("the dump is written: read the warnings above before restoring it")}
	case damaged:
		return &exitError{code: ExitCorrupt, err: fmt.Errorf("%s is damaged: the dump is written, with every whole record its pages hold; "+
			"restore it into a new file", path)}
	}
	return nil
}

// checkHighest ends the warnings of lines whose checkpoint may not be
// the last saved: FREED and UNSURE.
const checkHighest = "the dump holds the highest found, which may be one deleted or lowered since, " +
	"or one older than the last saved, whose record was on a damaged page: check them before restoring"

// salvaged is the dump of what s holds, with a line on stderr for each
// record that needs a look (FREED, UNSURE, HIGHER, HIDDEN, MISPLACED,
// AMBIGUOUS, UNFIT), and
// the warnings that say what those lines mean and what else the file
// told.
func salvaged(e *env, s *persistence.Salvage) (good []dumpEntry, warnings []string) {
	freed, unsure, higher, hidden, unfit, misplaced := 0, 0, 0, 0, 0, 0
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
		switch {
		case r.State == persistence.PageFreed:
			freed++
			fmt.Fprintf(e.stderr, "FREED  %s: %s, on page %d\n", typed(r.PChannel), shownID(r.Checkpoint), r.Page)
		case r.State == persistence.PageUnknown && !s.NoMeta:
			unsure++
			fmt.Fprintf(e.stderr, "UNSURE  %s: %s, on page %d\n", typed(r.PChannel), shownID(r.Checkpoint), r.Page)
		}
		switch {
		case r.HiddenDeleted:
			hidden++
			fmt.Fprintf(e.stderr, "HIDDEN  %s: %s dumped, deleted in the commit the damaged meta page held\n", typed(r.PChannel), shownID(r.Checkpoint))
		case r.Hidden != nil:
			hidden++
			fmt.Fprintf(e.stderr, "HIDDEN  %s: %s dumped, %s in the commit the damaged meta page held\n", typed(r.PChannel), shownID(r.Checkpoint), shownID(r.Hidden))
		}
		if r.StoredUnder != "" {
			misplaced++
			fmt.Fprintf(e.stderr, "MISPLACED  %s: %s, stored under %s on page %d\n", typed(r.PChannel), shownID(r.Checkpoint), typed(r.StoredUnder), r.Page)
		}
		if r.Higher != nil {
			higher++
			fmt.Fprintf(e.stderr, "HIGHER  %s: %s dumped, %s on freed page %d\n", typed(r.PChannel), shownID(r.Checkpoint), shownID(r.Higher), r.HigherPage)
		}
		good = append(good, dumpEntry{PChannel: r.PChannel, WAL: r.WAL, Checkpoint: text, ID: raw, Term: r.Term})
	}
	for _, a := range s.Ambiguous {
		ids := make([]string, len(a.Checkpoints))
		for i, id := range a.Checkpoints {
			ids[i] = fmt.Sprintf("%s (page %d)", shownID(id), a.Pages[i])
		}
		fmt.Fprintf(e.stderr, "AMBIGUOUS  %s: %s\n", typed(a.PChannel), strings.Join(ids, ", "))
	}

	if d := s.MetaDamage; d != nil {
		w := fmt.Sprintf("%s: the pages are read as of that commit", d)
		if (d.Newer || !d.Known) && !s.HiddenRead {
			w += "; the commit the damaged page held, if newer, cannot be read: what it deleted is dumped, and what it " +
				"raised or lowered is dumped as it was before (its records lie on pages read as freed, not told from older ones)"
		}
		warnings = append(warnings, w)
	}
	if s.Missing > 0 {
		warnings = append(warnings, fmt.Sprintf("the file is cut short: it has %s, %d fewer than its last commit counts, and their records are lost",
			count(s.Pages, "page"), s.Missing))
	}
	if s.NoMeta {
		warnings = append(warnings, "no meta page of the file is whole, so which pages its last commit holds is not known: "+
			"the dump holds each pchannel's highest record found, which may be one deleted or lowered since")
	}
	if s.Unattributed {
		warnings = append(warnings, fmt.Sprintf("no page of the file names a bucket any more (those that did are damaged): "+
			"every record found is dumped as bucket %s's; if the file held other buckets (--bucket), theirs are among them",
			shorten.QuotedText(e.opts.bucket)))
	}
	if s.Twins > 0 {
		warnings = append(warnings, fmt.Sprintf("%d buckets on live pages are taken for bucket %s, where a file holds one: "+
			"made before lowwater marked its buckets, another's renamed by damage, or one nested in another's and cut off "+
			"by damage; their records are read as one bucket's (a name in two of them with two checkpoints is AMBIGUOUS, "+
			"not dumped), and some are another bucket's: check them before restoring",
			s.Twins, shorten.QuotedText(e.opts.bucket)))
	}
	if s.RenamedAs != "" {
		warnings = append(warnings, fmt.Sprintf("the bucket's name is damaged: it reads %s, and is known by its mark",
			shorten.QuotedText(s.RenamedAs)))
	}
	if freed > 0 {
		warnings = append(warnings, fmt.Sprintf("%s (FREED above) found only on pages a later commit freed: "+
			"each was deleted since, or its newer record is on a damaged page; "+checkHighest, count(freed, "pchannel")))
	}
	if unsure > 0 {
		why := "its tree damaged, and its freelist unread or freeing a page the tree reaches"
		if s.NoFreelist {
			why = "its tree damaged, and no freelist kept (bbolt's NoFreelistSync) to say which pages are free"
		}
		warnings = append(warnings, fmt.Sprintf("%s (UNSURE above) read from pages whose state the file no longer tells "+
			"(%s): "+checkHighest, count(unsure, "pchannel"), why))
	}
	if hidden > 0 {
		warnings = append(warnings, fmt.Sprintf("%s (HIDDEN above) not as the commit the damaged meta page held, whose tree still reads whole, "+
			"left them: the dump holds them as the commit before, as bbolt reads the file. If that commit was acknowledged (the page damaged since, "+
			"not torn by a crash), edit the dump to its checkpoints", count(hidden, "pchannel")))
	}
	if higher > 0 {
		why := "each was lowered or replaced since (set --force), or the commit that wrote the higher one is hidden by a damaged meta page"
		if d := s.MetaDamage; d != nil && (d.Newer || !d.Known) {
			why = "the higher ones may be those of the commit the damaged meta page held, which bbolt would not read either"
		}
		warnings = append(warnings, fmt.Sprintf("%s (HIGHER above) with a higher checkpoint on a freed page than the live one dumped: %s. "+
			"A checkpoint too low replays records, one too high skips them: raise one in the dump only if it is known to be the last saved",
			count(higher, "pchannel"), why))
	}
	if n := len(s.Ambiguous); n > 0 {
		why := "damage, or another bucket whose tree is lost"
		if len(s.OtherBuckets) > 0 {
			why = "another bucket's (" + bucketNames(s.OtherBuckets) + "), or damage"
		}
		warnings = append(warnings, fmt.Sprintf("%s (AMBIGUOUS above) not dumped: live pages hold more than one checkpoint for each, "+
			"which one bucket cannot: %s", count(n, "pchannel"), why))
	}
	if s.LeftOut > 0 {
		warnings = append(warnings, fmt.Sprintf("%s left out, found on live pages that no bucket's tree reaches "+
			"in a file that holds other buckets (%s)", count(s.LeftOut, "record"), bucketNames(s.OtherBuckets)))
	}
	if misplaced > 0 {
		warnings = append(warnings, fmt.Sprintf("%s (MISPLACED above) found under a damaged key: each record is whole, and "+
			"its name check names the pchannel it is dumped as, one byte away from the key (as verify's MISPLACED)",
			count(misplaced, "record")))
	}
	if unfit > 0 {
		warnings = append(warnings, fmt.Sprintf("%s (UNFIT above) not dumped: restore could not read them back", count(unfit, "record")))
	}
	return good, warnings
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
