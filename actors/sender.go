package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// Errors of a Sender.
var (
	// ErrSenderFull is returned by Sender.Update when the buffer holds
	// WithMaxPending distinct vchannels and none was shipped within
	// WithFullWait: the pchannel is not keeping up. Nothing was buffered.
	ErrSenderFull = errors.New("lowwater: sender buffer full")
	// ErrSenderClosed is returned by calls on a closed Sender.
	ErrSenderClosed = errors.New("lowwater: sender closed")
	// ErrPChannelGone is returned once the pchannel actor has stopped: the
	// updates buffered or in flight then, if any, were not applied (or not
	// known to be), and no later one will be. The first error that says so
	// counts them, the buffered ones and those of the batch in flight
	// apart; those after it say that an earlier error counted them, or
	// that there were none, without counting them again.
	ErrPChannelGone = errors.New("lowwater: pchannel actor stopped")
	// ErrUpdatesAbandoned is returned by Close, beside ctx's error, when
	// it gave up waiting with updates unconfirmed: buffered ones, which
	// were never sent, or a batch in flight, which may or may not have
	// been applied. Its text says how many of each.
	ErrUpdatesAbandoned = errors.New("lowwater: sender closed with updates unconfirmed")
)

// Defaults of the SenderOptions.
const (
	DefaultMaxPending = 4096
	DefaultFullWait   = time.Second
)

// SenderOption configures a Sender.
type SenderOption interface{ applySender(*senderConfig) }

type senderOptionFunc func(*senderConfig)

func (f senderOptionFunc) applySender(c *senderConfig) { f(c) }

type senderConfig struct {
	maxPending int
	fullWait   time.Duration
}

// WithMaxPending bounds the buffer: at most n distinct vchannels wait to be
// shipped (default DefaultMaxPending). Updating a vchannel already waiting
// never blocks; a new one blocks while the buffer is full. Between batches
// the Sender remembers the names it was given, to find them again without
// a write to its map: up to n or 2×DefaultMaxPending, whichever is more,
// past which it forgets them all at its next batch. Their strings are
// kept as long: mind that with long names.
func WithMaxPending(n int) SenderOption {
	return senderOptionFunc(func(c *senderConfig) { c.maxPending = n })
}

// WithFullWait sets how long Update waits for room in a full buffer before
// it returns ErrSenderFull (default DefaultFullWait; 0 fails at once).
func WithFullWait(d time.Duration) SenderOption {
	return senderOptionFunc(func(c *senderConfig) { c.fullWait = d })
}

