package messages

import (
	"time"

	"github.com/lowwater/lowwater/wal"
)

// Event is implemented by everything a pchannel publishes on the actor
// system's EventStream. Subscribers run on the publishing actor's goroutine:
// they must be quick and must not block. Above all, a subscriber must not
// wait on the pchannel that published the event (actors.GetState,
// actors.Request, a Sender's Flush, PoisonFuture(...).Wait()): that
// pchannel answers only once the subscriber returns, so the wait runs to
// its deadline. Ask from another goroutine, or subscribe through package
// events, whose buffer takes the events off the actor's goroutine.
type Event interface {
	EventHeader() Header
}

// Header names the pchannel an event is about and when it happened.
type Header struct {
	PChannel string
	At       time.Time
}

// EventHeader returns h; it makes every event an Event.
func (h Header) EventHeader() Header { return h }

// Recovered is published once the stored checkpoint was read: commands
// were applied all along, and saving starts now.
type Recovered struct {
	Header
	// StartMessageID is where consumption restarts (nil: the beginning).
	StartMessageID wal.MessageID
	// FromCatalog is true when StartMessageID is the stored checkpoint,
	// false when it is the minimum of the vchannels given at spawn (or of
	// one added below it during recovery).
	FromCatalog bool
	// Minimum is the low-water mark as recovery ends (nil with no
	// vchannel). Commands applied during recovery may have raised it past
	// StartMessageID, their events published before this one: a save of it
	// is due when it is above the stored checkpoint, or nothing is stored.
	Minimum wal.MessageID
	// Attempts is the number of catalog reads it took; 1 when the stored
	// checkpoint was given at spawn (actors.WithPreloaded), which reads
	// none.
	Attempts int
}

// RecoveryFailed is published when reading the stored checkpoint failed;
// the read is retried after NextRetry. A corrupt or foreign record fails
// this way until repaired. A closed catalog (persistence.ErrClosed) is
// not read again (NextRetry 0): the pchannel never recovers.
type RecoveryFailed struct {
	Header
	Err error
	// Attempt counts the reads of this recovery, the failed one included:
	// 1 for the first.
	Attempt   int
	NextRetry time.Duration
	// Late marks the outcome of an attempt reported overdue before
	// (actors.ErrCatalogOverdue, the same Attempt): the read returned at
	// last. Counting failed attempts, count the report or this, not both.
	Late bool
}

// VChannelAdded is published when an AddVChannel was applied.
type VChannelAdded struct {
	Header
	VChannel   string
	Checkpoint wal.MessageID
}

// AddedBehind is published when vchannels were added below the persisted
// checkpoint, where consumption restarts: a restart before they pass it
// skips their records in between. The actor cannot prevent it (that
// checkpoint is durable, and it never lowers one); it tells it, with a
// Warn log line, as soon as it knows:
//   - as the Add is applied, when the persisted checkpoint is above it;
//   - when a save computed before such Adds lands above them, before or
//     after the persister learned of them, or before the pchannel's
//     Stopped: every vchannel then below it is named, each added since
//     the save began;
//   - as recovery ends, for those added while the stored checkpoint was
//     still being read (the vchannels given at spawn are not told: their
//     checkpoints may be older than the stored one, which covers them).
//
// A vchannel is told once against a persisted checkpoint, and again only
// against a higher one; one dropped and added again is a new one.
type AddedBehind struct {
	Header
	// VChannels are the vchannels added below Persisted, sorted.
	VChannels []string
	// Persisted is the checkpoint a restart starts from.
	Persisted wal.MessageID
	// Minimum is the low-water mark then, below Persisted.
	Minimum wal.MessageID
}

// VChannelDropped is published when a DropVChannel was applied.
type VChannelDropped struct {
	Header
	VChannel string
}

// CommandRejected is published when a command was refused; it changed
// nothing. For an UpdateBatch there is one event per rejected entry, with
// Command the batch.
type CommandRejected struct {
	Header
	Command Command
	Err     error
}

// MinimumAdvanced is published when the low-water mark strictly rose. The
// PChannel actor hands the same value to its persister, which saves To if
// it is above what is persisted. Updates sent with no reply asked that
// queue in the mailbox are applied as a run and publish one event for it:
// From is the minimum before the run, At the time of its first rise.
type MinimumAdvanced struct {
	Header
	// From is nil when the pchannel had no vchannel. To is then the first
	// minimum, which may lie below what is persisted: a vchannel added
	// behind it after the last one was dropped (AddedBehind tells it).
	From wal.MessageID
	To   wal.MessageID
	// Holder is the vchannel at To: the one holding the minimum now (one
	// of them, with ties). See State.Holder.
	Holder string
}

// MinimumStalled is published when the minimum has not risen for the
// stall-after duration (actors.WithStallAfter) while the pchannel runs
// with at least one vchannel: Holder is holding it back. It is published
// once per stall; MinimumResumed ends it. A stall is only detected while
// the pchannel is running (not while it recovers, is fenced or stops), and
// a pchannel with no vchannel never stalls: nothing holds it back.
type MinimumStalled struct {
	Header
	// Holder is the vchannel at the minimum (one of them, with ties), and
	// Checkpoint its checkpoint: the minimum.
	Holder     string
	Checkpoint wal.MessageID
	// Since is State.HeldSince: when the minimum last rose, or the
	// pchannel began running. For is At minus Since, at least the
	// stall-after duration.
	Since time.Time
	For   time.Duration
}

// MinimumResumed ends a stall: the minimum rose again, or the last
// vchannel was dropped (then nothing holds it back). A stall in force when
// the pchannel stops ends with Stopped instead, without this event.
type MinimumResumed struct {
	Header
	// Holder is the vchannel the MinimumStalled named.
	Holder string
	// StalledFor is how long the minimum had not risen: At minus the
	// stall's Since.
	StalledFor time.Duration
}

