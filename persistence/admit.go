package persistence

import (
	"fmt"

	"github.com/lowwater/lowwater/wal"
)

// decodeStored reads the record a store holds for pchannel, naming the
// pchannel when the record cannot be read.
func decodeStored(pchannel string, raw []byte) (wal.MessageID, error) {
	r, err := DecodeRecord(raw)
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
//     a writer should win.
func admit(pchannel string, old []byte, found bool, checkpoint wal.MessageID) (write bool, err error) {
	if !found {
		return true, nil
	}
	stored, err := decodeStored(pchannel, old)
	if err != nil {
		return false, err
	}
	if stored.WALName() != checkpoint.WALName() {
		return false, fmt.Errorf("%w: pchannel %q stores a %s checkpoint, got %s: %w",
			ErrInvalidArgument, pchannel, stored.WALName(), checkpoint, wal.ErrWALMismatch)
	}
	if checkpoint.LT(stored) {
		return false, &StoredAheadError{PChannel: pchannel, Stored: stored, Attempted: checkpoint}
	}
	return !stored.EQ(checkpoint), nil
}

// checkLoadArgs keeps Load's argument check the same in every store here.
func checkLoadArgs(pchannel string) error {
	if pchannel == "" {
		return fmt.Errorf("%w: empty pchannel name", ErrInvalidArgument)
	}
	return nil
}
