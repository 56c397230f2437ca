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

// checkAdvance decides, inside a store's write, whether checkpoint may
// replace stored. It is the one place the stores refuse to go backward.
//
// A checkpoint of another WAL than the stored one is an invalid argument, not
// a race: IDs of two WALs have no order, so "lower" cannot be decided, and
// accepting it would silently switch the pchannel to another log and lose the
// stored position. Such a switch is a configuration mistake for an operator
// to resolve, never something a writer should win.
func checkAdvance(pchannel string, stored, checkpoint wal.MessageID) error {
	if stored.WALName() != checkpoint.WALName() {
		return fmt.Errorf("%w: pchannel %q stores a %s checkpoint, got %s: %w",
			ErrInvalidArgument, pchannel, stored.WALName(), checkpoint, wal.ErrWALMismatch)
	}
	if checkpoint.LT(stored) {
		return &StoredAheadError{PChannel: pchannel, Stored: stored, Attempted: checkpoint}
	}
	return nil
}

// checkLoadArgs keeps Load's argument check the same in every store here.
func checkLoadArgs(pchannel string) error {
	if pchannel == "" {
		return fmt.Errorf("%w: empty pchannel name", ErrInvalidArgument)
	}
	return nil
}