// Sender coalesces single updates to one pchannel actor into UpdateBatches.
// Many producers may call Update concurrently; the Sender keeps only the
// latest checkpoint of each vchannel, and ships what it holds as one
// UpdateBatch as soon as the actor has answered the previous one. So at most
// one batch is in flight, the actor's mailbox holds no backlog of stale
// checkpoints, and the producers' cost per update is a map look-up under a
// mutex: no timer, no goroutine, no message and no allocation per update.
// A slower actor means larger batches, not a longer queue.
//
// Errors reach the caller in two ways:
//   - Update rejects at once, with the typed error of package messages, what
//     it can judge alone: an empty vchannel name, a nil checkpoint, an ID
//     that is not one of package wal's, a sentinel (messages.ErrSentinel:
//     a negative Kafka offset), an ID of a WAL registered outside package
//     wal that does not read back (wal.ErrCorruptID), and, against the
//     checkpoint still waiting for the same vchannel, one below it
//     (messages.ErrCheckpointRollback), one of another WAL
//     (messages.ErrWALMismatch), or one whose comparison with it panics
//     (wal.ErrCorruptID). A rejected update changes nothing.
//   - What the actor rejects (an unknown vchannel, a rollback below the
//     applied checkpoint) is reported per flush: Flush and Close return a
//     *messages.BatchError naming each rejected vchannel with its error
//     (errors.As, errors.Is), together with ErrPChannelGone if the actor
//     stopped. A Flush returns the errors received since the previous Flush
//     or Close returned, whoever called it: up to WithMaxPending
//     rejections, and past that how many more there were.
//
// Only what is shipped reaches the actor: an update below the checkpoint
// the actor applied (a rollback it would reject), replaced by a later one
// of its vchannel before it was shipped, is reported by no call. The
// Sender judges an update against the one waiting, not against one
// shipped: the vchannel may have been dropped and added again lower.
//
// Rejection.Index in those errors counts rejections, not updates: the
// batches were built by the Sender, and their positions mean nothing to a
// caller.
//
// An update waits in the Sender until the batch before it is answered, so
// a command sent to the pchannel meanwhile, straight or through a
// Request, overtakes it. A Drop does not let an update of its vchannel
// made before it take effect after it: the update counts as applied to
// the vchannel dropped, and never reaches one added again under the name,
// which it would raise to where the old one was (a checkpoint above the
// data not yet consumed). A Drop refused leaves it to be applied, unless
// an update of the vchannel made after the Drop replaced it: an update
// made after the Drop replaces the one held whatever its value, with no
// rollback check against the dropped vchannel's checkpoint. That
// holds for a Sender of a pchannel of this system's and a Drop sent to
// the pchannel, not given to an actor in between, which posts it later;
// through one, Flush before the Drop. Flush first, too, before a graceful
// stop (PoisonFuture): the updates still buffered are not applied, and
// the stop's flush saves the minimum without them.
type Sender struct {
	system   *actor.ActorSystem
	root     *actor.RootContext
	pchannel *actor.PID
	cfg      senderConfig
	// replies is the process the batches are sent from: the pchannel's
	// reply to one batch is what ships the next.
	replies *actor.PID
	// listing is the pchannel's in the system's directory, nil for one
	// the directory does not know: whether its stop has begun (ship).
	listing *listing
	// drops is the pchannel's mailbox's share of the marks of the updates
	// a Drop overtakes (drops.go), nil for an actor that is no pchannel
	// of this system's. Found by the PID's id too, where listing is not:
	// a PID made anew is the same pchannel's, and marks laid on the
	// mailbox of another system's pchannel of that id would match none
	// of the Sender's batches.
	drops *senderDrops

	mu sync.Mutex
	// slots holds each vchannel seen lately at its index in entries, so
	// that an update, after the first of its vchannel, is one map hit and
	// no write to the map: the buffer is not rebuilt per batch.
	slots   map[string]int
	entries []senderEntry
	// recent is an index of entries by the address of a vchannel name's
	// bytes (slotOf), so that a caller who passes the same string each
	// time skips hashing it: sets of two, the one remembered last first.
	recent     []int32
	recentBits int
	// pending is the next UpdateBatch as it will be sent: the latest
	// checkpoint of each waiting vchannel, in the order they came; at
	// most maxPending. An entry waits, at its pos in pending, while its
	// gen is gen: taking pending for shipping moves gen on, so that
	// every entry stops waiting at once.
	// Invariant: pending is empty whenever no batch is in flight.
	pending []messages.VChannelCheckpoint
	gen     uint64
	// spare is the buffer of a batch the pchannel answered as consumed
	// (batchConsumed), to build the next batch in: only one batch is in
	// flight, so two buffers serve for good and a busy Sender allocates
	// nothing. Any other answer leaves the batch to whoever may hold it
	// (a middleware, a CommandRejected event, an actor in between): once
	// sent, a message is its receivers'.
	spare []messages.VChannelCheckpoint
	// flying is the batch in flight, nil when none: at most one is, and
	// it is never empty. flyingMsg is the message that carries it, and
	// answeredMsg the one before, once answered: a second answer to it
	// (a middleware that panics after the pchannel replied) is not taken
	// for the answer to the batch in flight.
	flying                 []messages.VChannelCheckpoint
	flyingMsg, answeredMsg *messages.UpdateBatch
	// shipped and answered count batches; answered <= shipped.
	shipped, answered uint64
	// progress, when someone waits, is closed and cleared when a batch is
	// answered or the actor is gone: it wakes Flush and Update waiting
	// for room. While nobody waits it is nil, and an answer costs no
	// channel.
	progress chan struct{}
	// rejected and dropped (the rejections beyond maxPending) wait for the
	// next Flush; gone, once set, ends the Sender. lost counts the
	// buffered updates that its end left unapplied, and unanswered those
	// of the batch it left in flight, until an error says so: once, so
	// that a caller who adds them up counts each once. left is what the
	// end found buffered or in flight, which every later error says was
	// counted, or was none.
	rejected   []messages.Rejection
	dropped    int
	gone       error
	lost       int
	unanswered int
	left       int
	closed     bool
	// marked counts the waiting updates with a Drop's mark (drops.go).
	marked int
	// detached is set once Close has stopped waiting: nobody waits for
	// an answer any more, and one that still comes ships nothing.
	// released is set once the reply process is to go (release), and
	// terminated once the pchannel's Terminated has come.
	detached, released, terminated bool
}

