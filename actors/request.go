package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/messages"
)

// DefaultRequestTimeout bounds every wait on an actor whose context has
// no deadline, so that none is unbounded: Request, GetState, Poison,
// StartMessageID, and a Sender's Flush and Close.
const DefaultRequestTimeout = 5 * time.Second

// Request sends cmd to a pchannel and waits for its reply: nil when the
// command took effect in memory, the command's typed error when it was
// rejected (errors.Is(err, messages.ErrCheckpointRollback), ...). It waits
// until ctx is done, or DefaultRequestTimeout when ctx has no deadline, and
// then returns ctx's error (context.DeadlineExceeded for the timeout). A
// pchannel that is stopping or no longer exists gives an error that names
// its actor (the PID's id: the name given to SpawnNamed) and wraps
// actor.ErrDeadLetter. A nil ctx is an ErrNilContext, and nothing is sent.
//
// From inside an actor's Receive, see "Waiting from inside an actor" in
// the package doc.
func Request(ctx context.Context, sender actor.SenderContext, pchannel *actor.PID, cmd messages.Command) error {
	if cmd == nil {
		return messages.ErrNilCommand
	}
	res, err := ask(ctx, sender, pchannel, cmd)
	if err != nil {
		return err
	}
	switch r := res.(type) {
	case nil, *messages.Applied: // the latter relayed by an actor that asked
		return nil
	case error:
		return r
	default:
		return fmt.Errorf("lowwater: unexpected reply %T to %T", res, cmd)
	}
}

// StateOption adds to what GetState asks for.
type StateOption interface{ applyState(*messages.GetState) }

type stateOptionFunc func(*messages.GetState)

func (f stateOptionFunc) applyState(g *messages.GetState) { f(g) }

// IncludeCheckpoints asks GetState for every vchannel's checkpoint too
// (State.Checkpoints), at a cost that grows with the vchannels.
func IncludeCheckpoints() StateOption {
	return stateOptionFunc(func(g *messages.GetState) { g.IncludeCheckpoints = true })
}

// GetState asks a pchannel for its state, waiting as Request does. A nil
// option is an ErrInvalidOption, and nothing is asked.
func GetState(ctx context.Context, sender actor.SenderContext, pchannel *actor.PID, opts ...StateOption) (*messages.State, error) {
	q := &messages.GetState{}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil state option", ErrInvalidOption)
		}
		o.applyState(q)
	}
	res, err := ask(ctx, sender, pchannel, q)
	if err != nil {
		return nil, err
	}
	switch r := res.(type) {
	case *messages.State:
		return r, nil
	case error: // PChannelPanicError
		return nil, r
	default:
		return nil, fmt.Errorf("lowwater: unexpected reply %T to GetState", res)
	}
}

// ErrNoPChannel is returned by Request and GetState for a nil sender (a
// nil pointer too, such as a nil *actor.RootContext) or pchannel PID:
// there is no one to ask.
var ErrNoPChannel = errors.New("lowwater: no pchannel to ask (nil sender or PID)")

// ErrNilContext is returned by Request, GetState and a Sender's Flush and
// Close given a nil context, rather than a panic: nothing is sent, and a
// Sender stays as it was.
var ErrNilContext = errors.New("lowwater: nil context")

// ask sends msg to pid and waits for the reply, bounded by ctx, or by
// DefaultRequestTimeout when ctx has no deadline. Root.Request sets no
// sender at the pinned protoactor version; the reply comes to an address
// of ask's own (replyBox), not to a protoactor future: ending a future
// early, as ctx ends, means completing it a second time, beside the
// reply, and a future's completions write its result unguarded (a data
// race). Nothing else waits, no goroutine beside the caller.
func ask(ctx context.Context, sender actor.SenderContext, pid *actor.PID, msg any) (any, error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if isNil(sender) || pid == nil {
		return nil, ErrNoPChannel
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := DefaultRequestTimeout
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		timeout = max(time.Until(deadline), time.Nanosecond)
	}
	registry := sender.ActorSystem().ProcessRegistry
	box := replyBox(make(chan any, 1))
	self, _ := registry.Add(box, "request"+registry.NextId())
	defer registry.Remove(self)
	sender.RequestWithCustomSender(pid, msg, self)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case res := <-box:
		if _, ok := res.(*actor.DeadLetterResponse); ok {
			return nil, deadLetter(sender.ActorSystem(), pid)
		}
		return res, nil
	case <-ctx.Done():
		return nil, noAnswer(sender.ActorSystem(), pid, msg, "", ctx.Err())
	case <-timer.C:
		if hasDeadline {
			return nil, noAnswer(sender.ActorSystem(), pid, msg, "", context.DeadlineExceeded)
		}
		return nil, noAnswer(sender.ActorSystem(), pid, msg, fmt.Sprintf(" within %v", timeout), context.DeadlineExceeded)
	}
}

