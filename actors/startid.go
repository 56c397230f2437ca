package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// StartMessageID waits until a pchannel has read its stored checkpoint and
// returns where its consumption restarts: the stored checkpoint, or, with
// none stored, the minimum of the vchannels given at spawn (nil when none
// was given), or that of one added below it while the catalog was read. A
// consumer opens its WAL there.
//
// The actor reads the catalog after its spawn, not within it, and retries
// while the catalog fails (RecoveryFailed); commands sent meanwhile are
// applied. So this is a wait, like Request's: until ctx is done, or
// DefaultRequestTimeout when ctx has no deadline. An error then wraps
// ctx's error and, if a read failed, the last read's error. A pchannel
// whose catalog was closed as it read (State.RecoveryClosed) never
// recovers: that is said at once, wrapping persistence.ErrClosed. A pchannel
// that stops, or is gone, gives GetState's error (actor.ErrDeadLetter);
// a nil ctx is an ErrNilContext, a nil system or PID an ErrNoPChannel.
//
// It asks the actor (GetState) once, then again each time the event
// stream tells of a read of that pchannel or its stop: nothing is missed
// between the first answer and the subscription, which comes before it.
// It also asks again after a while without such an event, from 50 ms to
// a second apart: a raw EventStream subscriber before its own that panics
// on the event hides it. A context that ends before that ask is told the
// last failed read this call heard of, which a hidden Recovered may have
// made stale. A context done already is returned its error, and nothing
// is asked. A pchannel busy past ctx (a backlog of raw Sends, a
// subscriber that holds it) is said to be so; a PID that never answers,
// that it may be no pchannel's.
// system.Shutdown stops no actor: a call waiting
// then waits for its context. From inside an actor's Receive, see
// "Waiting from inside an actor" in the package doc.
func StartMessageID(ctx context.Context, system *actor.ActorSystem, pchannel *actor.PID) (wal.MessageID, error) {
	ctx, cancel, err := waitWithin(ctx, system, pchannel)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &recoveryWatch{poke: make(chan struct{}, 1)}
	var name string // the pchannel's, once known
	if l := directoryOf(system).lookup(system, pchannel); l != nil {
		// Known before it answers: every failed read from the
		// subscription on is kept, however long the answer takes.
		w.watch(l.name)
		name = shorten.Quoted(l.name)
	}
	sub := system.EventStream.Subscribe(w.see)
	defer system.EventStream.Unsubscribe(sub)
	again := time.NewTimer(time.Hour)
	defer again.Stop()
	answered := false
	for wait := startReask; ; {
		s, err := GetState(ctx, system.Root, pchannel)
		switch {
		case err == nil:
			answered = true
		case !answered:
			// GetState's: a busy pchannel, or a PID that may be none's.
			return nil, w.notRecovered(err)
		case ended(err):
			// It answered before: the context ended while it was
			// asked again, not for want of an answer.
			return nil, w.notRecovered(fmt.Errorf("lowwater: pchannel %s did not say it had read its stored checkpoint: %w", name, cmp.Or(ctx.Err(), context.DeadlineExceeded)))
		default:
			return nil, w.notRecovered(err)
		}
		if s.Recovered {
			return s.StartMessageID, nil
		}
		name = shorten.Quoted(s.PChannel)
		w.watch(s.PChannel)
		w.seed(s.RecoveryFailure) // a read that failed before the call
		if s.RecoveryClosed {
			return nil, fmt.Errorf("lowwater: pchannel %s does not recover: its catalog was closed as it read the stored checkpoint: %w", name, s.RecoveryFailure)
		}
		again.Reset(wait) // no stale tick is left to take since Go 1.23
		select {
		case <-w.poke:
			wait = startReask
		case <-again.C:
			wait = min(2*wait, maxReask) // silence: asked less and less often
		case <-ctx.Done():
			return nil, w.notRecovered(fmt.Errorf("lowwater: pchannel %s did not say it had read its stored checkpoint: %w", name, ctx.Err()))
		}
	}
}

// waitWithin checks what StartMessageID and Poison are given, and bounds
// ctx by DefaultRequestTimeout when it has no deadline, as Request does.
// A context done already is each caller's to judge: StartMessageID asks
// nothing, Poison still stops the pchannel.
func waitWithin(ctx context.Context, system *actor.ActorSystem, pchannel *actor.PID) (context.Context, context.CancelFunc, error) {
	switch {
	case ctx == nil:
		return nil, nil, ErrNilContext
	case system == nil || pchannel == nil:
		return nil, nil, ErrNoPChannel
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultRequestTimeout)
	return ctx, cancel, nil
}

// ended reports whether err is a context's end: ask's own timer may end a
// wait a moment before ctx does.
func ended(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// How long StartMessageID waits for an event before it asks again.
const (
	startReask = 50 * time.Millisecond
	maxReask   = time.Second
)

// recoveryWatch is StartMessageID's subscriber: it runs on the actors'
// goroutines, so it only notes and pokes, never blocks.
type recoveryWatch struct {
	poke chan struct{}

	mu       sync.Mutex
	pchannel string // "" until the actor's first answer: every event pokes
	lastErr  error  // the last failed read of pchannel, nil once one succeeded
}

func (w *recoveryWatch) watch(pchannel string) {
	w.mu.Lock()
	w.pchannel = pchannel
	w.mu.Unlock()
}

// seed takes err, the actor's last failed read, as the last one heard
// of, unless an event told of one since the call began.
func (w *recoveryWatch) seed(err error) {
	w.mu.Lock()
	if w.lastErr == nil {
		w.lastErr = err
	}
	w.mu.Unlock()
}

func (w *recoveryWatch) see(ev any) {
	var name string
	var failed error
	read := true // the event says how the last read went
	switch e := ev.(type) {
	case *messages.Recovered:
		name = e.PChannel
	case *messages.RecoveryFailed:
		name, failed = e.PChannel, e.Err
	case *messages.Stopped:
		name, read = e.PChannel, false
	default:
		return
	}
	w.mu.Lock()
	mine := w.pchannel == "" || w.pchannel == name
	if read && w.pchannel == name {
		w.lastErr = failed
	}
	w.mu.Unlock()
	if mine {
		select {
		case w.poke <- struct{}{}:
		default:
		}
	}
}

// notRecovered adds the last failed read, if any, to err.
func (w *recoveryWatch) notRecovered(err error) error {
	w.mu.Lock()
	last := w.lastErr
	w.mu.Unlock()
	if last == nil {
		return err
	}
	return fmt.Errorf("%w (the last failed read it was told of: %w)", err, last)
}