// NewSender returns a Sender of updates to the pchannel actor at pid. It
// registers one process (no goroutine) in system to receive the replies;
// Close removes it, and so does the pchannel's stop (a Close that found
// the pchannel stopping leaves it to the stop's end). A Sender dropped
// without Close while its pchannel runs stays registered, about a
// kilobyte, until the pchannel stops; one whose Close gave up with a
// batch in flight, until the pchannel answers it or stops. A nil system
// or pid, a nil option or one out of range is an error wrapping
// ErrInvalidOption, as a configuration that cannot work (where Request,
// a call, says ErrNoPChannel), and nothing is registered.
func NewSender(system *actor.ActorSystem, pid *actor.PID, opts ...SenderOption) (*Sender, error) {
	cfg := senderConfig{maxPending: DefaultMaxPending, fullWait: DefaultFullWait}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: option %d is nil", ErrInvalidOption, i)
		}
		o.applySender(&cfg)
	}
	switch {
	case system == nil:
		return nil, fmt.Errorf("%w: nil actor system", ErrInvalidOption)
	case pid == nil:
		return nil, fmt.Errorf("%w: nil pchannel PID", ErrInvalidOption)
	case cfg.maxPending < 1:
		return nil, fmt.Errorf("%w: max pending %d must be positive", ErrInvalidOption, cfg.maxPending)
	case cfg.fullWait < 0:
		return nil, fmt.Errorf("%w: negative full wait %v", ErrInvalidOption, cfg.fullWait)
	}
	s := &Sender{
		system:   system,
		root:     system.Root,
		pchannel: pid,
		cfg:      cfg,
		slots:    make(map[string]int),
		gen:      1,
	}
	// Before the watch: a Terminated that answers it at once reads it.
	if l := directoryOf(system).lookupID(system, pid); l != nil {
		if l.pid == pid {
			s.listing = l // as lookup finds it
		}
		s.drops = &l.mailbox.drops
		s.drops.addSender(s)
	}
	s.replies, _ = system.ProcessRegistry.Add(replyProcess{s}, senderIDPrefix+system.ProcessRegistry.NextId())
	if !s.systemMessage(&actor.Watch{Watcher: s.replies}) {
		// Gone already: told as protoactor's dead-letter process tells
		// a watch it takes, without the dead letter it logs.
		replyProcess{s}.SendSystemMessage(s.replies, &actor.Terminated{Who: pid, Why: actor.TerminatedReason_NotFound})
	}
	return s, nil
}

// Update buffers checkpoint as vchannel's latest. It returns once the update
// is buffered (or shipped), not once applied: Flush says what the actor
// made of it. It blocks only while the buffer is full, up to WithFullWait.
// A name no Add takes (over persistence.MaxNameLen bytes, not UTF-8, or
// holding a NUL) names no vchannel: Flush reports it as any unknown one,
// messages.ErrVChannelNotFound.
//
// It is cheapest when the caller passes the same string for a vchannel
// each time (a name kept, not built per call): the Sender finds it by its
// address then, without hashing it. The Sender keeps the strings it is
// given, as a map does, so a name must not change: one made with
// unsafe.String over a buffer that the caller rewrites changes under the
// Sender, which then mixes up the two vchannels.
func (s *Sender) Update(vchannel string, checkpoint wal.MessageID) error {
	if vchannel == "" {
		return messages.ErrEmptyVChannel
	}
	if checkpoint == nil {
		return fmt.Errorf("%w: vchannel %s", messages.ErrNilCheckpoint, shorten.QuotedText(vchannel)) // as the actor says it
	}
	if err := wal.CheckPosition(checkpoint); err != nil {
		// Judged here, as the actor would: buffered, it could hide a
		// good update before it, or be hidden by one after it.
		return fmt.Errorf("vchannel %s: %w", shorten.QuotedText(vchannel), err)
	}
	if !wal.BuiltIn(checkpoint) {
		// So is an ID of a WAL registered outside package wal that does
		// not read back (wal.ErrCorruptID), or of no registered WAL
		// (wal.ErrWALMismatch), before the lock: its codec is a third
		// party's.
		if _, err := wal.Marshal(checkpoint); err != nil {
			return fmt.Errorf("vchannel %s: %w", shorten.QuotedText(vchannel), err)
		}
	}
	var deadline time.Time
	s.mu.Lock()
	for {
		if err := s.usable(); err != nil {
			s.mu.Unlock()
			return err
		}
		i, known := s.slotOf(vchannel)
		if known && s.entries[i].gen == s.gen {
			// The type of old was checked when it came in: equal types
			// make checkpoint of a registered WAL too.
			c := &s.pending[s.entries[i].pos]
			if reflect.TypeOf(c.Checkpoint) != reflect.TypeOf(checkpoint) {
				old := c.Checkpoint
				s.mu.Unlock()
				return fmt.Errorf("%w: vchannel %s: %s after %s", messages.ErrWALMismatch, shorten.QuotedText(vchannel), wal.String(checkpoint), wal.String(old))
			}
			if e := &s.entries[i]; e.dropped != nil {
				// The one waiting was made before a Drop of the
				// vchannel: this one is for what comes after, the
				// actor's to judge.
				e.dropped = nil
				s.marked--
				c.Checkpoint = checkpoint
				break
			}
			lower, err := below(vchannel, checkpoint, c.Checkpoint)
			if err != nil {
				s.mu.Unlock()
				return err
			}
			if lower {
				old := c.Checkpoint
				s.mu.Unlock()
				return fmt.Errorf("%w: vchannel %s: %s is below %s", messages.ErrCheckpointRollback, shorten.QuotedText(vchannel), wal.String(checkpoint), wal.String(old))
			}
			c.Checkpoint = checkpoint
			break
		}
		// A checkpoint already shipped is the actor's to judge: the
		// vchannel may have been dropped and added again lower since.
		if len(s.pending) < s.cfg.maxPending {
			if !known {
				i = len(s.entries)
				s.slots[vchannel] = i
				s.entries = append(s.entries, senderEntry{name: vchannel})
				s.remember(vchannel, i)
			}
			s.entries[i] = senderEntry{name: vchannel, pos: len(s.pending), gen: s.gen}
			s.pending = append(s.pending, messages.VChannelCheckpoint{VChannel: vchannel, Checkpoint: checkpoint})
			break
		}
		// Full: only the reply to the batch in flight makes room.
		if deadline.IsZero() {
			deadline = time.Now().Add(s.cfg.fullWait)
		}
		if !s.waitLocked(deadline) {
			s.mu.Unlock()
			return fmt.Errorf("%w: it holds as many vchannels as WithMaxPending allows (%d), and no room was made within %v", ErrSenderFull, s.cfg.maxPending, s.cfg.fullWait)
		}
	}
	if s.flying != nil {
		s.mu.Unlock()
		return nil
	}
	batch, tags := s.takeLocked()
	s.mu.Unlock()
	s.ship(batch, tags)
	return nil
}

