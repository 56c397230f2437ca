package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// cause is why a record cannot be decoded, as shownText prints it: the
// text may come from a registered WAL's codec.
func cause(e persistence.Entry) string { return shownText(rawCause(e)) }

// rawCause is why a record cannot be decoded, without the wrapping.
func rawCause(e persistence.Entry) string {
	var ce *persistence.CorruptRecordError
	if errors.As(e.Err, &ce) {
		return ce.Err.Error()
	}
	return e.Err.Error()
}

// unreadable names what is wrong with a record that cannot be decoded: a
// damaged one, or one of a WAL this build has not registered (see the
// package comment for building one that has).
func unreadable(e persistence.Entry) string {
	var bad *badNameError
	var misplaced *persistence.MisplacedRecordError
	switch {
	case errors.As(e.Err, &misplaced): // under a bad name too: its key was damaged so
		return "MISPLACED"
	case errors.As(e.Err, &bad):
		return "BAD NAME"
	case errors.Is(e.Err, wal.ErrUnknownWAL):
		return "UNKNOWN WAL"
	}
	return "CORRUPT"
}

// header is a record's term and layout version as list and get print
// them: "-" when its header could not be read, rather than a zero it does
// not hold.
func header(en persistence.Entry) (term, version string) {
	if en.Version == 0 {
		return "-", "-"
	}
	return fmt.Sprint(en.Term), fmt.Sprint(en.Version)
}

// walShown is a record's WAL name as list and get print it: "-" when the
// header could not be read, and as shown otherwise, since a record of a
// WAL this build does not know carries whatever name it was written with.
func walShown(n wal.Name) string {
	if n == "" {
		return "-"
	}
	return shown(string(n))
}

// listEntry is one record in list --json. Its text is not escaped as the
// table's is: JSON escapes it, and escapeJSON what JSON leaves raw.
type listEntry struct {
	PChannel   string   `json:"pchannel"`
	WAL        wal.Name `json:"wal,omitempty"`
	Checkpoint string   `json:"checkpoint,omitempty"`
	Term       uint64   `json:"term"`
	Version    int      `json:"version"`
	Error      string   `json:"error,omitempty"`
	// Quoted is the name Go-quoted, as delete --quoted takes it, for a
	// record under a name no node can use (BAD NAME): JSON turns bytes
	// that are not UTF-8 into U+FFFD, another name.
	Quoted string `json:"quoted,omitempty"`
	// TextUnfit says why Checkpoint is not a text the WAL reads back as
	// the stored ID (not UTF-8, which JSON turns into U+FFFD; a String
	// that panics; a Parse that reads another ID), as dump's UNFIT does.
	TextUnfit string `json:"textUnfit,omitempty"`
}

