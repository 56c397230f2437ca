// Package messages is lowwater's protocol: the commands a pchannel actor
// takes, the replies it gives, the errors it rejects with and the events it
// publishes. It holds types only, so that callers depend on the protocol and
// not on the actors.
//
//	message            reply (RequestFuture)         events
//	AddVChannel        nil | error                   VChannelAdded, MinimumAdvanced?, CommandRejected
//	UpdateCheckpoint   nil | error                   MinimumAdvanced?, CommandRejected
//	UpdateBatch        nil | *BatchError             MinimumAdvanced?, CommandRejected per entry
//	DropVChannel       nil | error                   VChannelDropped, MinimumAdvanced?, CommandRejected
//	GetState           *State                        -
//
// Errors: ErrVChannelExists, ErrVChannelNotFound, ErrCheckpointRollback,
// ErrNilCheckpoint, ErrEmptyVChannel, ErrWALMismatch, ErrNilCommand (a nil
// command pointer), ErrUnknownMessage (a request of another type);
// errors.Is works on every reply, including each entry of a *BatchError.
//
// Lifecycle events: Recovered, RecoveryFailed, CheckpointPersisted,
// PersistFailed, PersisterRestarted, OwnershipLost, Stopped. Stall events
// (with actors.WithStallAfter): MinimumStalled when the minimum has not
// risen for that long, naming the vchannel that holds it back, and
// MinimumResumed when it moves again. Every event embeds Header
// (pchannel name and time).
package messages
