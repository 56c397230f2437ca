package messages

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lowwater/lowwater/wal"

	"github.com/lowwater/lowwater/internal/shorten"
)

// Errors a command can be rejected with. A rejected command changes nothing.
var (
	// ErrVChannelExists rejects an Add of a vchannel that is already tracked.
	ErrVChannelExists = errors.New("lowwater: vchannel already exists")
	// ErrVChannelNotFound rejects an Update or Drop of an untracked vchannel.
	ErrVChannelNotFound = errors.New("lowwater: vchannel not found")
	// ErrCheckpointRollback rejects an Update below the vchannel's checkpoint.
	ErrCheckpointRollback = errors.New("lowwater: checkpoint rollback")
	// ErrNilCheckpoint rejects a command that carries no checkpoint.
	ErrNilCheckpoint = errors.New("lowwater: nil checkpoint")
	// ErrEmptyVChannel rejects a command that names no vchannel.
	ErrEmptyVChannel = errors.New("lowwater: empty vchannel name")
	// ErrNilCommand rejects a nil command pointer, such as
	// (*UpdateCheckpoint)(nil).
	ErrNilCommand = errors.New("lowwater: nil command")
	// ErrUnknownMessage answers a request of a type the pchannel does not
	// take, so that the requester gets an error instead of a timeout.
	ErrUnknownMessage = errors.New("lowwater: unknown message")
	// ErrWALMismatch rejects a checkpoint of another WAL than the pchannel's.
	// It is the same value as wal.ErrWALMismatch.
	ErrWALMismatch = wal.ErrWALMismatch
	// ErrSentinel rejects a checkpoint that is a WAL's sentinel rather
	// than a position: a negative Kafka offset. It is the same value as
	// wal.ErrSentinel.
	ErrSentinel = wal.ErrSentinel
)

// Reasons a Stopped event gives for a minimum it left unsaved.
var (
	// ErrHardStop: the stop was a Stop, which does not flush.
	ErrHardStop = errors.New("lowwater: hard stop does not flush")
	// ErrFlushTimeout: a graceful stop's flush did not save the minimum
	// within the stop flush timeout, or the persister was gone, stopped
	// by name (the Reason wraps actor.ErrDeadLetter; the stop did not
	// wait). The Reason says what kept it: the persister's last crash,
	// when it crashed on every try; else the catalog had not answered
	// the save in flight (wrapping actors.ErrCatalogOverdue if that save
	// had overrun its deadline), or the last save failed (wrapping its
	// error, which errors.Is and errors.As reach).
	ErrFlushTimeout = errors.New("lowwater: minimum not saved within the stop flush timeout")
	// ErrNotRecovered: a graceful stop came during recovery, and the stored
	// checkpoint could not be read within the stop flush timeout (or not at
	// all: the catalog was closed, and the stop did not wait), so nothing
	// could be saved safely. The read's last error is wrapped beside it:
	// for a read still running, the catalog's overrun of its deadline
	// (actors.ErrCatalogOverdue), if it was reported.
	ErrNotRecovered = errors.New("lowwater: stopped before the stored checkpoint was read")
)

// Rejection is one entry of an UpdateBatch that was not applied.
type Rejection struct {
	// Index is the entry's position in UpdateBatch.Updates.
	Index    int
	VChannel string
	Err      error
}

// BatchError is the reply to an UpdateBatch of which some entries were
// rejected; the others were applied, in order. errors.Is matches any of the
// entries' errors.
type BatchError struct {
	Rejected []Rejection
}

func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "lowwater: %d update(s) rejected:", len(e.Rejected))
	for i, r := range e.Rejected {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Rejected)-i)
			break
		}
		if i > 0 {
			b.WriteByte(';')
		}
		// Quoted, as every other message has it: a caller's vchannel
		// name may hold anything, a newline or an escape too, and be of
		// any length.
		// An error of several lines (errors.Join, a panic's value) is
		// joined with "; ", as several errors are: the text is one line
		// of a log.
		fmt.Fprintf(&b, " [%d] %s: %s", r.Index, shorten.QuotedText(r.VChannel), lineBreaks.Replace(fmt.Sprint(r.Err)))
	}
	return b.String()
}

// lineBreaks joins the lines of an error's text with "; ": every break a
// terminal or a log viewer takes for one.
var lineBreaks = strings.NewReplacer("\r\n", "; ", "\n", "; ", "\r", "; ", "\v", "; ", "\f", "; ", "\u0085", "; ", "\u2028", "; ", "\u2029", "; ")

// Unwrap returns each rejected entry's error, for errors.Is and errors.As.
func (e *BatchError) Unwrap() []error {
	errs := make([]error, len(e.Rejected))
	for i, r := range e.Rejected {
		errs[i] = r.Err
	}
	return errs
}
