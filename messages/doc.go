// Package messages is lowwater's protocol: the commands a pchannel actor
// takes, the replies it gives, the errors it rejects with and the events it
// publishes. It holds types only, so that callers depend on the protocol and
// not on the actors.
//
//	message           reply (RequestFuture)  events
//	AddVChannel       nil | error            VChannelAdded, MinimumAdvanced?
//	UpdateCheckpoint  nil | error            MinimumAdvanced?
//	UpdateBatch       nil | *BatchError      MinimumAdvanced?
//	DropVChannel      nil | error            VChannelDropped, MinimumAdvanced?
//	GetState          *State                 -
//
// A command that is refused publishes CommandRejected (one per refused
// entry of an UpdateBatch) and changes nothing.
//
// Errors: ErrVChannelExists, ErrVChannelNotFound, ErrCheckpointRollback,
// ErrNilCheckpoint, ErrEmptyVChannel, ErrWALMismatch, ErrSentinel (a
// negative Kafka offset), ErrNilCommand (a nil command pointer),
// ErrUnknownMessage (a request of another type); from
// other packages, persistence.ErrInvalidArgument (a vchannel name no
// catalog can store: over 512 bytes, not UTF-8, a NUL byte) and
// wal.ErrCorruptID (an ID of a WAL registered with wal.Register whose
// comparison panics). errors.Is works on every reply, including each
// entry of a *BatchError.
//
// Lifecycle events: Recovered, RecoveryFailed, CheckpointPersisted,
// PersistFailed, PersisterRestarted, OwnershipLost, Stopped. AddedBehind
// tells of vchannels added below the persisted checkpoint, whose records a
// restart would skip: an event to alert on. Stall events
// (with actors.WithStallAfter): MinimumStalled when the minimum has not
// risen for that long, naming the vchannel that holds it back, and
// MinimumResumed when it moves again. Every event embeds Header
// (pchannel name and time).
package messages
