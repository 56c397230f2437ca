package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lowwater/lowwater/wal"
)

// Messages between the PChannel actor, its persister and their goroutines.
// They are unexported: the protocol for users is package messages.

// loaded carries the result of one recovery read back to the mailbox.
type loaded struct {
	checkpoint wal.MessageID
	err        error
}

// ownershipLost fires when the ownership context ends.
type ownershipLost struct{ cause error }

// retryRecovery fires when the recovery backoff has elapsed.
type retryRecovery struct{}

// drainRequested is posted right before a PoisonPill, so that the actor
// knows its coming stop is graceful (see mailbox).
type drainRequested struct{}

// restartPersister fires when a crashed persister's restart delay elapsed.
type restartPersister struct{ pid *actor.PID }

// persisterStarted asks the parent for what a fresh persister must know.
type persisterStarted struct{}

// persisterSync answers persisterStarted: the floor and the goal, and the
// configuration the persister works by.
type persisterSync struct {
	persisted wal.MessageID
	minimum   wal.MessageID
	cfg       *config
}

// persisterStatus keeps the parent's view of the persister current, for
// GetState and for the Stopped event.
type persisterStatus struct {
	persisted wal.MessageID
	inFlight  bool
	fenced    bool
}

// saveDone carries the outcome of one catalog save back to the mailbox.
type saveDone struct {
	from     *persister // the incarnation that started it
	value    wal.MessageID
	err      error
	panicked any
	latency  time.Duration
}

// retryDue fires when a retry or throttle timer elapsed; seq tells a timer
// that is still wanted from one that was superseded.
type retryDue struct{ seq uint64 }

// flushRequest asks the persister, during a graceful stop, to save the
// pending value now and answer with a flushResult once nothing is pending.
// It carries what a sync does: a stop can overtake the persister's sync.
type flushRequest persisterSync

type flushResult struct{ persisted wal.MessageID }
