package persistence

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/lowwater/lowwater/wal"
)

// Catalog is the durable store of pchannel consume checkpoints.
//
// Implementations are safe for concurrent use and honour the context of
// every call: a deadline bounds the call, so a hung store costs the caller
// one attempt, not its goroutine. A write already handed to the store may
// run to its end past the deadline where the store cannot abandon it (Bolt
// says when). The actors report a call still running shortly after its
// deadline and wait for it, since a pchannel never has two calls in a
// catalog at once: its saves stop until the call returns. A stop waits
// for it no longer than that, and abandons it. Save refuses a pchannel
// name no catalog may store (ValidatePChannel: empty, over 512 bytes, not
// UTF-8, a NUL byte), and a checkpoint that does not read back as
// marshalled (wal.Marshal), with ErrInvalidArgument and writes nothing;
// Load and Delete refuse an empty one alike, and take any other, so that
// a record stored under a name no node can use (by another writer, or an
// older build) can still be read and removed. catalogtest.Run checks the
// empty name.
type Catalog interface {
	// Load returns the stored checkpoint of pchannel, or (nil, nil) when
	// nothing is stored. A record that cannot be decoded gives an error
	// wrapping ErrCorruptRecord; it is never silently treated as absent.
	Load(ctx context.Context, pchannel string) (wal.MessageID, error)

	// Save stores checkpoint for pchannel. When it returns nil the value is
	// durable. Saving the value already stored succeeds, so that a retry of a
	// save whose first attempt committed does not fail. A value below the
	// stored one is refused with a *StoredAheadError (errors.Is
	// ErrStoredAhead) and nothing is written: the store never goes backward.
	// A sentinel (a negative Kafka offset, wal.CheckPosition), which no
	// node recovers from, is refused with ErrInvalidArgument wrapping
	// wal.ErrSentinel, and nothing is written.
	// A value that cannot be ordered against the stored one is refused with
	// ErrInvalidArgument, and nothing is written: one of another WAL (wrapping
	// wal.ErrWALMismatch), or one whose comparison panics (an ID type
	// registered outside package wal; wrapping wal.ErrCorruptID, see
	// wal.Compare). Such a panic fails that save only, never the catalog.
	Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error

	// LoadAll returns every stored checkpoint in one read, keyed by pchannel,
	// so that a node recovering many pchannels pays one round trip. A corrupt
	// record fails the whole call with ErrCorruptRecord naming the pchannel.
	LoadAll(ctx context.Context) (map[string]wal.MessageID, error)

	// Delete retires pchannel: its record is removed, so that Load returns
	// (nil, nil) and LoadAll leaves it out. Deleting a pchannel that has no
	// record returns nil. A record that cannot be decoded is deleted like
	// any other: deleting is how an operator clears one. A fenced catalog
	// (etcd ownership) deletes only while its writer owns the pchannel, as
	// it saves. The never-lower promise holds for the life of a record: a
	// Save after Delete may store any value.
	Delete(ctx context.Context, pchannel string) error

	// Close releases the store. Calls after Close fail with ErrClosed.
	Close() error
}

// SaveStarter is a Catalog that can take a save without a goroutine
// waiting on it: thousands of pchannels saving at once then hold no
// goroutine each while their saves wait to be committed together. The
// actors start their saves through it where a catalog has it (a *Bolt
// does, under group commit, its default), and call Save otherwise. A
// wrapper around such a catalog (for logging, tracing, faults) that does
// not have StartSave itself hides it: the actors then hold a goroutine
// per save in flight. A wrapper forwards it by implementing it, falling
// back on errors.ErrUnsupported when the catalog it wraps has none. One
// that embeds the catalog (struct{ *persistence.Bolt }, or a wrapper of
// it, or an interface holding either) and changes its Save alone keeps
// the StartSave it embeds, which never calls that Save: the actors, and
// catalogtest.Run, see that and save through its Save, a goroutine per
// save in flight, and the actors say so at Warn (once for each type of
// catalog and logger, at Debug after). Give such a wrapper a
// StartSave too. What a wrapper forwards to a catalog it holds in a
// named field, no one sees: forward StartSave to a catalog whose
// StartSave calls no Save of a wrapper around it.
type SaveStarter interface {
	Catalog

	// StartSave starts saving checkpoint for pchannel, with Save's
	// contract, and returns without waiting for it. If it returns an
	// error, the save did not start and done is never called; an error
	// matching errors.ErrUnsupported means this save needs Save, which
	// the caller then calls. Otherwise done is called exactly once, never
	// from within StartSave, with what Save would have returned, once the
	// value is durable or the save has failed. done must not block: it
	// runs on a goroutine of the catalog's (a Bolt's committer), and the
	// done of other saves wait behind it. done(nil) is taken, as Save's nil is,
	// for the value being durable. A catalog that breaks this contract
	// (tells a save twice, or tells it and also returns an error) is
	// believed the first time.
	StartSave(ctx context.Context, pchannel string, checkpoint wal.MessageID, done func(error)) error
}

