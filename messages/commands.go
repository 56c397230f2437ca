package messages

import (
	"log/slog"
	"time"

	"github.com/lowwater/lowwater/wal"
)

// Command is implemented by the messages that change a pchannel's state.
// Sent with RequestFuture, a command is answered with nil or an error;
// sent with Send, it is applied the same way and a rejection is only
// published (CommandRejected) and logged. An actor of the same system
// that asks with ctx.Request is answered *Applied where a future is
// answered nil.
type Command interface{ command() }

// Applied is the reply to a command applied in full when an actor of the
// pchannel's system asked for it (ctx.Request): a future is answered nil,
// which an actor's mailbox cannot carry (protoactor's default mailbox
// counts a nil message, finds nothing to hand on, and spins on it for
// good). Command is the command the reply is for, since protoactor's
// replies carry no request of their own; a rejection is the error, as
// for a future. It is a reply, never published as an event.
type Applied struct {
	Command Command
}

// AddVChannel starts tracking a vchannel at a checkpoint. It may lower the
// pchannel's minimum; the persisted checkpoint never follows it down.
type AddVChannel struct {
	VChannel   string
	Checkpoint wal.MessageID
}

// UpdateCheckpoint moves a vchannel's checkpoint forward. An equal
// checkpoint is accepted and changes nothing; a lower one is rejected.
type UpdateCheckpoint struct {
	VChannel   string
	Checkpoint wal.MessageID
}

// DropVChannel stops tracking a vchannel.
type DropVChannel struct {
	VChannel string
}

// UpdateBatch applies many updates in order in one message: one mailbox
// hop and one reply for all of them. Rejected entries do not stop the
// others; the reply is nil (or *Applied) or a *BatchError listing the
// rejected ones.
type UpdateBatch struct {
	Updates []VChannelCheckpoint
}

// VChannelCheckpoint is one entry of an UpdateBatch.
type VChannelCheckpoint struct {
	VChannel   string
	Checkpoint wal.MessageID
}

// LogValue gives log/slog the command with its checkpoint as the WAL
// writes it (kafka:42): a handler's JSON, zap's among them, wrote the ID
// bare (42), as it does for protoactor's line on a command sent to a
// stopped pchannel.
func (m *UpdateCheckpoint) LogValue() slog.Value {
	if m == nil {
		return slog.StringValue("<nil>")
	}
	return checkpointValue(m.VChannel, m.Checkpoint)
}

// LogValue: see UpdateCheckpoint.LogValue.
func (m *AddVChannel) LogValue() slog.Value {
	if m == nil {
		return slog.StringValue("<nil>")
	}
	return checkpointValue(m.VChannel, m.Checkpoint)
}

// LogValue gives the batch's size and its first entry, not every entry:
// a batch may hold thousands. See UpdateCheckpoint.LogValue.
func (m *UpdateBatch) LogValue() slog.Value {
	if m == nil {
		return slog.StringValue("<nil>")
	}
	attrs := []slog.Attr{slog.Int("updates", len(m.Updates))}
	if len(m.Updates) > 0 {
		attrs = append(attrs, slog.Attr{Key: "first", Value: checkpointValue(m.Updates[0].VChannel, m.Updates[0].Checkpoint)})
	}
	return slog.GroupValue(attrs...)
}

func checkpointValue(vchannel string, checkpoint wal.MessageID) slog.Value {
	return slog.GroupValue(slog.String("vchannel", vchannel), slog.String("checkpoint", wal.String(checkpoint)))
}

func (*AddVChannel) command()      {}
func (*UpdateCheckpoint) command() {}
func (*DropVChannel) command()     {}
func (*UpdateBatch) command()      {}

// GetState asks a pchannel for a snapshot of its state; the reply is a
// *State. It is answered during recovery too.
type GetState struct {
	// IncludeCheckpoints asks for a copy of every vchannel's checkpoint
	// (State.Checkpoints), which costs O(vchannels); leave it false for
	// monitoring. actors.GetState sets it with actors.IncludeCheckpoints.
	IncludeCheckpoints bool
}

// State is the reply to GetState.
type State struct {
	PChannel string
	WALName  wal.Name
	// StartMessageID is where consumption restarts: the stored checkpoint,
	// or the minimum of the vchannels given at spawn and of those added
	// below it during recovery. Nil until Recovered.
	StartMessageID wal.MessageID
	// Minimum is the low-water mark over live vchannels, nil when none.
	Minimum wal.MessageID
	// Holder is the vchannel whose checkpoint is Minimum: the one that
	// holds the pchannel back, "" when there is no vchannel. With ties at
	// the minimum it is one of them; each holds it back alike.
	Holder string
	// HeldSince is when the minimum last rose (MinimumAdvanced), or when
	// the pchannel began running (Recovered) if that came later; during
	// recovery, when the actor started if nothing rose since. Now minus
	// HeldSince is how long the low-water mark has not moved up: what
	// stall detection (actors.WithStallAfter) measures. It is not reset
	// when the minimum keeps its value under another holder (a tie, a
	// Drop of one of a tie) nor when an Add lowers it: the stored
	// checkpoint has made no progress either way. Zero when there is no
	// vchannel.
	HeldSince time.Time
	// Stalled is true while a MinimumStalled is in force: published and
	// not yet ended by a MinimumResumed.
	Stalled bool
	// Persisted is the last checkpoint the catalog acknowledged (or read at
	// recovery); nil when none.
	Persisted wal.MessageID
	VChannels int
	// Checkpoints is set only when asked for: GetState.IncludeCheckpoints,
	// or actors.IncludeCheckpoints with actors.GetState.
	Checkpoints map[string]wal.MessageID
	// Recovered is false while the stored checkpoint is still being read.
	Recovered bool
	// RecoveryFailure, while Recovered is false, is the error of the last
	// failed read of the stored checkpoint (RecoveryFailed): why the
	// pchannel has not recovered yet. Nil when no read has failed.
	RecoveryFailure error
	// RecoveryClosed is set when a read found the catalog closed
	// (persistence.ErrClosed, in RecoveryFailure): nothing is read again,
	// and the pchannel never recovers.
	RecoveryClosed bool
	// SaveInFlight is true while the persister awaits the catalog.
	SaveInFlight bool
}