// below reports whether checkpoint is below old, both IDs of one
// registered WAL. The ID type may be a third party's whose LT panics: the
// update is then rejected as corrupt (wal.ErrCorruptID), and the Sender,
// whose mutex the caller holds, carries on unchanged. The built-in IDs,
// whose LT cannot panic, skip the recover: it was a fifth to a third of
// an update.
func below(vchannel string, checkpoint, old wal.MessageID) (bool, error) {
	switch checkpoint.(type) {
	case wal.KafkaID, wal.RocksMQID, wal.PulsarID, wal.WoodpeckerID:
		return checkpoint.LT(old), nil
	}
	return belowGuarded(vchannel, checkpoint, old)
}

func belowGuarded(vchannel string, checkpoint, old wal.MessageID) (lower bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			lower, err = false, fmt.Errorf("%w: vchannel %s: %T.LT panicked: %s", wal.ErrCorruptID, shorten.QuotedText(vchannel), checkpoint, shorten.Value(r))
		}
	}()
	return checkpoint.LT(old), nil
}

// senderEntry is where a vchannel waits in pending, while gen is the
// Sender's.
type senderEntry struct {
	name string
	pos  int
	gen  uint64
	// dropped marks a waiting update made before a Drop of its vchannel
	// was posted (drops.go).
	dropped []*dropMark
}

// slotOf returns vchannel's index in entries, if it has one. It looks in
// recent first, where a hit is the same string the caller passed before:
// same bytes at the same address, and strings are immutable. Callers
// mostly keep their vchannel names and pass the same strings each time,
// and hashing the name in slots was over half of an update's cost. A
// name built anew for each call misses, and costs more than the hashing
// alone: the look-up in recent and the set it then rewrites, about 10 ns
// on the benchmark machine.
//
// No entry needs clearing: an entry of recent is only a guess, checked
// against entries, whose names are distinct.
func (s *Sender) slotOf(vchannel string) (int, bool) {
	if len(s.recent) != 0 {
		set := s.recentSet(vchannel)
		for _, i := range s.recent[set : set+2 : set+2] {
			if int(i) < len(s.entries) && sameString(s.entries[i].name, vchannel) {
				return int(i), true
			}
		}
	}
	i, ok := s.slots[vchannel]
	if ok {
		s.remember(vchannel, i)
	}
	return i, ok
}

// remember records that vchannel is at i in entries, first in its set,
// growing recent first to recentPerEntry places per entry.
func (s *Sender) remember(vchannel string, i int) {
	if i > math.MaxInt32 {
		return // found by its hash, as a name built per call is
	}
	if len(s.recent) < recentPerEntry*len(s.entries) {
		s.recentBits = bits.Len(uint(recentPerEntry*len(s.entries) - 1))
		s.recent = make([]int32, 1<<s.recentBits)
	}
	set := s.recentSet(vchannel)
	s.recent[set+1] = s.recent[set]
	s.recent[set] = int32(i)
}

