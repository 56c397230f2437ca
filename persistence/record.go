package persistence

import (
	"fmt"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence/internal/record"
	"github.com/lowwater/lowwater/wal"
)

// Record is what a catalog stores for one pchannel. It describes itself, so
// that a record read back by another version, or by a process configured for
// another WAL, is recognised rather than misread.
type Record struct {
	// Checkpoint is the stored consume checkpoint.
	Checkpoint wal.MessageID
	// Term is the owner term of the writer when fencing is on, else zero.
	Term uint64
}

// EncodeRecord returns the versioned, checksummed bytes of r, pchannel's
// record: the checksum covers the name the record is stored under, so
// that a record read under another is refused, never taken for its
// checkpoint.
func EncodeRecord(pchannel string, r Record) ([]byte, error) {
	if r.Checkpoint == nil {
		return nil, fmt.Errorf("%w: nil checkpoint for %s", ErrInvalidArgument, shorten.Quoted(pchannel))
	}
	name, err := walOf(r.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("pchannel %s: %w", shorten.Quoted(pchannel), err)
	}
	raw, err := wal.Marshal(r.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: pchannel %s: %w", ErrInvalidArgument, shorten.Quoted(pchannel), err)
	}
	if len(raw) > record.MaxIDLen {
		return nil, fmt.Errorf("%w: pchannel %s: %s ID is %d bytes, more than a record holds (%d)",
			ErrInvalidArgument, shorten.Quoted(pchannel), name, len(raw), record.MaxIDLen)
	}
	return record.Encode(pchannel, name, raw, r.Term), nil
}

// DecodeRecord parses bytes written by EncodeRecord for pchannel (or by a
// version before it, whose checksum covers no name). Every failure wraps
// ErrCorruptRecord, a record encoded for another pchannel's name too; it
// never panics, whatever the input.
func DecodeRecord(pchannel string, b []byte) (Record, error) {
	h, _, id, err := record.Decode(pchannel, b)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrCorruptRecord, err)
	}
	return Record{Checkpoint: id, Term: h.Term}, nil
}