var (
	// ErrStoredAhead is returned by Save when the stored checkpoint is above
	// the one offered: another writer got ahead. Retrying cannot succeed.
	ErrStoredAhead = errors.New("persistence: stored checkpoint is ahead")
	// ErrCorruptRecord is returned when a stored record cannot be decoded:
	// bad checksum, a whole record of another pchannel's (stored under
	// another name than the one it was written for), unknown version,
	// unknown WAL, or undecodable ID bytes.
	ErrCorruptRecord = errors.New("persistence: corrupt checkpoint record")
	// ErrFenced is returned when the writer no longer owns the pchannel: a
	// newer owner term is stored, or the writer's ownership ended.
	ErrFenced = errors.New("persistence: writer does not own the pchannel")
	// ErrClosed is returned by calls on a closed catalog.
	ErrClosed = errors.New("persistence: catalog closed")
	// ErrInvalidArgument is returned for a pchannel name that cannot be
	// stored (see Catalog), a nil or unknown-WAL checkpoint, or a
	// checkpoint that cannot be ordered against the stored one (of another
	// WAL, or whose comparison panics); nothing is written.
	ErrInvalidArgument = errors.New("persistence: invalid argument")
	// ErrCorruptStore is returned when the store itself is damaged, not one
	// record: a bbolt file that is empty, truncated, or has damaged pages.
	// The catalog refuses every further call rather than start from nothing
	// or write over the damage, since either could lower a checkpoint. An
	// operator restores the file from a backup (or, knowingly accepting a
	// replay from the start of every WAL, moves it aside); lowwater never
	// repairs it on its own.
	ErrCorruptStore = errors.New("persistence: checkpoint store is damaged")
)

// StoredAheadError carries the value that won, so that the writer can adopt
// it instead of retrying. PChannel must be the name the Save was given:
// the actors adopt Stored only then, and take a report about another
// pchannel's record for a failure like any, tried again.
type StoredAheadError struct {
	PChannel  string
	Stored    wal.MessageID
	Attempted wal.MessageID
}

func (e *StoredAheadError) Error() string {
	return fmt.Sprintf("persistence: pchannel %q: stored checkpoint %s is ahead of %s",
		e.PChannel, wal.String(e.Stored), wal.String(e.Attempted))
}

// Is makes errors.Is(err, ErrStoredAhead) hold.
func (e *StoredAheadError) Is(target error) bool { return target == ErrStoredAhead }

// CorruptRecordError names the pchannel whose record could not be decoded.
type CorruptRecordError struct {
	PChannel string
	Err      error
}

func (e *CorruptRecordError) Error() string {
	// DecodeRecord's errors begin with what this one says: said once.
	cause := strings.TrimPrefix(fmt.Sprint(e.Err), ErrCorruptRecord.Error()+": ")
	return fmt.Sprintf("persistence: pchannel %q: corrupt checkpoint record: %s", e.PChannel, cause)
}

// Is makes errors.Is(err, ErrCorruptRecord) hold.
func (e *CorruptRecordError) Is(target error) bool { return target == ErrCorruptRecord }

// Unwrap exposes the decoding error.
func (e *CorruptRecordError) Unwrap() error { return e.Err }

// errNilContext refuses a call given a nil context, a caller's bug that
// would otherwise panic inside the catalog.
var errNilContext = fmt.Errorf("%w: nil context", ErrInvalidArgument)

// CheckSaveArgs validates Save's arguments the same way in every catalog:
// the pchannel name (ValidatePChannel), and the checkpoint: not nil, of a
// registered type, not a sentinel (wal.CheckPosition: a negative Kafka
// offset, which no node recovers from), and, for a WAL registered outside
// package wal, reading back as marshalled and ordered without a panic
// (wal.Marshal). It is for implementations of Catalog outside this module
// too: the conformance suite (package catalogtest) expects exactly these
// errors.
func CheckSaveArgs(pchannel string, checkpoint wal.MessageID) error {
	if err := CheckReplaceArgs(pchannel, checkpoint); err != nil {
		return err
	}
	if err := wal.CheckPosition(checkpoint); err != nil {
		return fmt.Errorf("%w: pchannel %q: %w", ErrInvalidArgument, pchannel, err)
	}
	return nil
}

// CheckReplaceArgs is CheckSaveArgs for an operator's repair, which
// writes whatever is stored (Bolt.Replace; lowwater set --force): it takes
// a sentinel, which the operator may store on purpose, warned that no node
// recovers from it.
func CheckReplaceArgs(pchannel string, checkpoint wal.MessageID) error {
	if err := ValidatePChannel(pchannel); err != nil {
		return err
	}
	if checkpoint == nil {
		return fmt.Errorf("%w: nil checkpoint for %q", ErrInvalidArgument, pchannel)
	}
	if _, err := walOf(checkpoint); err != nil {
		return err
	}
	if !wal.BuiltIn(checkpoint) {
		if _, err := wal.Marshal(checkpoint); err != nil {
			return fmt.Errorf("%w: pchannel %q: %w", ErrInvalidArgument, pchannel, err)
		}
	}
	return nil
}

// walOf names the WAL of a non-nil id from its type alone (wal.NameOf): a
// foreign implementation's methods may panic (a typed nil *wal.KafkaID,
// say), and bad input must give ErrInvalidArgument, never a panic.
func walOf(id wal.MessageID) (wal.Name, error) {
	name, err := wal.NameOf(id)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return name, nil
}