// recentPerEntry sizes recent: with a caller moving its vchannels in
// turn, two names in one set each find the other there, and a third
// evicts one of them every time. Sets of two in eight places per entry
// leave that to about 3 % of the names, against 39 % for one place in
// two; a place is four bytes.
const recentPerEntry = 8

// recentSet is where vchannel's set starts in recent: the top bits of a
// Fibonacci hash of its bytes' address, rounded down to even.
func (s *Sender) recentSet(vchannel string) uint {
	return uint(uint64(uintptr(unsafe.Pointer(unsafe.StringData(vchannel))))*0x9E3779B97F4A7C15>>(64-s.recentBits)) & uint(len(s.recent)-2)
}

// sameString reports whether a and b are one string: the same bytes at
// the same address.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// progressLocked returns the channel that the next answer closes.
func (s *Sender) progressLocked() <-chan struct{} {
	if s.progress == nil {
		s.progress = make(chan struct{})
	}
	return s.progress
}

// wakeLocked wakes whoever waits for progress: an answer came, or the
// Sender closed.
func (s *Sender) wakeLocked() {
	if s.progress != nil {
		close(s.progress)
		s.progress = nil
	}
}

// waitLocked waits, with s.mu held and released meanwhile, for progress or
// the deadline; it reports whether progress came first.
func (s *Sender) waitLocked(deadline time.Time) bool {
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	progress := s.progressLocked()
	s.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	defer s.mu.Lock()
	select {
	case <-progress:
		return true
	case <-timer.C:
		return false
	}
}

func (s *Sender) usable() error {
	switch {
	case s.closed:
		return ErrSenderClosed
	case s.gone != nil:
		return s.goneLocked()
	}
	return nil
}

// goneLocked is the error of a Sender whose pchannel is gone: the first
// one says how many updates that left unapplied, buffered or in flight;
// the later ones, that an earlier error counted them, or that there were
// none, so that Close, after a producer's Update had the first, still
// tells a loss from none.
func (s *Sender) goneLocked() error {
	var counts []string
	if n := s.lost; n > 0 {
		counts = append(counts, fmt.Sprintf("%d buffered update(s) not applied", n))
	}
	if n := s.unanswered; n > 0 {
		// A batch that came back as a dead letter was refused: the
		// pchannel had stopped taking messages.
		if errors.Is(s.gone, actor.ErrDeadLetter) {
			counts = append(counts, fmt.Sprintf("%d update(s) sent and refused, not applied", n))
		} else {
			counts = append(counts, fmt.Sprintf("%d update(s) sent and not answered, which may or may not be applied", n))
		}
	}
	s.lost, s.unanswered = 0, 0
	switch {
	case counts != nil:
		return fmt.Errorf("%w: %s", s.gone, strings.Join(counts, "; "))
	case s.left > 0:
		return fmt.Errorf("%w: %d update(s) it left unapplied, or not known to be applied, counted in an earlier error", s.gone, s.left)
	}
	return fmt.Errorf("%w: it left no update of this Sender's unanswered", s.gone)
}

// Flush ships what is buffered and waits until the actor has answered every
// batch holding an update made before the call, or ctx ends
// (DefaultRequestTimeout passes when ctx has no deadline: an actor held
// up, by a Lossless subscriber that reads nothing say, is not waited for
// for good). It returns the errors received since the previous Flush (see
// Sender), with ctx's error if it ended first; after Close,
// ErrSenderClosed, and so does a Flush still waiting when a Close gives up
// waiting (its ctx ended) and closes. A nil ctx is an ErrNilContext.
func (s *Sender) Flush(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	_, hasDeadline := ctx.Deadline()
	done := ctx.Done()
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrSenderClosed
	}
	err := s.flush(ctx, done, hasDeadline)
	s.mu.Unlock()
	return err
}

// flush is Flush but for the check of closed, and returns with s.mu held:
// Close goes on from what it reported, before an answer can come between.
//
// done and hasDeadline are ctx's, read by the caller before it changed
// anything or took the lock: a context whose Done or Deadline panics must
// leave neither a half-closed Sender nor the lock held, which the
// pchannel's goroutine takes to answer a batch. ctx's Err is read with
// the lock let go.
func (s *Sender) flush(ctx context.Context, done <-chan struct{}, hasDeadline bool) error {
	s.mu.Lock()
	target := s.shipped
	if len(s.pending) > 0 {
		target++ // shipped when the batch in flight is answered
	}
	var expired <-chan time.Time
	if !hasDeadline && s.answered < target {
		timer := time.NewTimer(DefaultRequestTimeout)
		defer timer.Stop()
		expired = timer.C
	}
	for s.answered < target && s.gone == nil {
		if s.detached {
			return joinErrors(fmt.Errorf("%w before the pchannel answered: the updates in flight may or may not be applied",
				ErrSenderClosed), s.takeErrorsLocked())
		}
		progress := s.progressLocked()
		s.mu.Unlock()
		var ended error
		select {
		case <-progress:
		case <-done:
			ended = ctx.Err()
		case <-expired:
			ended = fmt.Errorf("lowwater: no answer within %v: %w", DefaultRequestTimeout, context.DeadlineExceeded)
		}
		s.mu.Lock()
		if ended != nil {
			// What came meanwhile is this call's to report: after a
			// Close, no later Flush could.
			return joinErrors(ended, s.takeErrorsLocked())
		}
	}
	return s.takeErrorsLocked()
}

