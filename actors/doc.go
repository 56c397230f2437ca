// Package actors runs lowwater's pchannel checkpoint keeping as protoactor
// actors: one PChannel actor per pchannel, owning its vchannel checkpoints in
// its mailbox, with one child persister that saves the minimum to a catalog.
//
// Spawn with NewProps, learn where consumption starts with StartMessageID,
// talk with the types of package messages, watch the actor system's
// EventStream, stop with Poison (graceful: it returns the Stopped event),
// PoisonFuture or StopFuture.
//
// # The I/O contract, in order
//
// What holds when, step by step.
//
//  1. Spawn. The actor starts at once and reads the stored checkpoint off
//     its mailbox goroutine, retrying on the backoff while the catalog fails
//     (RecoveryFailed). Commands sent meanwhile are applied in order and
//     answered; GetState says Recovered=false. Nothing is saved yet: the
//     stored value is the floor, and it is not known.
//  2. Recovered. The start message ID is the stored checkpoint, or else the
//     minimum of the vchannels given at spawn (WithVChannels), lower if a
//     vchannel added during recovery is below it, or nil: StartMessageID
//     waits for it. The persister is spawned with the floor
//     and is offered the current minimum.
//  3. Command. Applied to the tracker, or rejected with a typed error that
//     changes nothing. A request (RequestFuture, or Request here) is answered
//     after the command took effect in memory: a reply promises that later
//     GetStates see it, not that anything is durable. A rejection is
//     published (CommandRejected) and logged at Warn whether or not anyone
//     asked (to the logger of WithLogger; the default logs nothing).
//  4. Minimum rose. MinimumAdvanced is published at once, but for updates
//     sent with no reply asked (Send): a run of those queued in the mailbox
//     publishes one, from the minimum before the run to the minimum after
//     it, stamped with the time of its first rise, once the run is applied
//     and before anything else is handled or published. The same message
//     goes to the persister, the latest one only, once the commands queued
//     in the mailbox are applied (or after a run of the dispatcher's
//     Throughput messages, 300 by default, protoactor's turn):
//     a burst of rises costs the persister one message, not one each. If
//     it is not above the persisted value (an Add pulled the minimum below
//     it), nothing is saved until it passes it. An Add that pulls the
//     minimum down is handed to the persister too, and a request for it
//     is answered once the persister holds the new target: a rise not
//     saved yet is never saved over it after the reply (after the
//     burst, for an Add sent without one); only a save already in
//     flight when it came may land above it. An Add below the persisted
//     checkpoint, or below such a save once it lands, is told
//     (AddedBehind): a restart would start past it. A stop, or a crash of the
//     persister (whose successor starts from the minimum of then),
//     answers it at once.
//     A rise also stamps State.HeldSince with the event's time, and ends a
//     stall in force (MinimumResumed, after the MinimumAdvanced).
//  5. Save. At most one is in flight, off the persister's mailbox, bounded by
//     the save timeout. Only the latest minimum is pending; minima that come
//     during a save replace each other and cost one more save in all.
//  6. Durable. CheckpointPersisted is published only after the catalog
//     returned nil for that value: from then on no restart, crash or second
//     writer will see the stored checkpoint below it. GetState sent on
//     seeing the event already reports it as Persisted.
//  7. Failed. PersistFailed is published, then the latest minimum is saved
//     again after the backoff (100–150 ms first, ×1.5, 6.7–10 s once
//     capped, never gives up). A panic inside the catalog is a failed save
//     like any other, as a panic inside Load is a failed recovery. A
//     catalog reporting a value stored ahead ends that save: the stored
//     value becomes the floor. A fenced writer stops saving for good, and
//     the actor stops. A closed catalog (persistence.ErrClosed) is not
//     retried, for a save nor for the recovery read: the actor runs on in
//     memory, and its stop reports at once what is left unsaved.
//  8. Stop. PoisonFuture drains the mailbox, then waits up to the stop flush
//     timeout for the minimum to be saved, in whatever phase it finds the
//     actor: during recovery it first waits for the recovery read (retrying
//     it on the backoff, reporting it overdue as the watchdog would), then
//     saves; with no vchannel there is nothing to save, and it does not
//     wait. The flush saves at once, whatever the
//     min save interval, and retries failures on the backoff. An ownership
//     (WithOwnership) that ends during either wait ends it, with its
//     OwnershipLost: nothing would be saved. StopFuture
//     does not wait. Either way the calls still running are cancelled and
//     joined (a save the catalog acknowledged meanwhile counts as durable,
//     with its CheckpointPersisted), then Stopped is published:
//     LastPersisted, and if something
//     was left unsaved, Flushed=false, Dropped and a Reason
//     (messages.ErrHardStop, ErrFlushTimeout, ErrNotRecovered, the
//     ownership loss, or persistence.ErrClosed).
//
// # Every wait is bounded
//
// A catalog is third-party code: it may ignore its context. Each catalog
// call runs off the mailbox, on a goroutine the mailbox does not wait for,
// with the save timeout as its deadline, and its result comes back as a
// message tagged with a sequence number, so that a late one is told apart
// and ignored. A stop cancels the
// calls still running and waits for each at most 100 ms (the join grace);
// one still running then is abandoned: logged ("catalog ignored
// cancellation"), counted in Counters.AbandonedCalls, its result ignored.
// So, whatever the catalog does:
//
//	StopFuture   returns within 100 ms (+ scheduling)
//	PoisonFuture returns within the stop flush timeout + 100 ms (+ scheduling)
//
// A Stop that comes while a graceful stop waits in its handler (for the
// flush, or for the recovery read) cannot be handled before the handler
// returns: the mailbox, which sees it posted, ends the wait at once, so
// the first bound holds for it too, and Stopped reports ErrHardStop.
// (Props given a mailbox of the caller's own, with actor.WithMailbox, lose
// this: the Stop then waits for the handler, as protoactor's would. They
// lose more: a PoisonFuture is a hard stop, since only lowwater's mailbox
// tells the actor a PoisonPill is coming; each rise of the minimum goes to
// the persister at once, with no coalescing of a burst; forged lifecycle
// messages are not refused, a message sent during the spawn does not
// wait for the actor's Started, and a Drop lets a Sender's update made
// before it take effect after it (see Sender): see docs/bad-input.md in
// the module.)
//
// (A graceful stop of a fenced actor does not flush: the hard bound holds.)
// The bounds do not cover the caller's own code on the actor's goroutine:
// an EventStream subscriber that blocks holds up the stop as long as it
// blocks (package events puts a bounded buffer in between).
//
// An error a catalog returns, tells or panics with is looked into
// (errors.Is, errors.As) only once it is known to be safe to: one that is
// not (it holds a nil pointer, its Error, Unwrap, Is or As panics, its
// chain does not end) fails the call with ErrMalformedCatalogError in its
// stead, retried as any failure. The cause of an ownership's end is
// checked alike.
//
// A call still running 100 ms after its context ended, the catalog
// ignoring its context, is reported then: 100 ms past its deadline. The
// context of a catalog that neither asks for its Done nor checks its Err
// after the deadline ends when the watchdog first looks, 100 ms past the
// deadline, and the call is reported 200 ms past it; a process paused
// past the deadline ends it as it goes on. The report is PersistFailed
// (or RecoveryFailed) with ErrCatalogOverdue and no NextRetry, and an
// Error line; so is a save started through a SaveStarter whose done has
// not come. It is still waited for: the next attempt starts once it
// returns, so that a pchannel never has two calls in a catalog at once,
// and a store that hangs never collects a goroutine per retry. A
// StartSave that tells its save before it returns is in the catalog
// until it returns, too. A restart after a panic is the exception: like a
// stop, it abandons the call in flight (counted), and the new incarnation
// reads or saves afresh.
//
// # Waiting from inside an actor
//
// Request, GetState, StartMessageID, Poison and a Sender's Flush and
// Close wait for a pchannel, bounded by their context, and a Sender's
// Update for room in its buffer, up to WithFullWait. Called from an
// actor's Receive, they hold that actor for the wait. There, ask with
// ctx.Request, whose answer comes to the mailbox (*messages.Applied, or
// the error), or with ctx.RequestFuture and ctx.ReenterAfter; but in a
// Stopping or Restarting handler, where a parent poisons its pchannels
// before protoactor stops them hard, Poison is the way: start them all
// (a goroutine each), then wait for them all, or the stop takes a flush
// timeout per pchannel. Never call them from a raw EventStream subscriber
// of the pchannel asked: it runs on that pchannel's goroutine, which
// cannot answer until it returns, and the call waits out its context.
//
// # Phases
//
// A pchannel is in one phase at a time: recovering (reading its stored
// checkpoint), running, fenced (its ownership ended, or the order of its
// vchannels was lost: it saves nothing more and stops), stopping, and
// stopped. Commands and GetState are answered alike in every phase until
// the stop begins. Once the actor's Stopping handler has run, the mailbox
// hands it no more user messages: a request gets a DeadLetterResponse
// (actor.ErrDeadLetter from Request and GetState, ErrPChannelGone from a
// Sender), as from a stopped actor, and the rest is dropped. A request
// that comes while a graceful stop waits in that handler (for its flush,
// or for the recovery read) is refused so at once; one queued before the
// stop began is refused when the wait ends. protoactor
// would still deliver them until the stop completes, and a panic there (a
// receiver middleware the caller added) made it restart the actor and lose
// the stop. Losing the ownership publishes OwnershipLost. Becoming running
// restarts the stall clock (HeldSince := Recovered's time).
//
// What each phase does with each event is tabled in the source of
// actors/pchannel.go, for whoever changes the lifecycle.
//
// # Who holds the minimum back
//
// State.Holder is the vchannel at the minimum (the tracker's heap root:
// O(1)), and State.HeldSince when the minimum last rose, or the pchannel
// began running if later. With WithStallAfter(d), a pchannel that runs
// with at least one vchannel and whose minimum has not risen for d
// publishes MinimumStalled (holder, its checkpoint, for how long), once;
// MinimumResumed ends the stall when the minimum rises or the last
// vchannel is dropped. A stall in force at a stop ends with Stopped.
//
// It costs one timer per pchannel at most, and nothing per vchannel: the
// update path stores the time of a rise, which MinimumAdvanced stamps
// anyway, and arms a timer only when none is armed (after a stall, or
// after a time with no vchannel). The timer, when it fires, re-arms for
// what is left if the minimum rose meanwhile. Its message carries a
// sequence number like every timer here: one that fires after a stop or
// a re-arming is ignored.
//
// # The persister
//
// Each PChannel actor has one child, its persister, that saves the latest
// minimum: one save in flight at most, so a pchannel never has two calls in
// a catalog at once, and the minima that rise meanwhile replace each other.
// It takes no message from users, and what it reports (State's Persisted
// and SaveInFlight; Stopped's LastPersisted) is the one source of what is
// durable. A save costs no hand-off between goroutines when nothing
// else holds the pchannel: the goroutine that applied the rise runs the
// save and then handles its result. Messages that come meanwhile are run by
// another goroutine: no mailbox waits for a save (but a graceful stop's, for
// its flush).
//
// # Goroutines
//
// Mailboxes and catalog calls run on a pool of goroutines, one pool per
// actor system (so that a system in a testing/synctest bubble keeps its
// goroutines in the bubble): a goroutine that ran one keeps its grown
// stack for the next, where a fresh one per mailbox run and per save spent
// much of a save's CPU growing its stack. A task that finds no idle
// goroutine is queued, and a goroutine that finishes a task takes the
// next queued one: under a burst a few goroutines run many mailboxes back
// to back. The pool is never capped, since a task may block (a catalog
// call; a graceful stop waits in a handler for its persister): while
// tasks are queued, one new goroutine is always on its way to them. It
// sheds instead: at most 1,024 idle goroutines wait, each for 20 to 40 ms,
// so idle pchannels hold none, and none is left soon after the last actor
// stops (goleak's default retries wait longer).
//
// A bare UpdateCheckpoint goes from the mailbox straight to the PChannel
// actor, without protoactor's dispatch around it, wherever that dispatch
// would do nothing for it: Props with receiver middleware or a context
// decorator added, an actor system with a metrics provider, or a receive
// timeout take protoactor's path for every message.
//
// A persister crashes for a bug of its own, or for a subscriber that ends
// its goroutine (runtime.Goexit) on an event it publishes: a catalog's
// panic is a failed save, and a subscriber's panic is logged. The
// PChannel actor supervises it and restarts it after a delay that grows
// with its crashes of the last minute (Initial × Multiplier^(n-1), capped
// at Max); it keeps no more of them than reach the cap. One that crashes
// while a graceful stop waits for its flush is restarted at once and
// asked again, and after that delay if it crashes again: the stop waits
// no longer than the minimum's save, and at most its flush timeout.
//
// An ID of a WAL registered by the user (wal.Register) whose comparison
// panics is bad input like any other: the command is rejected with
// wal.ErrCorruptID and changes nothing. Should rebuilding the order of the
// vchannels after it panic too, that order is lost: the actor stops at
// once, saving nothing more, and Stopped says so (Reason wraps
// wal.ErrCorruptID, no Dropped).
//
// Should handling a request panic the PChannel actor anyway (a bug, or a
// receiver middleware added to its Props that panics), its supervisor
// restarts or stops it as for any actor, and the request is answered at
// once with a PChannelPanicError rather than never. A restarted actor goes
// on with the vchannels as they were (added, dropped and moved since
// spawn): it recovers its stored checkpoint again, and saves no minimum
// above a live vchannel. One thing no actor can mend: a middleware that
// panics on Stopped, the stop's last message, cuts protoactor's own stop
// short, and a StopFuture or PoisonFuture then waits its full timeout.
//
// A nil command pointer is rejected with messages.ErrNilCommand, like any
// other bad command: it changes nothing and never panics the actor. A
// vchannel name no catalog or log can carry (over 512 bytes, not UTF-8, a
// NUL byte) is rejected at AddVChannel (persistence.ErrInvalidArgument),
// and at NewProps for the pchannel's name and WithVChannels.
//
// Event subscribers run on the publishing actor's goroutine: a slow one
// slows the pchannel. Keep handlers quick, or hand events to a channel. A
// panicking one is logged ("event subscriber panicked", with the stack
// that names it) and crashes neither actor: a restart would recover the
// stored checkpoint again, and a persister's would cost a flush its time.
// Subscribers after it miss that event.
package actors
