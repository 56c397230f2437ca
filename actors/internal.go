package actors

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// Messages between the PChannel actor, its persister and their goroutines.
// They are unexported: the protocol for users is package messages. With
// callDone (call.go), mailboxDrained and forgedRequest (mailbox.go),
// overdueCheck (persister.go) and batchConsumed (sender.go), these are all:
//
//	callDone        a catalog call's result, to the actor that started it
//	timerFired      a retry, throttle or restart delay elapsed
//	ownershipLost   the ownership context ended, or the persister was fenced
//	mailboxDrained  the mailbox ran empty: hand the latest rise over
//	offer           the minimum a new (or restarted) persister starts from
//	minimumFell     an Add pulled the minimum down: the persister's new target
//	savedAbove      the persister's persisted value is above its target:
//	                vchannels were added below it (AddedBehind)
//	tellStoppedTo   Poison asks for the Stopped event, sent as stoppedTold
//	flushRequest    a graceful stop asks the persister to save now
//	flushed         the persister's answer: nothing pending, nothing in flight
//	overdueCheck    the watchdog: is the save in flight past its deadline?
//	batchConsumed   a Sender's batch is applied: its buffer may be reused
//	forgedRequest   a request for a message only protoactor may send

// ownershipLost fires when the ownership context ends, or when the
// persister's save was refused with persistence.ErrFenced. watch is the
// seq of the pchannel's watch on the context that ended, 0 from the
// persister: a watch that fired as its actor stopped reaches, by name, an
// actor spawned since under it, which has an ownership of its own.
type ownershipLost struct {
	cause error
	watch uint64
}

// sendLate sends msg to pid, a process of root's system, unless it is
// gone from the registry. It is for a message that may come after its
// addressee is gone: one an actor sends itself or its parent from a timer
// or a goroutine (a catalog call abandoned by a stop returns whenever the
// catalog lets it), or an answer to a requester that may have given up.
// protoactor would hand it to its dead-letter process, which publishes a
// DeadLetterEvent for each: a user who watches those for lost messages
// would find lowwater's own plumbing among them, after ordinary stops.
// One that finds the actor still registered, and stopping, goes to its
// mailbox, which drops what comes after the actor stopped.
//
// pid is found by its id, as protoactor finds it: an actor spawned since
// under the same name takes what its predecessor was sent. The results
// of calls and timers carry a seq of their own (nextSeq), and the end of
// an ownership names its watch (ownershipLost).
func sendLate(root *actor.RootContext, pid *actor.PID, msg any) {
	if p, ok := root.ActorSystem().ProcessRegistry.Get(pid); ok {
		p.SendUserMessage(pid, msg)
	}
}

// stoppedTold carries a Stopped event to a Poison that asked for it
// (tellStoppedTo), which may have given up waiting already.
type stoppedTold struct{ ev *messages.Stopped }

// timerFired fires when a timer elapsed; seq tells a timer that is still
// wanted from one that was superseded or belongs to an ended incarnation.
// Every seq is drawn from nextSeq.
type timerFired struct{ seq uint64 }

// seqs numbers the catalog calls and timers of every pchannel and
// persister in the process. A late result (a call its actor gave up on,
// a timer that fired as it stopped) comes back by PID, that is by name,
// and a pchannel spawned again under its old name, from Props of its own,
// would number its calls as the old one did: counted per pchannel, it
// took the old incarnation's late read for its own recovery.
var seqs atomic.Uint64

// nextSeq returns a seq no call or timer in the process had before.
func nextSeq() uint64 { return seqs.Add(1) }

// flushRequest asks the persister, during a graceful stop, to enter the
// plan's flushing mode and answer flushed once nothing is pending. seq
// tells the answer to this request from one to a request that a crashed
// persister left queued for the next.
type flushRequest struct{ seq uint64 }

// flushed answers the flushRequest of seq. What was saved is in the
// persister's status, which the parent reads.
type flushed struct{ seq uint64 }

// offer is the first minimum a new or restarted persister takes; rises
// (MinimumAdvanced) and falls (minimumFell) follow. A restarted persister
// ignores the moves it finds queued before it: they were meant for its
// crashed predecessor.
type offer struct{ minimum wal.MessageID }

// minimumFell tells the persister that the minimum fell to the value in
// to: an Add below it. Unlike a rise it is no event: the VChannelAdded
// is. reply, if set, is the request for the Add, which the persister
// answers once it holds the new target.
type minimumFell struct {
	to    wal.MessageID
	reply *fellReply
}

// savedAbove tells the pchannel that the checkpoint persisted is above
// the minimum the persister knows: a save computed before Adds below it
// landed, before or after the persister learned of them. The pchannel
// tells the vchannels below it (AddedBehind) it has not told against that
// checkpoint: the persister may send it more than once.
type savedAbove struct{ persisted wal.MessageID }

// fellReply is the request for an Add that pulled the minimum down. The
// persister answers it once it holds the fall; the pchannel keeps it too,
// and answers it on a stop or a crash of the persister, which would leave
// it unanswered. Whichever comes first answers; the other finds it done.
type fellReply struct {
	sender  *actor.PID
	success any // the reply (see success)
	sent    atomic.Bool
}

// answered reports whether the Add has had its reply.
func (r *fellReply) answered() bool { return r.sent.Load() }

// answer replies to the Add, if nobody has.
func (r *fellReply) answer(root *actor.RootContext) {
	if r != nil && r.sent.CompareAndSwap(false, true) {
		sendLate(root, r.sender, r.success)
	}
}
