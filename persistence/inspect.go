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
			h, err = held, &MisplacedRecordError{WAL: held.WAL, Checkpoint: heldID, Term: held.Term, Err: idErr}
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
// written for is kept only as a check, so whose it is cannot be told;
// what it holds can, and an operator who knows may write it under its
// own name (lowwater verify).
type MisplacedRecordError struct {
	WAL wal.Name
	// Checkpoint is what it holds; nil when its ID cannot be decoded
	// here, and Err says why (a WAL this process has not registered).
	Checkpoint wal.MessageID
	Err        error
	// Term is the owner term it was written under.
	Term uint64
}

func (e *MisplacedRecordError) Error() string {
	if e.Checkpoint == nil {
		return fmt.Sprintf("%s; it holds a checkpoint of WAL %q that cannot be read here: %v", record.ErrAnotherPChannel, e.WAL, e.Err)
	}
	return fmt.Sprintf("%s; it holds %s", record.ErrAnotherPChannel, wal.String(e.Checkpoint))
}

// Unwrap is why what it holds cannot be read, if it cannot.
func (e *MisplacedRecordError) Unwrap() error { return e.Err }

func sortEntries(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.PChannel, b.PChannel) })
}

// checkDeleteArgs keeps Delete's argument check the same in every store.
func checkDeleteArgs(pchannel string) error { return checkLoadArgs(pchannel) }