// deadLetter is the error of a request to pid that came back a dead
// letter: the pchannel is stopping, named while the directory still
// lists it, or gone, when only its actor's id is known (Spawn's "$1",
// unless SpawnNamed gave one).
func deadLetter(sys *actor.ActorSystem, pid *actor.PID) error {
	if l := directoryOf(sys).lookup(sys, pid); l != nil {
		return fmt.Errorf("lowwater: pchannel %s (actor %s) is stopping: %w", shorten.Quoted(l.name), shorten.Quoted(pid.Id), actor.ErrDeadLetter)
	}
	return fmt.Errorf("lowwater: pchannel actor %s is stopping or gone (its pchannel is not known once it stopped; "+
		"SpawnNamed gives the actor an id of yours): %w", shorten.Quoted(pid.Id), actor.ErrDeadLetter)
}

// noAnswer is the error of a request to pid that its context, or
// DefaultRequestTimeout (within), ended unanswered. From here a busy
// pchannel and an actor that is no pchannel's look alike: of one the
// directory knows, it says that it is busy, and why it may be; of
// another, that it may be no pchannel's.
func noAnswer(sys *actor.ActorSystem, pid *actor.PID, msg any, within string, err error) error {
	what := reflect.TypeOf(msg).String()
	what = what[strings.LastIndexByte(what, '.')+1:] // "GetState", not "*messages.GetState"
	l := directoryOf(sys).lookup(sys, pid)
	if l == nil {
		return fmt.Errorf("lowwater: actor %s did not answer %s%s (is it a pchannel's?): %w", shorten.Quoted(pid.Id), what, within, err)
	}
	// Busy: how many messages wait is not told, since the mailbox counts
	// those its run has taken only once the run ends, and a handler held
	// up is in a run.
	return fmt.Errorf("lowwater: pchannel %s did not answer %s%s: it is busy (a backlog of raw Sends before the request, "+
		"or an event subscriber or a middleware that holds it?): %w", shorten.Quoted(l.name), what, within, err)
}

// replyBox is where one request's reply comes: the first reply is kept,
// any other dropped. It is a bare Process, as a future is: a mailbox
// drops nil, the reply to a command applied.
type replyBox chan any

func (b replyBox) SendUserMessage(_ *actor.PID, message any) {
	select {
	case b <- actor.UnwrapEnvelopeMessage(message):
	default:
	}
}

func (replyBox) SendSystemMessage(*actor.PID, any) {}
func (replyBox) Stop(*actor.PID)                   {}

// LoggerFactory bridges protoactor's slog logging to l, so that one zap
// logger carries both lowwater's and the actor system's lines:
//
//	system := actor.NewActorSystem(
//		actor.WithLoggerFactory(actors.LoggerFactory(logger)))
//
// The lines go to l's core, through zapslog: they are named "protoactor"
// whatever l's name, carry no caller, and carry a stack from error level
// on, whatever l's own options (zap.WithCaller, zap.AddStacktrace) say.
// A value of any type in a line is first tried on an encoder of its own,
// and one whose encoding panics is written as text: protoactor logs the
// user's values as they are (what an actor panicked with, a message it
// could not deliver), and a panic there would end the process. Such an
// attribute costs about 2.5 times what it does through zapslog alone.
// protoactor logs seldom: a panic, a dead letter (throttled), a stop.
func LoggerFactory(l *zap.Logger) func(*actor.ActorSystem) *slog.Logger {
	return func(system *actor.ActorSystem) *slog.Logger {
		return slog.New(guardedHandler{zapslog.NewHandler(l.Core(), zapslog.WithName("protoactor"),
			// A stack is taken from within the handler: guardedHandler
			// is one frame more.
			zapslog.WithCallerSkip(1))}).With("system", system.ID)
	}
}

// guardedHandler writes protoactor's records through zap, an attribute
// that zap cannot encode as text. protoactor logs values of the user's as
// they are (slog.Any): what an actor panicked with, a message it could not
// deliver. zap encodes such a value with its own MarshalJSON,
// MarshalLogObject, Error or String, which may panic, and protoactor logs a
// panic's value from the mailbox's recover: the second panic would end the
// process.
//
// Each such value is tried on an encoder of its own first, so that the
// record goes to the core once, as it is or with the failing attributes
// as text: retried after a panic in the core, it was counted twice by a
// sampler, and written twice by the cores of a tee that came before the
// one that failed. A value that encodes once and panics the next time is
// still caught, and then written again, all as text.
type guardedHandler struct{ slog.Handler }