func list(ctx context.Context, e *env, _ []string) error {
	s, _, entries, err := e.read(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.warnStray(ctx); err != nil {
		return err
	}
	if e.opts.json {
		out := make([]listEntry, 0, len(entries))
		for _, en := range entries {
			le := listEntry{PChannel: en.PChannel, WAL: en.WAL, Term: en.Term, Version: en.Version}
			if en.Err != nil {
				le.Error = rawCause(en)
				if errors.As(en.Err, new(*badNameError)) { // misplaced there too
					le.Quoted = strconv.Quote(en.PChannel)
				}
			} else {
				le.Checkpoint = wal.Text(en.Checkpoint)
				if err := readsBack(en.WAL, le.Checkpoint, en.Checkpoint); err != nil {
					le.TextUnfit = err.Error()
				}
			}
			out = append(out, le)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("listing %s: %w", count(len(entries), "record"), err) // late: nothing printed
		}
		_, err := e.stdout.Write(escapeJSON(buf.Bytes()))
		return err
	}
	var tw table
	tw.row("PCHANNEL", "WAL", "CHECKPOINT", "TERM", "VERSION")
	corrupt, sentinels := 0, 0
	namesCut, idsCut := false, false
	for i, en := range entries {
		if i%4096 == 0 && ctx.Err() != nil {
			// A million records take seconds to lay out: --timeout and
			// Ctrl-C bound that too, and nothing is printed.
			return fmt.Errorf("listing %s: %w", count(len(entries), "record"), ctx.Err())
		}
		checkpoint := ""
		if en.Err == nil {
			var cut bool
			checkpoint, cut = tableID(en.Checkpoint)
			idsCut = idsCut || cut
			if wal.CheckPosition(en.Checkpoint) != nil {
				sentinels++
			}
		} else {
			checkpoint = unreadable(en)
			corrupt++
		}
		term, version := header(en)
		name, cut := tableName(en.PChannel)
		namesCut = namesCut || cut
		tw.row(name, walShown(en.WAL), checkpoint, term, version)
	}
	if err := tw.writeTo(e.stdout, e.width); err != nil {
		return err
	}
	switch { // sentences: wrapped on a terminal
	case namesCut && idsCut:
		fmt.Fprintln(e.prose, "names over 64 bytes and IDs over 40 are cut: list --json gives them whole")
	case namesCut:
		fmt.Fprintln(e.prose, "names over 64 bytes are cut: list --json gives them whole")
	case idsCut:
		fmt.Fprintln(e.prose, "IDs over 40 bytes are cut: list --json gives them whole")
	}
	fmt.Fprint(e.stdout, count(len(entries), "pchannel"))
	if corrupt > 0 {
		fmt.Fprintf(e.stdout, ", %d unreadable (run verify)", corrupt)
	}
	if sentinels > 0 {
		fmt.Fprintf(e.stdout, ", %d at a sentinel, not an offset (run verify)", sentinels)
	}
	fmt.Fprintln(e.stdout)
	return nil
}

func get(ctx context.Context, e *env, args []string) error {
	pchannel := args[0]
	s, byName, _, err := e.read(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	en, found := byName[pchannel]
	owner, err := s.owner(ctx, pchannel)
	if err != nil {
		return err
	}
	if !found {
		if owner.Term != 0 {
			fmt.Fprint(e.stdout, ownerLines(pchannel, owner, nil))
		}
		if cause := s.misplacedBeside(ctx, pchannel); cause != "" {
			return &exitError{code: ExitCorrupt, err: fmt.Errorf("%s: %s%s", typed(pchannel), cause, s.heldFor(pchannel))}
		}
		return &exitError{code: ExitNotFound, err: fmt.Errorf("%s: no checkpoint stored", typed(pchannel))}
	}
	fmt.Fprintf(e.stdout, "pchannel    %s\n", typed(en.PChannel))
	fmt.Fprintf(e.stdout, "wal         %s\n", walShown(en.WAL))
	if en.Err != nil {
		fmt.Fprintf(e.stdout, "checkpoint  %s: %s\n", unreadable(en), cause(en))
	} else {
		fmt.Fprintf(e.stdout, "checkpoint  %s\n", shownID(en.Checkpoint))
		if wal.CheckPosition(en.Checkpoint) != nil {
			fmt.Fprintln(e.stdout, "            a sentinel, not an offset: no node recovers from it (see verify)")
		}
	}
	term, version := header(en)
	fmt.Fprintf(e.stdout, "term        %s\n", term)
	fencing, err := s.fencing(ctx, []persistence.Entry{en})
	if err != nil {
		return err
	}
	if len(fencing) > 0 {
		// As verify says it: no owner can write over the record.
		fmt.Fprintf(e.stdout, "            above etcd's revision, so above every owner's: it fences\n"+
			"            every save (%s clears it; see verify)\n", commandLine("delete", pchannel))
	}
	fmt.Fprintf(e.stdout, "version     %s\n", version)
	// Records written for it under other keys: what it had may be there
	// (verify tells them too).
	for _, m := range s.writtenFor(pchannel) {
		fmt.Fprintf(e.stdout, "misplaced   %s holds %s, written for it (see verify)\n", typed(m.key), holding(m.MisplacedRecordError))
	}
	switch {
	case s.etcd == nil:
	case owner.Term != 0:
		fmt.Fprint(e.stdout, ownerLines(pchannel, owner, &en))
	default:
		fmt.Fprintln(e.stdout, "owner       none")
	}
	if en.Err != nil {
		return &exitError{code: ExitCorrupt, err: fmt.Errorf("%s: unreadable record: %s", shown(pchannel), cause(en))}
	}
	return nil
}

// ownerLines is what get prints of pchannel's owner key o, and of the
// record, en, if one is stored.
func ownerLines(pchannel string, o holder, en *persistence.Entry) string {
	var line string
	switch {
	case o.Leaseless():
		return fmt.Sprintf("owner       term %d, no lease: not a node's, and it never expires\n"+
			"            (no node can own %s until %s removes it)\n", o.Term, shown(pchannel), commandLine("release", pchannel))
	case o.Foreign:
		return fmt.Sprintf("owner       term %d, not a node's: bound to lease %x,\n"+
			"            put by another program or by hand; no node can own %s until\n"+
			"            it goes: %s\n"+
			"            (or at once: etcdctl lease revoke %x)\n",
			o.Term, int64(o.Lease), shown(pchannel), o.goes(), int64(o.Lease))
	case o.toolHold():
		line = fmt.Sprintf("owner       term %d, held by %s:\n            %s\n", o.Term, shownText(o.Holder), o.ends())
	case o.lapsing():
		who := "a node"
		if o.Holder != "" {
			who = shownText(o.Holder)
		}
		line = fmt.Sprintf("owner       term %d (%s, which looks gone):\n            %s\n", o.Term, who, o.ends())
	case o.Holder != "":
		line = fmt.Sprintf("owner       term %d (a node owns it: %s)\n", o.Term, shownText(o.Holder))
	default:
		line = fmt.Sprintf("owner       term %d (a node owns it)\n", o.Term)
	}
	if en != nil && en.Err == nil && en.Term > o.Term {
		line += fmt.Sprintf("            fenced: the record's term, %d, is above it, so its saves are\n"+
			"            refused; restart the node\n", en.Term)
	}
	return line
}

// release removes an owner key with no lease (etcdcatalog.Owner.Leaseless),
// which keeps every node off the pchannel for good, and only such a key.
// A node's is bound to its session's lease: it goes with the session,
// and removing it under a running node would end its ownership.
func release(ctx context.Context, e *env, args []string) error {
	pchannel := args[0]
	if e.opts.url.Kind != catalogurl.Etcd {
		return usagef("release: only an etcd catalog has owners (a bbolt file's lock keeps nodes out)")
	}
	s, err := e.open(ctx, readOnly)
	if err != nil {
		return err
	}
	defer s.close()
	for {
		o, err := s.owner(ctx, pchannel)
		switch {
		case err != nil:
			return err
		case o.Term == 0:
			fmt.Fprintf(e.stdout, "%s: no owner\n", shown(pchannel))
			return nil
		case o.Foreign:
			return refused("%s: its owner key (term %d) is not a node's: bound to lease %x, put by another program "+
				"or by hand, it keeps every node off the pchannel until it goes: %s, or with 'etcdctl lease revoke %x'",
				shown(pchannel), o.Term, int64(o.Lease), o.goes(), int64(o.Lease))
		case o.toolHold():
			return refused("%s is held by %s: %s", shown(pchannel), shownText(o.Holder), o.ends())
		case o.lapsing():
			return refused("%s is owned by %s: %s", shown(pchannel), o.node(), o.ends())
		case !o.Leaseless():
			return refused("%s is owned by %s: its ownership ends with the node's session; "+
				"stop the node", shown(pchannel), o.node())
		case e.opts.dryRun:
			fmt.Fprintf(e.stdout, "%s: would remove its owner key (term %d), which has no lease\n", shown(pchannel), o.Term)
			return nil
		}
		removed, err := s.etcd.DeleteLeaselessOwner(ctx, pchannel, o.Term)
		if err != nil {
			return err
		}
		if removed {
			fmt.Fprintf(e.stdout, "%s: removed its owner key (term %d), which had no lease\n", shown(pchannel), o.Term)
			return nil
		}
		// Removed or replaced since it was read: judge what is there now.
	}
}

func verify(ctx context.Context, e *env, _ []string) error {
	s, _, entries, err := e.read(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	out := e.prose
	found := map[string]bool{} // kinds of unreadable record seen
	unread := 0
	for _, en := range entries {
		if en.Err != nil {
			unread++
			found[unreadable(en)] = true
			if en.PChannel == "" && s.bolt != nil {
				found[emptyKey] = true
			}
			if errors.Is(en.Err, wal.ErrUnknownWAL) {
				found["UNKNOWN WAL"] = true // a misplaced one's ID too: read with a build that knows it
			}
			fmt.Fprintf(out, "%s  %s: %s\n", unreadable(en), typed(en.PChannel), cause(en))
		}
	}
	// Readable, but no checkpoint: a node refuses to recover from it.
	var sentinels int
	for _, en := range entries {
		if en.Err == nil && errors.Is(wal.Check(en.WAL, en.Checkpoint), wal.ErrSentinel) {
			sentinels++
			fmt.Fprintf(out, "SENTINEL  %s: %s is not an offset; no node recovers from it\n", typed(en.PChannel), shownID(en.Checkpoint))
		}
	}
	if sentinels > 0 {
		found["SENTINEL"] = true
	}
	fencing, err := s.fencing(ctx, entries)
	if err != nil {
		return err
	}
	for _, en := range fencing {
		fmt.Fprintf(out, "FENCING  %s: term %d is above etcd's revision, so above every owner's\n", shown(en.PChannel), en.Term)
	}
	owners, err := s.owners(ctx)
	if err != nil {
		return err
	}
	fenced := fencedOwners(entries, fencing, owners)
	for _, f := range fenced {
		owner := strconv.FormatUint(f.owner.Term, 10)
		if f.owner.Holder != "" {
			owner += ", " + shownText(f.owner.Holder)
		}
		fmt.Fprintf(out, "FENCED OWNER  %s: term %d, above its owner's (%s)\n", shown(f.PChannel), f.Term, owner)
	}
	noLease := leaselessOwners(owners)
	for _, o := range noLease {
		fmt.Fprintf(out, "NO LEASE  %s: its owner key (term %d) has no lease: it never expires\n", typed(o.pchannel), o.Term)
	}
	foreign := foreignOwners(owners)
	for _, o := range foreign {
		fmt.Fprintf(out, "NOT A NODE'S  %s: its owner key (term %d), bound to lease %x, is not what a node puts\n",
			typed(o.pchannel), o.Term, int64(o.Lease))
	}
	stray, err := s.strayKeys(ctx)
	if err != nil {
		return err
	}
	for _, k := range stray {
		fmt.Fprintf(out, "STRAY  %s: neither a record nor an owner key\n", shownKey(k))
	}
	var meta *persistence.MetaDamage
	if s.bolt != nil {
		if meta, err = s.bolt.DamagedMeta(); err != nil {
			return err
		}
		if meta != nil {
			fmt.Fprintf(out, "DAMAGED META  %s: %s\n", e.opts.url.Path, meta)
		}
	}
	fmt.Fprintf(out, "%s, %d unreadable", count(len(entries), "record"), unread)
	if len(stray) > 0 {
		fmt.Fprintf(out, ", %s", count(len(stray), "stray key"))
	}
	fmt.Fprintln(out)
	if unread == 0 && sentinels == 0 && len(fencing) == 0 && len(fenced) == 0 && len(noLease) == 0 && len(foreign) == 0 &&
		len(stray) == 0 && meta == nil {
		return nil
	}
	// Every kind found, in the order of the lines above.
	var kinds []string
	if meta != nil {
		kinds = append(kinds, "a damaged meta page")
		found["DAMAGED META"] = true
	}
	if unread > 0 {
		kinds = append(kinds, count(unread, "unreadable record"))
	}
	if sentinels > 0 {
		kinds = append(kinds, count(sentinels, "record")+" holding a sentinel, not an offset")
	}
	if len(fencing) > 0 {
		kinds = append(kinds, count(len(fencing), "record")+" no owner can write over")
	}
	if len(fenced) > 0 {
		kinds = append(kinds, count(len(fenced), "record")+" fencing an owner")
	}
	if len(noLease) > 0 {
		kinds = append(kinds, count(len(noLease), "owner key")+" with no lease")
	}
	if len(foreign) > 0 {
		kinds = append(kinds, count(len(foreign), "owner key")+" not a node's")
	}
	if len(stray) > 0 {
		kinds = append(kinds, count(len(stray), "stray key")+" under "+s.strayDir())
	}
	msg := strings.Join(kinds, "; ")
	if len(fencing) > 0 {
		found["FENCING"] = true
	}
	if len(fenced) > 0 {
		found["FENCED OWNER"] = true
	}
	if len(noLease) > 0 {
		found["NO LEASE"] = true
	}
	if len(foreign) > 0 {
		found["NOT A NODE'S"] = true
	}
	if len(stray) > 0 {
		found["STRAY"] = true
	}
	for _, h := range verifyHints(meta, s.bolt != nil) {
		if found[h.kind] {
			msg += fmt.Sprintf("\n  %s: %s", h.kind, h.hint)
		}
	}
	return &exitError{code: ExitCorrupt, err: errors.New(msg)}
}

// verifyHints is verify's advice for each kind of finding, meta the
// damaged meta page if any, onBolt whether the catalog is a bbolt file.
// Each is one line, as every message of the tool is: on a terminal, the
// wrapper breaks it at its width.
func verifyHints(meta *persistence.MetaDamage, onBolt bool) []verifyHint {
	// A bbolt Load that finds nothing fails beside such a record; etcd's
	// keys are not damaged in place, and its Load does not look.
	misplacedHolds := "while it is stored, a node of the pchannel it was written for, with nothing stored, " +
		"does not start (that pchannel is named when the key is its name damaged in one byte): write it under " +
		"that pchannel, 'set --force PCHANNEL ID' with the ID it holds, then 'delete' it (with --force when none is named)"
	if !onBolt {
		misplacedHolds = "a node of the pchannel it was written for, with nothing stored, starts from its " +
			"vchannels' checkpoints (that pchannel is named when the key is its name damaged in one byte): " +
			"write it under that pchannel first, 'set PCHANNEL ID' with the ID it holds, then 'delete' it " +
			"(with --force when none is named)"
	}
	return []verifyHint{
		{"CORRUPT", "repair with 'set --force PCHANNEL ID' or 'delete PCHANNEL'; for ID, the last " +
			"checkpoint the pchannel's consumers are known to have passed, or what 'dump --salvage' " +
			"finds of it on a bbolt file's freed pages; deleted, a node starts from its vchannels' " +
			"own checkpoints"},
		{"MISPLACED", "a whole record under another name than the one it was written for: " +
			"its key was damaged, or it was copied there (a name shown quoted takes --quoted); " +
			misplacedHolds},
		{"SENTINEL", "Kafka's clients read -1 as the end of the log and -2 as its " +
			"start: 'set PCHANNEL kafka:N' with the offset to resume from, or " +
			"'delete PCHANNEL' to start from the vchannels' own checkpoints"},
		{"UNKNOWN WAL", "read with a lowwater built with that WAL (package cli)"},
		{"BAD NAME", "no node can use it: 'delete --quoted NAME', NAME quoted as shown here"},
		{emptyKey, "in a bbolt file, a key damaged to nothing, which bbolt cannot remove: " +
			"restore the file from a backup"},
		{"FENCING", "written before an etcd restore reset the terms, or copied from " +
			"another cluster: it fences every owner's saves; 'delete PCHANNEL'"},
		{"FENCED OWNER", "the record came from another cluster, or from before an etcd " +
			"restore: restart the node that owns it, which takes it again under a " +
			"newer term"},
		{"NO LEASE", "put by hand or by another tool, not by a node: it keeps " +
			"every node off the pchannel for good; 'release PCHANNEL', or for a " +
			"name shown quoted, 'release --quoted NAME' as shown here"},
		{"NOT A NODE'S", "put with a lease by another program, or by hand: it keeps every node off " +
			"the pchannel until its lease ends, and no node renews it; find what put it, or revoke the lease " +
			"(etcdctl lease revoke LEASE)"},
		{"DAMAGED META", metaHint(meta)},
		{"STRAY", "not lowwater's: something else writes among the catalog's " +
			"keys (a tool given the same prefix, a hand edit, a later lowwater); " +
			"lowwater neither reads nor removes them: find what wrote them"},
	}
}

type verifyHint struct{ kind, hint string }

// emptyKey is the kind of a BAD NAME of a bbolt file that only delete
// could remove, and bbolt cannot: the empty one.
const emptyKey = `BAD NAME ""`

// metaHint is verify's advice on a damaged meta page d (nil: none).
func metaHint(d *persistence.MetaDamage) string {
	if d != nil && d.Known && !d.Newer {
		return "the damaged page held the commit before the one read: nothing " +
			"is hidden, and the next write rewrites it"
	}
	return "a page newer than the one read may hide the file's last commit: " +
		"torn by a crash, it was never acknowledged; damaged since, its saves " +
		"are lost: restore the file from a backup, or without one, 'dump " +
		"--salvage', whose HIGHER and HIDDEN lines name what the page held, and " +
		"restore that into a new file. The next write rewrites the page, and " +
		"makes the loss permanent: the tool refuses to write"
}

// parseID reads the ID text of a set for the pchannel whose record is en
// (nil: none): in the stored WAL when there is one, so that "123" is
// enough; text naming another WAL is read in its own, and the change of
// WAL judged by plan.
func parseID(en *persistence.Entry, text string) (wal.MessageID, error) {
	var id wal.MessageID
	var err error
	if en != nil && wal.Known(en.WAL) {
		id, err = wal.Parse(en.WAL, text)
		if errors.Is(err, wal.ErrWALMismatch) {
			id, err = wal.ParseAny(text)
		}
	} else {
		id, err = wal.ParseAny(text)
	}
	if name, _, ok := strings.Cut(text, ":"); errors.Is(err, wal.ErrSyntax) && ok && !wal.Known(wal.Name(name)) &&
		strings.ContainsFunc(name, unicode.IsLetter) {
		// "nats:5" for a kafka pchannel: say what is wrong with it.
		_, err = wal.ParseAny(text)
	}
	switch {
	case errors.Is(err, wal.ErrUnknownWAL):
		return nil, usagef("ID %s: %s; known WALs: %s", shortQuoted(text), shownText(err.Error()), walNames())
	case err != nil && en == nil && !strings.Contains(text, ":") && text != "" && strings.Trim(text, "0123456789") == "":
		// A bare number takes its WAL from the record stored: with none,
		// "does not start with a WAL name" did not say why it must.
		return nil, usagef("ID %s: nothing is stored for the pchannel to take a WAL from: give one (%s:%s, say); known WALs: %s",
			shortQuoted(text), wal.Kafka, text, walNames())
	case err != nil:
		// A registered WAL's Parse wrote this error: it may hold anything.
		return nil, usagef("ID %s: %s", shortQuoted(text), shownText(err.Error()))
	}
	if _, err := wal.Marshal(id); err != nil {
		// A registered WAL's codec that does not read it back, or cannot
		// order it: every catalog refuses it, --force or not.
		return nil, usagef("ID %s cannot be stored: %s", shortQuoted(text), shownText(err.Error()))
	}
	return withStoredPartition(id, text, en), nil
}

// withStoredPartition is id, parsed from text: a Pulsar ID written without
// its partition keeps the stored one. Parsed as partition 0, a raise
// moved the consumers' partition.
func withStoredPartition(id wal.MessageID, text string, en *persistence.Entry) wal.MessageID {
	if p, ok := id.(wal.PulsarID); ok && !strings.Contains(text, "@") && en != nil {
		if stored, ok := en.Checkpoint.(wal.PulsarID); ok {
			p.Partition = stored.Partition
			return p
		}
	}
	return id
}

// action is what a write does to one pchannel.
type action int

const (
	unchanged action = iota
	create
	raise
	lower     // forced: the record replaced (replaceRecord)
	replace   // forced: a corrupt record or one of another WAL
	unordered // forced, as replace: a record id cannot be compared with
	remove    // delete's, never planned: named for the warning of a forced one
	// forced, as replace: nothing stored, beside a record that may be
	// the pchannel's own under a damaged key (createBeside)
	createBeside
)

// change is a write the tool is about to make: act, over en (nil: nothing
// stored), to id (nil: a delete).
type change struct {
	act action
	en  *persistence.Entry
	id  wal.MessageID
}

// anyway says that the change is made around a holder all the same
// (--force), or would be in a dry run.
func (ch change) anyway(dry bool) string {
	switch {
	case ch.act == remove && dry:
		return "it would be deleted anyway (--force)"
	case ch.act == remove:
		return "deleting anyway (--force)"
	case dry:
		return "it would be written anyway (--force)"
	}
	return "writing anyway (--force)"
}

// aroundNode says what becomes of the change when it is forced around a
// running node. The node keeps its checkpoint in memory and saves it
// again when its minimum next moves, and a save never lowers what is
// stored: a save below it adopts what is stored as its own.
func (ch change) aroundNode() string {
	switch {
	case ch.act == raise:
		return "the raise stands, as the node's saves never lower it"
	case ch.act == remove:
		return "the node's next save writes its checkpoint back: stop the node for a change that lasts"
	case ch.act == lower:
		return "the node's next save writes over it if the node's checkpoint is higher: stop the node for a change that lasts"
	case ch.act == unordered || ch.en != nil && ch.en.WAL != "" && ch.en.WAL != walOf(ch.id):
		return "the node's saves, which cannot be ordered against it, fail: stop the node"
	default:
		// A create, or a record replaced: the node's checkpoint may be of
		// another WAL than the one written, which the tool cannot see.
		return "the node's next save writes over it if the node's checkpoint is higher, and fails if it is of another WAL"
	}
}

// walOf names id's WAL by its type: a registered type's WALName may panic.
// id came from wal.Parse, so its type is registered.
func walOf(id wal.MessageID) wal.Name {
	name, _ := wal.NameOf(id)
	return name
}

// plan decides how to write id over en (nil: nothing stored), refusing what
// needs force when force is not given.
//
// The IDs are ordered with wal.Compare, never with their own LT and EQ: a
// registered WAL's ID type may panic on some values, and that must be a
// refusal naming the pchannel, not a crash (which would exit with the code
// of a bad command line). Such a pair is refused as a corrupt record is,
// since which of the two is broken cannot be told; --force replaces the
// record without comparing, as it replaces a corrupt one.
func plan(pchannel string, en *persistence.Entry, id wal.MessageID, force bool) (action, error) {
	if wal.CheckPosition(id) != nil && !force {
		// Kafka's clients read -1 as the log's end and -2 as its start:
		// a consumer seeking to it skips, or replays, everything, and so
		// no node recovers from it.
		return 0, refused("%s: %s is not an offset: Kafka's clients read -1 as the end of the log and -2 as its start, "+
			"so no node recovers from it; give a real offset (0 for the start), "+
			"or --force to store it all the same", shown(pchannel), shownID(id))
	}
	var misplaced *persistence.MisplacedRecordError
	switch {
	case en == nil:
		return create, nil
	case errors.As(en.Err, &misplaced) && !force:
		return 0, refused("%s holds %s, written for %s (its key damaged, or copied here): "+
			"write it under its own name first (see verify); --force replaces it", typed(pchannel), holding(misplaced), writtenFor(misplaced))
	case misplaced != nil:
		return replace, nil
	case en.Err != nil && !force && errors.Is(en.Err, wal.ErrUnknownWAL):
		// Whole, of a WAL this build was not made with: not corrupt.
		return 0, refused("%s stores a checkpoint of WAL %s, which this build of lowwater does not know:"+
			" read and write it with one built with that WAL (package cli); --force replaces it unread",
			shown(pchannel), shown(string(en.WAL)))
	case en.Err != nil:
		if !force {
			return 0, refused("%s: the stored record is corrupt (%s): --force replaces it", shown(pchannel), cause(*en))
		}
		return replace, nil
	case en.WAL != walOf(id):
		if !force {
			return 0, refused("%s stores a %s checkpoint, not %s: --force switches its WAL",
				shown(pchannel), shown(string(en.WAL)), shown(string(walOf(id))))
		}
		return replace, nil
	}
	c, err := wal.Compare(id, en.Checkpoint)
	switch {
	case err != nil && !force:
		return 0, refused("%s: %s (%s): --force replaces the record",
			shown(pchannel), incomparable(id, en.Checkpoint), shownText(err.Error()))
	case err != nil:
		return unordered, nil
	case c == 0 && !sameBytes(id, en.Checkpoint) && !force:
		// Equal in order, not in what the order ignores (a Pulsar
		// partition): written, it would be, unforced, an unseen change.
		return 0, refused("%s: %s differs from the stored %s only in what orders neither (a partition): --force replaces it",
			shown(pchannel), shownID(id), shownID(en.Checkpoint))
	case c == 0 && !sameBytes(id, en.Checkpoint):
		return replace, nil
	case c == 0:
		return unchanged, nil
	case c < 0 && !force:
		also, then := "", "\n"+replay(en.Checkpoint, id)
		if from, to, moved := partitionMoved(en.Checkpoint, id); moved {
			// Positions of two partitions bound no replay.
			also, then = fmt.Sprintf(", and of partition %d, not %d", to, from), ""
		}
		return 0, refused("%s: %s is below the stored %s%s; lowering needs --force%s",
			shown(pchannel), shownID(id), shownID(en.Checkpoint), also, then)
	case c < 0:
		return lower, nil
	}
	if from, to, moved := partitionMoved(en.Checkpoint, id); moved && !force {
		// What a consumer seeks with, which no order sees.
		return 0, refused("%s: %s is of partition %d, the stored %s of partition %d: "+
			"one pchannel is one partition; --force moves it",
			shown(pchannel), shownID(id), to, shownID(en.Checkpoint), from)
	}
	return raise, nil
}

// partitionMoved reports whether id, of Pulsar, names another partition
// than the stored one.
func partitionMoved(stored, id wal.MessageID) (from, to int32, moved bool) {
	s, ok := stored.(wal.PulsarID)
	n, nok := id.(wal.PulsarID)
	return s.Partition, n.Partition, ok && nok && s.Partition != n.Partition
}

// sameBytes reports whether a and b are stored as the same bytes.
func sameBytes(a, b wal.MessageID) bool {
	x, err := wal.Marshal(a)
	if err != nil {
		return false
	}
	y, err := wal.Marshal(b)
	return err == nil && bytes.Equal(x, y)
}

// incomparable says that id and the stored checkpoint cannot be ordered.
func incomparable(id, stored wal.MessageID) string {
	return fmt.Sprintf("%s cannot be compared with the stored %s", shownID(id), shownID(stored))
}

// warnReplay warns of what a forced write costs consumers: they read
// again what they have read, or, across a WAL switch, lose their place.
func warnReplay(w io.Writer, act action, pchannel string, en *persistence.Entry, id wal.MessageID) {
	var misplaced *persistence.MisplacedRecordError
	if en != nil && errors.As(en.Err, &misplaced) && act != unchanged {
		// Written over, it is gone, and with it, on bbolt, what held
		// its own pchannel's node back.
		fmt.Fprintf(w, "warning: %s: %s, holding %s, is dropped: write it under its own name (see verify)\n",
			typed(pchannel), recordOf(misplaced), holding(misplaced))
		if wal.CheckPosition(id) != nil {
			fmt.Fprintf(w, "warning: %s: %s\n", shown(pchannel), noOffset(id)) // whatever it replaces
		}
		return // not this pchannel's: no replay of its, nor a switch of its WAL
	}
	if en != nil && en.Err == nil && act != unchanged {
		if from, to, moved := partitionMoved(en.Checkpoint, id); moved {
			// Positions of two partitions bound no replay.
			fmt.Fprintf(w, "warning: %s: from partition %d to %d: its consumers seek another partition\n", shown(pchannel), from, to)
			return
		}
	}
	switch {
	case act != unchanged && wal.CheckPosition(id) != nil:
		// Whatever it replaces, if anything: what no node recovers from.
		fmt.Fprintf(w, "warning: %s: %s\n", shown(pchannel), noOffset(id))
	case act == lower:
		fmt.Fprintf(w, "warning: %s: %s\n", shown(pchannel), replay(en.Checkpoint, id))
	case act == unordered:
		fmt.Fprintf(w, "warning: %s: %s; if it is below, consumers replay from it\n",
			shown(pchannel), incomparable(id, en.Checkpoint))
	case act == replace && en.WAL != "" && en.WAL != walOf(id):
		// A node checks the WAL of what it recovers: one of another is
		// as unusable to it as a corrupt record.
		dropped := "its record"
		if en.Err == nil {
			dropped = shownID(en.Checkpoint)
		}
		from, to := shown(string(en.WAL)), shown(string(walOf(id)))
		fmt.Fprintf(w, "warning: %s: WAL switch from %s to %s: %s is dropped and consumers restart at %s; "+
			"a node still on %s takes the record for a corrupt one and does not recover %s\n",
			shown(pchannel), from, to, dropped, shownID(id), from, shown(pchannel))
	}
}

// replay says what lowering from to to costs: consumers restart earlier.
func replay(from, to wal.MessageID) string {
	if wal.CheckPosition(to) != nil {
		return noOffset(to)
	}
	msg := fmt.Sprintf("replay: consumers restart at %s and re-read what follows it up to %s", shownID(to), shownID(from))
	switch f := from.(type) {
	case wal.KafkaID:
		if t, ok := to.(wal.KafkaID); ok {
			msg += " (" + count(distance(int64(f), int64(t)), "message") + ")"
		}
	case wal.RocksMQID:
		if t, ok := to.(wal.RocksMQID); ok {
			msg += " (" + count(distance(int64(f), int64(t)), "message") + ")"
		}
	}
	return msg
}

// noOffset says what storing a Kafka sentinel costs: the pchannel stalls.
func noOffset(id wal.MessageID) string {
	return fmt.Sprintf("%s is no offset (Kafka's clients read -1 as the end of the log and -2 as its start): "+
		"no node recovers from it until 'set' gives an offset", shownID(id))
}

// distance is from - to, for from >= to, in a type that holds it: from the
// largest offset down to the smallest is more than an int64 holds.
func distance(from, to int64) uint64 { return uint64(from) - uint64(to) }

// apply writes id for pchannel as act says, through c.
func (s *store) apply(ctx context.Context, c persistence.Catalog, pchannel string, act action, id wal.MessageID) error {
	if act == unchanged {
		return nil
	}
	var err error
	// A sentinel, forced, goes in as a repair does: Save refuses it.
	if act == lower || act == replace || act == unordered || act == createBeside || wal.CheckPosition(id) != nil {
		err = s.replaceRecord(ctx, c, pchannel, id)
	} else {
		err = c.Save(ctx, pchannel, id)
	}
	var ahead *persistence.StoredAheadError
	if errors.As(err, &ahead) {
		return refused("%s: %s was stored meanwhile, above %s", shown(pchannel), shownID(ahead.Stored), shownID(id))
	}
	return err
}

// describe says what act does, in the past tense or, dry, the conditional.
func describe(act action, pchannel string, en *persistence.Entry, id wal.MessageID, dry bool) string {
	verb := map[action][2]string{
		unchanged:    {"unchanged", "would be unchanged"},
		create:       {"created", "would create"},
		createBeside: {"created", "would create"},
		raise:        {"raised", "would raise"},
		lower:        {"LOWERED", "would LOWER"},
		replace:      {"replaced", "would replace"},
		unordered:    {"replaced", "would replace"},
	}[act]
	v := verb[0]
	if dry {
		v = verb[1]
	}
	from := "nothing"
	var misplaced *persistence.MisplacedRecordError
	switch {
	case en == nil:
	case errors.As(en.Err, &misplaced):
		from = "a misplaced record holding " + holding(misplaced)
	case en.Err != nil:
		from = "a corrupt record"
	default:
		from = shownID(en.Checkpoint)
	}
	if act == unchanged {
		// The stored ID, which may differ in what orders neither.
		return fmt.Sprintf("%s: %s at %s", shown(pchannel), v, shownID(en.Checkpoint))
	}
	if act == create || act == createBeside {
		return fmt.Sprintf("%s: %s at %s", shown(pchannel), v, shownID(id))
	}
	return fmt.Sprintf("%s: %s from %s to %s", shown(pchannel), v, from, shownID(id))
}

func set(ctx context.Context, e *env, args []string) error {
	pchannel, text := args[0], args[1]
	s, err := e.open(ctx, e.writeMode(readWrite))
	if err != nil {
		return err
	}
	defer s.close()
	byName, _, err := s.entries(ctx)
	if err != nil {
		return err
	}
	var en *persistence.Entry
	if v, ok := byName[pchannel]; ok {
		en = &v
	}
	id, err := parseID(en, text)
	if err != nil {
		return err
	}
	if en == nil {
		id = s.heldPartition(pchannel, id, text)
	}
	act, err := plan(pchannel, en, id, e.opts.force)
	if err == nil && act == create {
		act, err = s.create(ctx, pchannel, e.opts.force)
	}
	if err == nil && act != unchanged {
		err = s.checkTerm(ctx, pchannel, en, e.opts.force)
	}
	if err != nil {
		return s.alsoOwned(ctx, pchannel, err)
	}
	warnReplay(e.stderr, act, pchannel, en, id)
	if act == createBeside {
		s.warnBeside(e.stderr, pchannel, id)
	}
	ch := change{act: act, en: en, id: id}
	if e.opts.dryRun {
		// As the write itself: one that changes nothing asks no owner.
		if act != unchanged {
			w, err := s.checkOwner(ctx, pchannel, ch, e.opts.force)
			if err != nil {
				return err
			}
			s.warn(w)
		}
		fmt.Fprintln(e.stdout, describe(act, pchannel, en, id, true))
		return nil
	}
	if act == unchanged {
		fmt.Fprintln(e.stdout, describe(act, pchannel, en, id, false))
		return nil
	}
	sent := false
	err = s.write(ctx, pchannel, ch, e.opts.force, func(c persistence.Catalog) error {
		sent = true
		return s.apply(ctx, c, pchannel, act, id)
	})
	if err != nil {
		return s.cutShort(ctx, err, pchannel, "writing", "written", sent)
	}
	fmt.Fprintln(e.stdout, describe(act, pchannel, en, id, false))
	return nil
}

// writeMode opens read-only for a dry run, which writes nothing: it then
// also works beside other readers.
func (e *env) writeMode(m mode) mode {
	switch {
	case !e.opts.dryRun:
		return m
	case m == createFile:
		return dryCreate
	default:
		return readOnly
	}
}

func del(ctx context.Context, e *env, args []string) error {
	pchannel := args[0]
	s, err := e.open(ctx, e.writeMode(readWrite))
	if err != nil {
		return err
	}
	defer s.close()
	byName, list, err := s.entries(ctx)
	if err != nil {
		return err
	}
	en, found := byName[pchannel]
	if !found {
		fmt.Fprintf(e.stdout, "%s: nothing stored\n", shown(pchannel))
		return nil
	}
	was := "a corrupt record"
	var misplaced *persistence.MisplacedRecordError
	unknownWAL := en.Err != nil && errors.Is(en.Err, wal.ErrUnknownWAL)
	switch {
	case errors.As(en.Err, &misplaced):
		was = "a misplaced record holding " + holding(misplaced)
	case en.Checkpoint != nil:
		was = shownID(en.Checkpoint)
	case unknownWAL:
		was = "a checkpoint of WAL " + shown(string(en.WAL))
	}
	ch := change{act: remove, en: &en}
	if misplaced != nil {
		// Another pchannel's checkpoint, maybe the only copy: a bbolt
		// file holds that pchannel's node back while it is there. Once
		// written under its own name, it is a copy.
		if own, ok := storedUnder(byName, misplaced); ok {
			was += fmt.Sprintf(" (%s, whose it was, holds %s)", typed(misplaced.WrittenFor), shownID(own))
		} else {
			gone, set := s.misplacedCost(byName, misplaced)
			if !e.opts.force {
				return refused("%s holds %s, written for %s (its key damaged, or copied here): "+
					"%s; write it under its own name first (%s, see verify), or --force deletes it",
					typed(pchannel), holding(misplaced), writtenFor(misplaced), gone, set)
			}
			fmt.Fprintf(e.stderr, "warning: %s: it holds %s, written for %s: %s\n", typed(pchannel), holding(misplaced), writtenFor(misplaced), gone)
		}
	}
	if unknownWAL && !e.opts.force {
		// Whole, of a WAL this build was not made with: a node built
		// with it recovers from the record, as set says.
		return refused("%s stores a checkpoint of WAL %s, which this build of lowwater does not know, and a node "+
			"built with it recovers from: delete it with one built with that WAL (package cli), or --force",
			shown(pchannel), shown(string(en.WAL)))
	}
	if en.Err == nil && wal.CheckPosition(en.Checkpoint) == nil && !e.opts.force {
		// A record a node recovers from: deleting it is the largest of
		// lowerings, and asks for what a lowering does. A record that
		// cannot be read, or that no node can use (a name it refuses, a
		// Kafka sentinel), is deleted as the repair verify points to; so
		// is one that fences every owner.
		fencing, err := s.fencing(ctx, list)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(fencing, func(f persistence.Entry) bool { return f.PChannel == pchannel }) {
			// An owner, if any, is the first thing to know.
			if _, err := s.checkOwner(ctx, pchannel, ch, false); err != nil {
				return err
			}
			return refused("%s: delete removes %s, and a node that recovers %s then starts from its "+
				"vchannels' own checkpoints, re-reading the WAL from the lowest of them: --force deletes it",
				shown(pchannel), was, shown(pchannel))
		}
	}
	if e.opts.dryRun {
		w, err := s.checkOwner(ctx, pchannel, ch, e.opts.force)
		if err != nil {
			return err
		}
		s.warn(w)
		fmt.Fprintf(e.stdout, "%s: would delete %s\n", typed(pchannel), was)
		return nil
	}
	sent := false
	err = s.write(ctx, pchannel, ch, e.opts.force, func(c persistence.Catalog) error {
		sent = true
		return c.Delete(ctx, pchannel)
	})
	if err != nil {
		return s.cutShort(ctx, err, pchannel, "deleting", "deleted", sent)
	}
	fmt.Fprintf(e.stdout, "%s: deleted %s\n", typed(pchannel), was)
	return nil
}

// misplacedCost says what deleting a misplaced record m costs, no copy of
// it being stored under the name it was written for, and the set that
// keeps it: its ID under that name.
func (s *store) misplacedCost(byName map[string]persistence.Entry, m *persistence.MisplacedRecordError) (gone, set string) {
	verb, suffix := "set --force", ""
	gone = "once it is gone, the node of that pchannel starts from its vchannels' checkpoints"
	if s.etcd != nil {
		verb, gone = "set", "it may be the only copy of that pchannel's checkpoint"
	}
	if own, ok := byName[m.WrittenFor]; ok && m.WrittenFor != "" {
		// It stores something already, below this or not comparable
		// with it: a set over it is a raise, or needs --force.
		verb, gone = "set --force", "it may be the only copy of what that pchannel had"
		if own.Err == nil {
			gone = fmt.Sprintf("%s holds %s now, and this may be the only copy of what it had", typed(m.WrittenFor), shownID(own.Checkpoint))
			if m.Checkpoint != nil {
				if c, ok := order(own.Checkpoint, m.Checkpoint); ok && c < 0 {
					verb, suffix = "set", ", a raise"
				}
			}
		}
	}
	// The name and the ID go in whole, once each: either may hold the
	// other's placeholder.
	name := "PCHANNEL"
	if m.WrittenFor != "" {
		name = typed(m.WrittenFor)
	}
	if m.Checkpoint == nil {
		// Its ID is text only to a build with its WAL.
		return gone, fmt.Sprintf("with a lowwater built with WAL %s (package cli), '%s %s ID' with the ID it holds", shown(string(m.WAL)), verb, name)
	}
	return gone, fmt.Sprintf("'%s %s %s'%s", verb, name, shownID(m.Checkpoint), suffix)
}

// writtenFor is the pchannel a misplaced record was written for, as far
// as its check tells (persistence.MisplacedRecordError.WrittenFor).
func writtenFor(m *persistence.MisplacedRecordError) string {
	if m.WrittenFor == "" {
		return "another pchannel's name"
	}
	return typed(m.WrittenFor)
}

// recordOf is whose a misplaced record is, as a warning names it.
func recordOf(m *persistence.MisplacedRecordError) string {
	if m.WrittenFor == "" {
		return "another pchannel's record"
	}
	return "the record of " + typed(m.WrittenFor)
}

// storedUnder is the checkpoint stored under the name a misplaced record
// was written for, when it is at or above the one the record holds, and
// of its partition: the record is then a copy of what its pchannel has,
// and deleting it loses nothing.
func storedUnder(byName map[string]persistence.Entry, m *persistence.MisplacedRecordError) (wal.MessageID, bool) {
	own, ok := byName[m.WrittenFor]
	if m.WrittenFor == "" || m.Checkpoint == nil || !ok || own.Err != nil || own.Checkpoint == nil {
		return nil, false
	}
	c, ok := order(own.Checkpoint, m.Checkpoint)
	return own.Checkpoint, ok && c >= 0
}

// order compares a with b as positions of one log: ok is false for two
// that none relates, of two WALs or two Pulsar partitions (Pulsar's own
// order leaves the partition out).
func order(a, b wal.MessageID) (c int, ok bool) {
	c, err := wal.Compare(a, b)
	_, _, moved := partitionMoved(a, b)
	return c, err == nil && !moved
}

// holding is what a misplaced record holds, as the tool shows it.
func holding(m *persistence.MisplacedRecordError) string {
	if m.Checkpoint == nil {
		return "a checkpoint of WAL " + shown(string(m.WAL)) + " that this build cannot read"
	}
	return shownID(m.Checkpoint)
}

// count is n of noun, in the plural unless n is 1.
func count[N int | int64 | uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// walNames lists the WALs this build knows, for an error message.
func walNames() string {
	var names []string
	for _, n := range wal.Names() {
		names = append(names, string(n))
	}
	return strings.Join(names, ", ")
}

// termOf is the term of en, 0 when nothing is stored.
func termOf(en *persistence.Entry) uint64 {
	if en == nil {
		return 0
	}
	return en.Term
}