// CheckpointPersisted is published once the catalog acknowledged Value:
// it is durable. At is when the catalog's call returned.
type CheckpointPersisted struct {
	Header
	Value wal.MessageID
	// Attempts is the number of saves it took since the previous success.
	Attempts int
	// Latency is the duration of the successful catalog call.
	Latency time.Duration
	// Late marks a save reported overdue before (actors.ErrCatalogOverdue,
	// a PersistFailed of the same attempt) that the catalog acknowledged
	// at last: that report said it might not be, and this settles it.
	Late bool
}

// PersistFailed is published when a save failed, and the latest minimum
// is saved again after NextRetry, except for four errors:
//   - fenced (persistence.ErrFenced): the actor stops;
//   - closed (persistence.ErrClosed, NextRetry 0): the catalog is closed
//     for good; nothing is saved again, the actor runs on in memory, and
//     its stop reports the minimum left unsaved at once;
//   - stored ahead (persistence.ErrStoredAhead, NextRetry 0): the stored
//     value becomes the floor (Adopted), and nothing is saved until the
//     minimum passes it. A report whose stored value does not reach Value
//     (lower, nil, of another WAL: stale, or the catalog's error) proves
//     nothing and is not adopted (Adopted nil): Value is saved again, at
//     once after a first attempt (NextRetry 0 all the same), after
//     NextRetry after a later one;
//   - actors.ErrCatalogOverdue (NextRetry 0): the call overran its
//     deadline ignoring its context, and is still waited for.
type PersistFailed struct {
	Header
	Value wal.MessageID
	// Attempt counts the attempts since the last successful save (or the
	// persister's start), the failed one included: 1 for the first, and 1
	// again after a success.
	Attempt   int
	Err       error
	NextRetry time.Duration
	// Late marks the outcome of an attempt reported overdue before
	// (actors.ErrCatalogOverdue, the same Attempt): the save returned at
	// last. Counting failed attempts, count the report or this, not both.
	Late bool
	// Adopted is set when Err is a persistence.StoredAheadError that the
	// persister took as its persisted checkpoint: another writer stored
	// this value, at or above Value and above what was persisted before,
	// under this pchannel's name and of its WAL. Nothing is persisted
	// from this attempt otherwise, whatever the error names.
	Adopted wal.MessageID
}

// PersisterRestarted is published when the persister crashed, and is to
// be restarted after a delay that grows with its crashes of the last
// minute; the first crash during a graceful stop's flush restarts it at
// once, and a stop whose flush times out first ends without the restart.
// It resumes from the parent's minimum and persisted checkpoint. Reason is
// the panic's value, or actors.ErrGoexit for a handler that ended its
// goroutine (a subscriber calling runtime.Goexit, as t.FailNow does, on
// an event the persister publishes); Restarts counts the crashes over
// the actor's life.
type PersisterRestarted struct {
	Header
	Reason   any
	Restarts int
}

// OwnershipLost is published when the actor no longer owns its pchannel
// (its ownership context ended, or a save was fenced). It saves nothing
// more and stops; whoever owns the pchannel next recovers from the stored
// checkpoint.
type OwnershipLost struct {
	Header
	Cause error
}

// Stopped is the last event of a pchannel actor. Graceful tells a Poison
// from a Stop: a Stop that comes during a Poison's wait (its flush, or the
// stored checkpoint's read) makes the stop a hard one (Graceful false,
// Reason ErrHardStop), while an ownership that ends during it ends the
// wait, not the Poison (Graceful true, Reason its cause). A pchannel that
// stops itself on a fence (OwnershipLost) stops as a Stop does.
type Stopped struct {
	Header
	Graceful bool
	// Recovered is false when the stop came before the stored checkpoint
	// was read, by this incarnation of the actor or one before a restart:
	// LastPersisted is then nil whatever the catalog holds (read the
	// catalog, not this). A minimum to save was left unsaved (Reason
	// ErrNotRecovered for a Poison, ErrHardStop for a Stop, the cause for
	// an ownership's end); with none, a Poison has nothing to wait for,
	// and ends at once, Flushed.
	Recovered bool
	// LastPersisted is the checkpoint the actor knew durable: the one it
	// recovered, or saved since, or found stored ahead of its own by
	// another writer and adopted (PersistFailed.Adopted), which may be
	// above anything it saved itself.
	LastPersisted wal.MessageID
	// Flushed is true when nothing was left unsaved; Dropped is the minimum
	// that was above LastPersisted and could not be saved in time, if any.
	// Before recovery (Recovered false) it is the minimum then, which the
	// stored checkpoint, unread, may be above.
	Flushed bool
	Dropped wal.MessageID
	// Reason says why something was left unsaved (nil when Flushed):
	// ErrHardStop, ErrFlushTimeout (wrapping what kept the flush: the
	// persister's last crash, actor.ErrDeadLetter when it was gone, the
	// last save's error, the save the catalog had not answered, or the
	// pchannel's own failure within its stop; see there),
	// ErrNotRecovered, the cause of an
	// ownership loss, persistence.ErrClosed (the catalog was closed while
	// the actor ran: saving stopped there), or, with no Dropped, the loss
	// of the vchannels' order (wal.ErrCorruptID: an ID type whose
	// comparisons panic).
	Reason error
	// Failure is the panic the actor stopped after, if it had panicked
	// and was not restarted since: its supervisor's answer was to stop
	// it, or a stop came while that answer was pending. It is an
	// *actors.PChannelPanicError (errors.Is actors.ErrPChannelPanicked),
	// naming the message being handled; the stop itself was a hard one.
	// One that panicked on its Started never ran: it has neither
	// LastPersisted nor Dropped.
	Failure error
}
