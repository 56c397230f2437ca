// Package actors runs lowwater's pchannel checkpoint keeping as protoactor
// actors: one PChannel actor per pchannel, owning its vchannel checkpoints in
// its mailbox, with one child persister that saves the minimum to a catalog.
//
// Spawn with NewProps, talk with the types of package messages, watch the
// actor system's EventStream, stop with PoisonFuture (graceful) or StopFuture.
//
// # The I/O contract, in order
//
// Written down as go.etcd.io/raft's doc.go writes its own: what holds when.
//
//  1. Spawn. The actor starts at once and reads the stored checkpoint off
//     its mailbox goroutine, retrying on the backoff while the catalog fails
//     (RecoveryFailed). Commands sent meanwhile are applied in order and
//     answered; GetState says Recovered=false. Nothing is saved yet: the
//     stored value is the floor, and it is not known.
//  2. Recovered. The start message ID is the stored checkpoint, or else the
//     minimum of the vchannels given at spawn (WithVChannels), or nil. The
//     persister is spawned and learns the floor and the current minimum.
//  3. Command. Applied to the tracker, or rejected with a typed error that
//     changes nothing. A request (RequestFuture, or Request here) is answered
//     after the command took effect in memory: a reply promises that later
//     GetStates see it, not that anything is durable. A rejection is
//     published (CommandRejected) and logged at Warn whether or not anyone
//     asked.
//  4. Minimum rose. MinimumAdvanced is published at once. The same message
//     goes to the persister, the latest one only, once the commands queued
//     in the mailbox are applied (or after a run of Throughput messages):
//     a burst of rises costs the persister one message, not one each. If
//     it is not above the persisted value (an Add pulled the minimum below
//     it), nothing is saved until it passes it.
//  5. Save. At most one is in flight, off the persister's mailbox, bounded by
//     the save timeout. Only the latest minimum is pending; minima that come
//     during a save replace each other and cost one more save in all.
//  6. Durable. CheckpointPersisted is published only after the catalog
//     returned nil for that value: from then on no restart, crash or second
//     writer will see the stored checkpoint below it.
//  7. Failed. PersistFailed is published, then the latest minimum is saved
//     again after the backoff (100 ms first, ×1.5, 10 s cap, never gives
//     up). A catalog reporting a value stored ahead ends that save: the
//     stored value becomes the floor. A fenced writer stops saving for good.
//  8. Stop. PoisonFuture drains the mailbox, then waits up to the stop flush
//     timeout for the pending minimum to be saved; StopFuture does not wait.
//     The flush saves at once, whatever the min save interval, and retries
//     failures on the backoff. Either way the save in flight is cancelled
//     and its goroutine joined, then Stopped is published, saying whether
//     anything was left unsaved.
//
// A panic inside the catalog crashes only the persister; the PChannel actor
// supervises it and restarts it after a growing delay (PersisterRestarted).
// The floor and the minimum live in the parent, so the restarted persister
// loses nothing. During a graceful stop's flush, when the parent cannot
// supervise, a panic counts as a failed save (PersistFailed) instead.
//
// A nil command pointer is rejected with messages.ErrNilCommand, like any
// other bad command: it changes nothing and never panics the actor.
//
// Event subscribers run on the publishing actor's goroutine: a slow one
// slows the pchannel. Keep handlers quick, or hand events to a channel. A
// panicking one is logged ("event subscriber panicked") and does not crash
// the PChannel actor, whose restart would forget the vchannels added since
// spawn; subscribers after it miss that event. (One panicking on a
// persister's event crashes the persister, which is restarted as above.)
package actors
