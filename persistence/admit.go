package persistence

import (
	"fmt"

	"github.com/lowwater/lowwater/wal"
)

// decodeStored reads the record a store holds for pchannel, naming the
// pchannel when the record cannot be read.
func decodeStored(pchannel string, raw []byte) (wal.MessageID, error) {
	r, err := DecodeRecord(pchannel, raw)
	if err != nil {
		return nil, &CorruptRecordError{PChannel: pchannel, Err: err}
	}
	return r.Checkpoint, nil
}

// admit decides, inside a store's write transaction, whether checkpoint
// replaces old, the record stored for pchannel (found false: none). It is
// the one place the stores refuse to go backward. write is false when old already
// holds checkpoint: a retry of a save that committed succeeds and rewrites
// nothing. An error refuses it:
//   - a record that cannot be decoded is reported and kept, since
//     overwriting it could lower the checkpoint;
//   - a checkpoint below the stored one is a *StoredAheadError;
//   - a checkpoint of another WAL than the stored one is an invalid
//     argument, not a race: IDs of two WALs have no order, so "lower"
//     cannot be decided, and accepting it would silently switch the
//     pchannel to another log and lose the stored position. Such a switch
//     is a configuration mistake for an operator to resolve, never something
//     a writer should win;
//   - a checkpoint whose comparison with the stored one panics (an ID type
//     registered outside package wal, with a bug in LT or EQ) is an invalid
//     argument too, wrapping wal.ErrCorruptID: as for two WALs, "lower"
//     cannot be decided. The panic is this save's alone, recovered by
//     wal.Compare, so that it is never taken for damage to the store (Bolt
//     would mark its file damaged for every later call) nor reaches the
//     caller as a panic.
func admit(pchannel string, old []byte, found bool, checkpoint wal.MessageID) (write bool, err error) {
	if !found {
		return true, nil
	}
	stored, err := decodeStored(pchannel, old)
	if err != nil {
		return false, err
	}
	// The WALs by the IDs' types, not their WALName: a registered type's
	// methods may panic, and here that would be taken for a damaged store.
	storedWAL, _ := wal.NameOf(stored)
	if newWAL, _ := wal.NameOf(checkpoint); storedWAL != newWAL {
		return false, fmt.Errorf("%w: pchannel %q stores a %s checkpoint, got %s: %w",
			ErrInvalidArgument, pchannel, storedWAL, wal.String(checkpoint), wal.ErrWALMismatch)
	}
	order, err := wal.Compare(checkpoint, stored)
	if err != nil {
		return false, fmt.Errorf("%w: pchannel %q: %s cannot be ordered against the stored checkpoint %s: %w",
			ErrInvalidArgument, pchannel, wal.String(checkpoint), wal.String(stored), err)
	}
	if order < 0 {
		return false, &StoredAheadError{PChannel: pchannel, Stored: stored, Attempted: checkpoint}
	}
	return order > 0, nil
}

// checkLoadArgs keeps Load's argument check the same in every store here.
func checkLoadArgs(pchannel string) error {
	if pchannel == "" {
		return fmt.Errorf("%w: empty pchannel name", ErrInvalidArgument)
	}
	return nil
}