// Close ships what is buffered, waits for the answers as Flush does, and
// stops the Sender's actor. Later calls fail with ErrSenderClosed, and so
// does an Update that waits for room as Close begins: its update is not
// taken, since what Close ships is what was buffered before it. The
// pchannel actor is not stopped: it is the caller's. If ctx ends first,
// nothing more is sent: the error wraps ErrUpdatesAbandoned, and says how
// many updates were never sent and how many were sent and not answered.
// A nil ctx is an ErrNilContext, and the Sender stays open.
func (s *Sender) Close(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext // and the Sender stays open
	}
	_, hasDeadline := ctx.Deadline()
	done := ctx.Done()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrSenderClosed
	}
	s.closed = true
	s.wakeLocked() // an Update waiting for room returns ErrSenderClosed
	s.mu.Unlock()
	// flush returns holding the lock: an end of the pchannel that came
	// after it reported, and before this took the lock again, went
	// unreported, its buffered updates counted by no call.
	err := s.flush(ctx, done, hasDeadline)
	// From here an answer that still comes ships nothing, and a Flush
	// still waiting (ctx ended this one's wait first) returns.
	s.detached = true
	s.wakeLocked()
	gone := s.gone != nil
	if !gone { // ErrPChannelGone says it then
		err = joinErrors(err, s.abandonedLocked())
	}
	// A batch still in flight keeps the reply process until its answer
	// or the pchannel's end (release): removed now, the answer would be
	// a dead letter, logged on the system's logger.
	waits := !gone && s.flying != nil
	s.mu.Unlock()
	if !waits {
		s.release()
	}
	return err
}

// release takes the reply process out of the registry and its watch off
// the pchannel, once: at Close, or after it, once the batch Close left
// in flight is answered or the pchannel is gone.
//
// A pchannel that refused a batch as stopped, and has not sent the
// Terminated its watch is owed, sends it as it stops: the process stays
// until it comes (SendSystemMessage), which would otherwise be a dead
// letter, logged on the system's logger. Only for a pchannel the
// directory knows, or one gone from the registry, whose watch protoactor
// answers: a refusal through an actor in between (a relay in front of a
// pchannel stopped) leaves the watched actor alive, and no Terminated
// comes.
func (s *Sender) release() {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return
	}
	s.released = true
	gone, owed := s.gone != nil, !s.terminated
	s.mu.Unlock()
	if s.drops != nil {
		s.drops.removeSender(s)
	}
	if gone && owed && s.terminatedComes() {
		return
	}
	if !gone || owed {
		s.systemMessage(&actor.Unwatch{Watcher: s.replies})
	}
	s.unregister()
}

// terminatedComes reports whether the watched actor, which refused a
// batch as stopped, will send its Terminated: it is a pchannel (one the
// directory knows), or gone from the registry.
func (s *Sender) terminatedComes() bool {
	if _, ok := s.system.ProcessRegistry.Get(s.pchannel); !ok {
		return true
	}
	return directoryOf(s.system).lookup(s.system, s.pchannel) != nil
}

// unregister takes the reply process out of the registry: release does,
// or the Terminated that release left it waiting for.
func (s *Sender) unregister() { s.system.ProcessRegistry.Remove(s.replies) }

// abandonedLocked says what a Close that gave up waiting leaves
// unconfirmed, and drops what was never sent: nil if nothing.
func (s *Sender) abandonedLocked() error {
	var left []string
	if n := len(s.pending); n > 0 {
		left = append(left, fmt.Sprintf("%d buffered update(s) never sent", n))
		clear(s.pending)
		s.pending = s.pending[:0]
		s.gen++
	}
	if n := len(s.flying); n > 0 {
		left = append(left, fmt.Sprintf("%d update(s) sent and not answered, which may or may not be applied", n))
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUpdatesAbandoned, strings.Join(left, "; "))
}

