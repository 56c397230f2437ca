package persistence

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lowwater/lowwater/persistence/internal/record"
	"github.com/lowwater/lowwater/wal"
)

// Entry is one stored record as an operator sees it: what it holds, or why
// it cannot be read.
type Entry struct {
	PChannel string
	// WAL is the WAL name the record carries. It is set whenever the
	// record's header could be read, also when its ID could not be decoded
	// (a WAL this process has not registered, say), and empty when not.
	WAL wal.Name
	// Checkpoint is the stored checkpoint; nil when Err is set.
	Checkpoint wal.MessageID
	// Term is the owner term of the record's last writer (etcd ownership),
	// zero without fencing.
	Term uint64
	// Version is the record layout's version, 0 when unreadable.
	Version int
	// Err, when set, is a *CorruptRecordError saying why the record cannot
	// be decoded (errors.Is ErrCorruptRecord; its Err is the cause alone).
	// Load of this pchannel fails.
	Err error
}

// Inspector is a Catalog that can list its records one by one, corrupt ones
// included, for tools that show, verify, dump and repair a store. Memory,
// Bolt and the etcd catalog implement it.
type Inspector interface {
	Catalog
	// Inspect returns every stored record, sorted by pchannel, in one
	// consistent read. A record that cannot be decoded is an Entry with Err
	// set, not a failure of the call.
	Inspect(ctx context.Context) ([]Entry, error)
}

// InspectRecord reads raw, a record as EncodeRecord lays it out, stored
// under pchannel, as Inspect reports it: for an Inspector of a store of
// such records.
func InspectRecord(pchannel string, raw []byte) Entry {
	h, _, id, err := record.Decode(pchannel, raw)
	if errors.Is(err, record.ErrAnotherPChannel) {
		// Whole but for the name: what it holds is told, not given as
		// this pchannel's checkpoint.
		if held, ok, heldID, idErr := record.DecodeMisplaced(raw); ok {
			m := &MisplacedRecordError{WAL: held.WAL, Checkpoint: heldID, Term: held.Term, Err: idErr}
			if m.check, m.checked = record.NameCheck(raw); m.checked {
				m.WrittenFor = writtenFor(pchannel, m.check)
			}
			h, err = held, m
		}
	}
	e := Entry{PChannel: pchannel, WAL: h.WAL, Checkpoint: id, Term: h.Term, Version: h.Version}
	if err != nil {
		e.Err = &CorruptRecordError{PChannel: pchannel, Err: err}
	}
	return e
}

// MisplacedRecordError is why a whole record stored under another name
// than the one it was written for cannot be read: its key was damaged, or
// it was copied under that name (Entry.Err's cause). The name it was
// written for is kept only as a check, which tells whose it is among the
// names tried against it, not among all: WrittenFor is the one tried
// that it names, and what it holds is told, so that an operator may write
// it under its own name (lowwater verify).
type MisplacedRecordError struct {
	WAL wal.Name
	// Checkpoint is what it holds; nil when its ID cannot be decoded
	// here, and Err says why (a WAL this process has not registered).
	Checkpoint wal.MessageID
	Err        error
	// Term is the owner term it was written under.
	Term uint64
	// WrittenFor is the name it was written for, when the damage of one
	// byte to it (a bit flipped or a byte overwritten, or one byte more)
	// makes the name it is stored under, and one name only does; empty
	// otherwise (a copy under another name, say). A check of 32 bits
	// mistakes another name for it about once in a million for names of
	// tens of bytes.
	WrittenFor string

	check   uint32 // the record's name check (record.NameCheck)
	checked bool   // check was read
}

// Names reports whether the record was written for pchannel, as far as
// its name check of 32 bits tells: a bbolt Load of pchannel, which finds
// nothing stored, fails over the record; a Load of any other does not.
func (e *MisplacedRecordError) Names(pchannel string) bool {
	return e.checked && record.Names(e.check, []byte(pchannel))
}

func (e *MisplacedRecordError) Error() string {
	var msg string
	if e.Checkpoint == nil {
		msg = fmt.Sprintf("%s; it holds a checkpoint of WAL %q that cannot be read here: %v", record.ErrAnotherPChannel, e.WAL, e.Err)
	} else {
		msg = fmt.Sprintf("%s; it holds %s", record.ErrAnotherPChannel, wal.String(e.Checkpoint))
	}
	if e.WrittenFor != "" {
		msg += fmt.Sprintf(", written for %q", e.WrittenFor)
	}
	return msg
}

// Unwrap is why what it holds cannot be read, if it cannot.
func (e *MisplacedRecordError) Unwrap() error { return e.Err }

// writtenFor is the one name a node takes that its damage of one byte
// turns into key, and whose record's name check is check: the name of a
// record stored under key, its key damaged so. Empty when no such name
// has that check, or more than one: of the few thousand names so near,
// one has it by chance about once in a million (names of tens of bytes),
// which a search of all names could not tell from the one. It checks
// 256 names per byte of key: 0.07 ms for a key of 16 bytes, 4 ms for one
// of 512, for each whole misplaced record an Inspect meets.
func writtenFor(key string, check uint32) string {
	if len(key) > MaxNameLen+1 {
		return ""
	}
	found := map[string]struct{}{}
	try := func(name []byte) {
		if record.Names(check, name) && ValidatePChannel(string(name)) == nil {
			found[string(name)] = struct{}{}
		}
	}
	name := []byte(key)
	for i, was := range name {
		for c := range 256 {
			if name[i] = byte(c); name[i] != was {
				try(name)
			}
		}
		name[i] = was
	}
	for i := 0; i < len(key); i++ { // bytes, not runes: key need not be UTF-8
		try(slices.Concat([]byte(key[:i]), []byte(key[i+1:])))
	}
	if len(found) != 1 {
		return ""
	}
	for name := range found {
		return name
	}
	return ""
}

func sortEntries(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.PChannel, b.PChannel) })
}

// checkDeleteArgs keeps Delete's argument check the same in every store.
func checkDeleteArgs(pchannel string) error { return checkLoadArgs(pchannel) }
