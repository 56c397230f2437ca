package actors

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// nilDerefError is a catalog's error type with the commonest of Go's
// error bugs: returned as a typed nil, its methods dereference it.
type nilDerefError struct{ inner error }

func (e *nilDerefError) Error() string { return "catalog: " + e.inner.Error() }
func (e *nilDerefError) Unwrap() error { return e.inner }

// nilSafeMessageError says its message as a typed nil too, and
// dereferences itself in Unwrap.
type nilSafeMessageError struct{ inner error }

func (e *nilSafeMessageError) Error() string { return "nil-safe" }
func (e *nilSafeMessageError) Unwrap() error { return e.inner }

// ownTailError unwraps to itself: errors.Is on it never returns.
type ownTailError struct{}

func (e *ownTailError) Error() string { return "round and round" }
func (e *ownTailError) Unwrap() error { return e }

// panickyUnwrapError is not nil, and its Unwrap panics all the same.
type panickyUnwrapError struct{}

func (panickyUnwrapError) Error() string { return "fine so far" }
func (panickyUnwrapError) Unwrap() error { panic("unwrap bug") }

// panickyMessageError panics when asked its message.
type panickyMessageError struct{}

func (panickyMessageError) Error() string { panic("message bug") }

// panickyIsError and panickyAsError panic when errors.Is, resp. errors.As,
// asks them.
type panickyIsError struct{}

func (panickyIsError) Error() string { return "is" }
func (panickyIsError) Is(error) bool { panic("is bug") }

// choosyIsError panics only when asked about errors.ErrUnsupported, as
// call.run asks of what StartSave returns.
type choosyIsError struct{}

func (choosyIsError) Error() string { return "choosy" }
func (choosyIsError) Is(target error) bool {
	if target == errors.ErrUnsupported {
		panic("is bug")
	}
	return false
}

type panickyAsError struct{}

func (panickyAsError) Error() string { return "as" }
func (panickyAsError) As(any) bool   { panic("as bug") }

// isEverythingError's Is answers true whatever it is asked: it would pass
// for persistence.ErrFenced and stop a pchannel as fenced.
type isEverythingError struct{}

func (isEverythingError) Error() string { return "everything" }
func (isEverythingError) Is(error) bool { return true }

// asEverythingError's As answers true whatever it is asked, and sets
// nothing: the persister would take a nil *persistence.StoredAheadError.
type asEverythingError struct{}

func (asEverythingError) Error() string { return "anything" }
func (asEverythingError) As(any) bool   { return true }

// selfPanicError panics with itself when asked its message: formatting
// what it panicked with panics again.
type selfPanicError struct{}

func (e *selfPanicError) Error() string { panic(e) }

// chain wraps err n times.
func chain(err error, n int) error {
	for range n {
		err = fmt.Errorf("wrapped: %w", err)
	}
	return err
}

