package persistence

import (
	"context"
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

// inspectRecord reads raw as stored for pchannel.
func inspectRecord(pchannel string, raw []byte) Entry {
	h, _, id, err := record.Decode(pchannel, raw)
	e := Entry{PChannel: pchannel, WAL: h.WAL, Checkpoint: id, Term: h.Term, Version: h.Version}
	if err != nil {
		e.Err = &CorruptRecordError{PChannel: pchannel, Err: err}
	}
	return e
}

func sortEntries(entries []Entry) {
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.PChannel, b.PChannel) })
}

// checkDeleteArgs keeps Delete's argument check the same in every store.
func checkDeleteArgs(pchannel string) error { return checkLoadArgs(pchannel) }