// systemMessage sends a Watch or Unwatch to the pchannel, as an actor's
// context would, unless it is gone from the registry (the message would
// be a dead letter), and reports whether it was sent.
func (s *Sender) systemMessage(m any) bool {
	proc, ok := s.system.ProcessRegistry.Get(s.pchannel)
	if ok {
		proc.SendSystemMessage(s.pchannel, m)
	}
	return ok
}

func (s *Sender) takeErrorsLocked() error {
	var errs []error
	if s.gone != nil {
		errs = append(errs, s.goneLocked())
	}
	if len(s.rejected) > 0 {
		errs = append(errs, &messages.BatchError{Rejected: s.rejected})
		s.rejected = nil
	}
	if s.dropped > 0 {
		errs = append(errs, fmt.Errorf("lowwater: %d more rejection(s) not kept", s.dropped))
		s.dropped = 0
	}
	return joinErrors(errs...)
}

// joinErrors is errors.Join on one line: what a Sender returns ends up in
// log lines, which errors.Join's newlines split. Nil errors are left out;
// a single one is returned as it is.
func joinErrors(errs ...error) error {
	var l errorList
	for _, err := range errs {
		if err != nil {
			l = append(l, err)
		}
	}
	switch len(l) {
	case 0:
		return nil
	case 1:
		return l[0]
	}
	return l
}

// errorList is what joinErrors returns for two errors or more.
type errorList []error