func TestCheckCatalogError(t *testing.T) {
	require.NoError(t, checkCatalogError(nil))
	for _, fine := range []error{
		fs.ErrNotExist,
		chain(persistence.ErrFenced, 3),
		errors.Join(persistence.ErrFenced, context.Canceled),
		&nilDerefError{inner: context.DeadlineExceeded},
		chain(fs.ErrNotExist, maxErrorDepth-1),
		errors.Join(wide(70)...),
	} {
		require.Same(t, fine, checkCatalogError(fine), "%v is inspected as it is", fine)
	}
	for _, c := range []struct {
		err       error
		msg, why  string
		wrapsTail bool
	}{
		{err: (*nilDerefError)(nil), msg: "*actors.nilDerefError whose Error panicked", why: "a method of it panicked"},
		{err: chain((*nilDerefError)(nil), 2), msg: "wrapped: wrapped: ", why: "it holds a nil *actors.nilDerefError"},
		{err: errors.Join(fs.ErrNotExist, (*nilDerefError)(nil)), msg: "*errors.joinError whose Error panicked", why: "a method of it panicked"},
		{err: errors.Join(fs.ErrNotExist, (*nilSafeMessageError)(nil)), msg: `file does not exist\nnil-safe`, why: "it holds a nil *actors.nilSafeMessageError"},
		{err: &ownTailError{}, msg: "round and round", why: "wrapped more than 64 deep"},
		{err: chain(panickyUnwrapError{}, 1), msg: "wrapped: fine so far", why: "a method of it panicked: unwrap bug"},
		{err: panickyMessageError{}, msg: "actors.panickyMessageError whose Error panicked: message bug", why: "message bug"},
		{err: chain(fs.ErrNotExist, maxErrorDepth), msg: "wrapped: ", why: "wrapped more than 64 deep"},
		{err: errors.Join(wide(maxErrorNodes)...), why: "it holds more than 1024 errors"},
		{err: chain(panickyIsError{}, 2), msg: "wrapped: wrapped: is", why: "a method of it panicked: is bug"},
		{err: errors.Join(fs.ErrNotExist, panickyAsError{}), why: "a method of it panicked: as bug"},
		{err: chain(choosyIsError{}, 1), msg: "wrapped: choosy", why: "a method of it panicked: is bug"},
		{err: chain(isEverythingError{}, 1), msg: "wrapped: everything",
			why: "its actors.isEverythingError's Is matches an error no catalog can hold, so it would pass for any"},
		{err: errors.Join(fs.ErrNotExist, asEverythingError{}), msg: "anything",
			why: "its actors.asEverythingError's As takes the form of an error no catalog can hold, so it would pass for any"},
		{err: &selfPanicError{}, msg: "*actors.selfPanicError whose Error panicked: a *actors.selfPanicError that cannot be formatted",
			why: "a method of it panicked: a *actors.selfPanicError that cannot be formatted"},
	} {
		got := checkCatalogError(c.err)
		require.ErrorIs(t, got, ErrMalformedCatalogError)
		require.Contains(t, got.Error(), c.why)
		require.Contains(t, got.Error(), c.msg)
		require.False(t, errors.Is(got, fs.ErrNotExist), "nothing of the malformed chain is kept")
		require.Same(t, got, checkCatalogError(got), "a replacement is inspected as it is")
	}
	// A panic value that is a malformed error is replaced within the
	// CatalogPanicError, which errors.Is looks into.
	pe := &CatalogPanicError{Op: "Save", Value: checkPanicValue((*nilDerefError)(nil))}
	require.ErrorIs(t, pe, ErrCatalogPanicked)
	require.ErrorIs(t, pe, ErrMalformedCatalogError)
	require.Equal(t, "plain", checkPanicValue("plain"))
	// What a catalog panics with is described safely, whatever it is.
	require.Equal(t, "lowwater: catalog panicked in Save: a *actors.selfPanicError that cannot be formatted",
		(&CatalogPanicError{Op: "Save", Value: &selfPanicError{}}).Error())
}

// wide is n distinct plain errors.
func wide(n int) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = fmt.Errorf("error %d", i)
	}
	return errs
}

// malformingCatalog fails where (Load, Save, a panic in Save, StartSave's
// own return, StartSave's done) with a malformed error from mk, until
// healed. With a StartSave, it starts saves on a goroutine of its own.
type malformingCatalog struct {
	*persistence.Memory
	where  string
	mk     func() error
	healed atomic.Bool
}

func (c *malformingCatalog) failing(where string) bool { return c.where == where && !c.healed.Load() }

func (c *malformingCatalog) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if c.failing("Load") {
		return nil, c.mk()
	}
	return c.Memory.Load(ctx, pchannel)
}

func (c *malformingCatalog) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	switch {
	case c.failing("Save"):
		return c.mk()
	case c.failing("panic"):
		panic(c.mk())
	}
	return c.Memory.Save(ctx, pchannel, v)
}

type startingMalformer struct{ *malformingCatalog }

func (c startingMalformer) StartSave(ctx context.Context, pchannel string, v wal.MessageID, done func(error)) error {
	switch {
	case c.failing("StartSave"):
		return c.mk()
	case c.failing("done"):
		go done(c.mk())
		return nil
	}
	go func() { done(c.Memory.Save(ctx, pchannel, v)) }()
	return nil
}