func (h guardedHandler) Handle(ctx context.Context, r slog.Record) (err error) {
	if needsRewrite(r) {
		r = recordWith(r, safeAttr)
	}
	defer func() {
		if recover() != nil {
			err = h.Handler.Handle(ctx, recordWith(r, attrAsText))
		}
	}()
	return h.Handler.Handle(ctx, r)
}

func (h guardedHandler) WithAttrs(attrs []slog.Attr) (w slog.Handler) {
	attrs = attrsWith(attrs, safeAttr)
	defer func() {
		if recover() != nil {
			w = guardedHandler{h.Handler.WithAttrs(attrsWith(attrs, attrAsText))}
		}
	}()
	return guardedHandler{h.Handler.WithAttrs(attrs)}
}

func (h guardedHandler) WithGroup(name string) slog.Handler {
	return guardedHandler{h.Handler.WithGroup(name)}
}

// needsRewrite reports whether any attribute of r fails to encode or
// is a LogValuer: one is resolved once, by safeAttr, and zapslog then
// finds its value.
func needsRewrite(r slog.Record) (needs bool) {
	r.Attrs(func(a slog.Attr) bool {
		needs = attrNeedsRewrite(a)
		return !needs
	})
	return needs
}

func attrNeedsRewrite(a slog.Attr) bool {
	switch a.Value.Kind() {
	case slog.KindLogValuer:
		return true
	case slog.KindGroup:
		return slices.ContainsFunc(a.Value.Group(), attrNeedsRewrite)
	}
	return !encodes(a)
}

// recordWith is r with each attribute mapped by f.
func recordWith(r slog.Record, f func(slog.Attr) slog.Attr) slog.Record {
	t := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		t.AddAttrs(f(a))
		return true
	})
	return t
}

func attrsWith(attrs []slog.Attr, f func(slog.Attr) slog.Attr) []slog.Attr {
	t := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		t[i] = f(a)
	}
	return t
}

// safeAttr is a, or, if it fails to encode, a as text: in a group, only
// the members that fail.
func safeAttr(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindGroup:
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(attrsWith(a.Value.Group(), safeAttr)...)}
	case slog.KindLogValuer:
		return safeAttr(slog.Attr{Key: a.Key, Value: a.Value.Resolve()})
	}
	if encodes(a) {
		return a
	}
	return attrAsText(a)
}

// encodes reports whether zap encodes a value of any type without a
// panic, trying it on a JSON encoder of its own: zapslog gives it to the
// core as zap.Any, and every zap encoder of fields runs the value's own
// marshalling there. A value of any other kind encodes; a group or a
// LogValuer is for the caller to open.
func encodes(a slog.Attr) (ok bool) {
	if a.Value.Kind() != slog.KindAny {
		return true
	}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	zap.Any(a.Key, a.Value.Any()).AddTo(zapcore.NewJSONEncoder(zapcore.EncoderConfig{}))
	return true
}

// attrAsText formats a value of any type with fmt, which recovers a
// panicking Error, String or Format method.
func attrAsText(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindAny:
		return slog.String(a.Key, fmt.Sprint(a.Value.Any()))
	case slog.KindGroup:
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(attrsWith(a.Value.Group(), attrAsText)...)}
	case slog.KindLogValuer:
		// Resolve recovers a LogValue that panics; what it resolves to
		// may be a value zap cannot encode all the same.
		return attrAsText(slog.Attr{Key: a.Key, Value: a.Value.Resolve()})
	}
	return a
}

// PChannelPanicError answers a request (Request, GetState, a Sender's
// batch) whose handling panicked the pchannel: a bug, or a WAL's ID type
// whose comparison panics. The pchannel restarts or stops, as its
// supervisor decides; what the command did before the panic is not
// known. errors.Is(err, ErrPChannelPanicked) matches it.
type PChannelPanicError struct {
	Command string // the type of the message being handled
	Value   any    // what the handler panicked with
	// message is the one being handled, by which a Sender tells which of
	// its batches the panic answers.
	message any
}

// ErrPChannelPanicked matches every PChannelPanicError.
var ErrPChannelPanicked = errors.New("lowwater: pchannel panicked")

func (e *PChannelPanicError) Error() string {
	return fmt.Sprintf("lowwater: pchannel panicked handling %s: %s", e.Command, shorten.Value(e.Value))
}

// Unwrap gives ErrPChannelPanicked, and the panic's own error if it was one.
func (e *PChannelPanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPChannelPanicked, err}
	}
	return []error{ErrPChannelPanicked}
}