func (l errorList) Error() string {
	msgs := make([]string, len(l))
	for i, err := range l {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (l errorList) Unwrap() []error { return l }

// senderForgetAfter bounds the vchannels a Sender remembers between
// batches, beyond the maxPending that may wait: past it, a ship forgets
// them all (none waits then), so that vchannels dropped long ago are not
// kept for good.
const senderForgetAfter = 2 * DefaultMaxPending

// takeLocked takes the next batch, as the message to ship, and marks it in
// flight; tags are the marks of Drops on its updates, for ship.
func (s *Sender) takeLocked() (*messages.UpdateBatch, []staleTag) {
	batch := s.pending
	tags := s.takeMarksLocked(batch)
	s.pending, s.spare = s.spare[:0], nil
	s.gen++
	if len(s.entries) > max(senderForgetAfter, s.cfg.maxPending) {
		clear(s.slots)
		clear(s.entries)
		s.entries = s.entries[:0]
	}
	s.flying, s.flyingMsg = batch, &messages.UpdateBatch{Updates: batch}
	s.shipped++
	return s.flyingMsg, tags
}

// ship sends batch, taken by takeLocked, with its reply to s.replies,
// through system.Root and any sender middleware set on it.
//
// A pchannel whose stop has begun refuses it here, as its mailbox would
// (DeadLetterResponse): once it has left the registry, protoactor's
// dead-letter process would, and publish a DeadLetterEvent of the
// Sender's own batch. A stop that raced producers made one for each
// batch shipped between the pchannel leaving the registry and its
// Terminated reaching the Sender. A pchannel the directory knows says so
// with a flag (one load); of any other, the registry is asked, which
// over 10,000 pchannels cost a Sender per pchannel a third of its rate
// (a cold look-up per batch). One that leaves between the look-up and
// the send can still make that dead letter; its Terminated answers the
// batch.
func (s *Sender) ship(batch *messages.UpdateBatch, tags []staleTag) {
	if tags != nil {
		s.drops.tag(batch, tags) // before the pchannel can see it
	}
	var gone bool
	if s.listing != nil {
		gone = s.listing.stopping.Load()
	} else {
		_, ok := s.system.ProcessRegistry.Get(s.pchannel)
		gone = !ok
	}
	if gone {
		replyProcess{s}.SendUserMessage(s.replies, &actor.DeadLetterResponse{Target: s.pchannel})
		return
	}
	s.root.RequestWithCustomSender(s.pchannel, batch, s.replies)
}

// batchConsumed is a pchannel's answer to a Sender's UpdateBatch applied
// in full when nothing but the pchannel saw it: the Sender shipped it to
// the pchannel itself, no middleware or context decorator stands between
// them, and no event holds it (see pchannel.shippedStraight). It is sent
// to a Sender only, so no other requester meets it.
type batchConsumed struct{}

// senderIDPrefix begins the id of every Sender's reply process: a batch
// whose reply goes to one is a Sender's (see mailbox.PostUserMessage).
const senderIDPrefix = "lowwater-sender-"

// replyProcess receives the pchannel's replies. It is a bare Process, as
// protoactor's futures are, not an actor: an actor's mailbox cannot carry
// nil (see messages.Applied), the reply to a batch applied in full. Its
// methods run on the sending goroutine, so a pchannel's reply to a batch
// is handled before its Terminated.
type replyProcess struct{ s *Sender }

var _ actor.Process = replyProcess{}

func (p replyProcess) SendUserMessage(_ *actor.PID, message any) {
	detached := false
	switch m := actor.UnwrapEnvelopeMessage(message).(type) {
	case nil, *messages.Applied: // the latter relayed by an actor that asked
		detached = p.s.answer(nil, nil, false)
	case batchConsumed:
		detached = p.s.answer(nil, nil, true)
	case *messages.BatchError:
		detached = p.s.answer(m, nil, false)
	case *actor.DeadLetterResponse:
		detached = p.s.answer(nil, fmt.Errorf("%w: %w", ErrPChannelGone, actor.ErrDeadLetter), false)
	case error:
		// The pchannel panicked handling the batch (PChannelPanicError), or
		// something else answered: every update of the batch may be lost,
		// and each is named with the error.
		if be := p.s.failedBatch(m); be != nil {
			detached = p.s.answer(be, nil, false)
		}
	default:
		// An answer no pchannel gives, from an actor that is none: the
		// batch is named with it, as Request names an unexpected reply,
		// where Flush waited out its context.
		if be := p.s.failedBatch(fmt.Errorf("lowwater: unexpected reply %T to an UpdateBatch", m)); be != nil {
			detached = p.s.answer(be, nil, false)
		}
	}
	if detached {
		// The answer a Close that gave up left waiting: nothing more
		// comes that anyone waits for.
		p.s.release()
	}
}

// SendSystemMessage takes the pchannel's Terminated: the Sender is done
// for, and its process leaves the registry at once, so that a Sender
// dropped without Close is not kept for good by the registry.
func (p replyProcess) SendSystemMessage(_ *actor.PID, message any) {
	if _, ok := message.(*actor.Terminated); ok {
		p.s.mu.Lock()
		p.s.terminated = true
		waited := p.s.released // see release
		p.s.mu.Unlock()
		p.s.answer(nil, ErrPChannelGone, false)
		if waited {
			p.s.unregister()
			return
		}
		p.s.release()
	}
}

func (p replyProcess) Stop(*actor.PID) {}

// failedBatch names every update of the batch in flight with err: an
// answer that covers the whole batch, such as the pchannel's panic. It is
// nil for a panic while handling the batch answered before, after its
// reply: that batch had its answer, and the one in flight has yet to.
func (s *Sender) failedBatch(err error) *messages.BatchError {
	s.mu.Lock()
	defer s.mu.Unlock()
	var pe *PChannelPanicError
	if errors.As(err, &pe) && pe.message != nil && pe.message == s.answeredMsg {
		return nil
	}
	be := &messages.BatchError{Rejected: make([]messages.Rejection, 0, max(len(s.flying), 1))}
	for _, u := range s.flying {
		be.Rejected = append(be.Rejected, messages.Rejection{VChannel: u.VChannel, Err: err})
	}
	if len(be.Rejected) == 0 {
		be.Rejected = append(be.Rejected, messages.Rejection{Err: err})
	}
	return be
}

// answer ends the batch in flight; gone, when set, ends the Sender.
// consumed is the pchannel's word that nothing holds the batch any more:
// its buffer is taken back. It reports whether Close had stopped waiting.
func (s *Sender) answer(rejected *messages.BatchError, gone error, consumed bool) (detached bool) {
	s.mu.Lock()
	detached = s.detached
	if gone != nil && s.gone == nil {
		s.gone = gone
		if !s.detached { // else Close counted them (abandonedLocked)
			s.unanswered = len(s.flying)
		}
		if n := len(s.pending); n > 0 {
			s.lost = n
			clear(s.pending)
			s.pending = s.pending[:0]
			s.gen++
		}
		// Close, once it gave up, counted the batch in flight itself
		// (abandonedLocked): left still holds it, so that no later
		// error says none was left.
		s.left = s.lost + len(s.flying)
	}
	if rejected != nil {
		for _, r := range rejected.Rejected {
			if len(s.rejected) >= s.cfg.maxPending {
				s.dropped++
				continue
			}
			r.Index = len(s.rejected)
			s.rejected = append(s.rejected, r)
		}
	}
	var next, untag *messages.UpdateBatch
	var tags []staleTag
	if s.flying != nil {
		s.answered++
		untag = s.flyingMsg
		if consumed && rejected == nil && gone == nil {
			clear(s.flying)
			s.spare = s.flying[:0]
		}
		s.flying, s.answeredMsg, s.flyingMsg = nil, s.flyingMsg, nil
		if len(s.pending) > 0 && s.gone == nil && !s.detached {
			next, tags = s.takeLocked()
		}
	}
	s.wakeLocked()
	s.mu.Unlock()
	if untag != nil && s.drops != nil {
		s.drops.untag(untag) // if any batch of the pchannel's has tags
	}
	if next != nil {
		s.ship(next, tags)
	}
	return detached
}