// A catalog whose error cannot be inspected safely (a typed nil whose
// methods dereference it, an Unwrap that returns its own receiver) fails
// the call it returned from, wherever that is, and nothing else: the
// failure is published with ErrMalformedCatalogError and retried, the
// persister does not crash over it, and once the catalog heals the
// pchannel recovers, saves and stops gracefully. Before, errors.Is on such
// an error panicked a pool goroutine outside every recover (the process
// died), crashed the pchannel in recovery or the persister, or never
// returned.
func TestMalformedCatalogErrorsFailTheCall(t *testing.T) {
	for _, bad := range []struct {
		name string
		mk   func() error
	}{
		{"typed nil", func() error { return (*nilDerefError)(nil) }},
		{"own tail", func() error { return &ownTailError{} }},
		{"panicky Is", func() error { return panickyIsError{} }},
		{"choosy Is", func() error { return choosyIsError{} }},
		{"Is true to all", func() error { return isEverythingError{} }},
		{"As true to all", func() error { return asEverythingError{} }},
	} {
		for _, where := range []string{"Load", "Save", "panic", "StartSave", "done"} {
			t.Run(bad.name+"/"+where, func(t *testing.T) {
				c := &malformingCatalog{Memory: persistence.NewMemory(), where: where, mk: bad.mk}
				var catalog persistence.Catalog = c
				if where == "StartSave" || where == "done" {
					catalog = startingMalformer{c}
				}
				system := quietSystem(t)
				evs := make(chan messages.Event, 1024)
				sub := system.EventStream.Subscribe(func(ev any) {
					if e, ok := ev.(messages.Event); ok {
						select {
						case evs <- e:
						default:
						}
					}
				})
				t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
				next := func(want func(messages.Event) bool) messages.Event {
					t.Helper()
					deadline := time.After(10 * time.Second)
					for {
						select {
						case ev := <-evs:
							if _, ok := ev.(*messages.PersisterRestarted); ok {
								t.Fatalf("the persister crashed: %+v", ev)
							}
							if want(ev) {
								return ev
							}
						case <-deadline:
							t.Fatal("no such event within 10 s")
						}
					}
				}
				props, err := NewProps("p", wal.Kafka, catalog, WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(1)}),
					WithBackoff(Backoff{Initial: time.Millisecond, Max: 10 * time.Millisecond, Multiplier: 2}))
				require.NoError(t, err)
				pid := system.Root.Spawn(props)

				var failure error
				if where == "Load" {
					ev := next(func(ev messages.Event) bool { _, ok := ev.(*messages.RecoveryFailed); return ok })
					failure = ev.(*messages.RecoveryFailed).Err
					c.healed.Store(true)
					next(func(ev messages.Event) bool { _, ok := ev.(*messages.Recovered); return ok })
				} else {
					next(func(ev messages.Event) bool { _, ok := ev.(*messages.Recovered); return ok })
					require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: wal.KafkaID(5)}))
					ev := next(func(ev messages.Event) bool { _, ok := ev.(*messages.PersistFailed); return ok })
					failure = ev.(*messages.PersistFailed).Err
					c.healed.Store(true)
				}
				require.ErrorIs(t, failure, ErrMalformedCatalogError)
				if where == "panic" {
					require.ErrorIs(t, failure, ErrCatalogPanicked)
				}
				require.False(t, strings.Contains(failure.Error(), "PANIC="), failure.Error())
				persisted := next(func(ev messages.Event) bool {
					p, ok := ev.(*messages.CheckpointPersisted)
					return ok && p.Value == wal.KafkaID(map[bool]int64{true: 1, false: 5}[where == "Load"])
				})
				require.NotNil(t, persisted)
				require.NoError(t, system.Root.PoisonFuture(pid).Wait())
				stopped := next(func(ev messages.Event) bool { _, ok := ev.(*messages.Stopped); return ok }).(*messages.Stopped)
				require.True(t, stopped.Graceful, "%+v", stopped)
			})
		}
	}
}

// The cause of an ownership's end is checked as a catalog's error: it is
// published (OwnershipLost.Cause, Stopped.Reason), and errors.Is is asked
// of it.
func TestMalformedOwnershipCause(t *testing.T) {
	for _, before := range []bool{true, false} {
		t.Run(fmt.Sprintf("ended before the spawn: %v", before), func(t *testing.T) {
			system := quietSystem(t)
			lost := make(chan *messages.OwnershipLost, 1)
			sub := system.EventStream.Subscribe(func(ev any) {
				if l, ok := ev.(*messages.OwnershipLost); ok {
					lost <- l
				}
			})
			t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
			stopped := stoppedOf(t, system)
			owned, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if before {
				cancel((*nilDerefError)(nil))
			}
			props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithOwnership(owned),
				WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(1)}))
			require.NoError(t, err)
			system.Root.Spawn(props)
			if !before {
				cancel((*nilDerefError)(nil))
			}
			select {
			case l := <-lost:
				require.ErrorIs(t, l.Cause, ErrMalformedCatalogError)
			case <-time.After(10 * time.Second):
				t.Fatal("no OwnershipLost within 10 s")
			}
			// A Stopped names the cause when something was left unsaved:
			// always when the ownership ended before the first save.
			reason := stopped().Reason
			if before || reason != nil {
				require.ErrorIs(t, reason, ErrMalformedCatalogError)
			}
		})
	}
}
