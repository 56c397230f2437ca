package actors

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence"
)

// ErrMalformedCatalogError matches the error of a catalog call that
// returned (or told, or panicked with) an error lowwater could not safely
// look into: one that holds a nil pointer (a nil *T returned as error, the
// commonest of Go's error bugs), whose Error, Unwrap, Is or As panics,
// whose chain of wrapped errors does not end (an Unwrap that returns its
// own receiver), or whose Is or As claims an error no catalog can hold
// (an Is that answers true whatever it is asked would pass for
// persistence.ErrFenced, and stop the pchannel as fenced). The call failed, and is retried on the backoff like any
// other failure; the catalog's error is replaced, since errors.Is or
// errors.As on it, in lowwater or in a subscriber, could panic or never
// return.
var ErrMalformedCatalogError = errors.New("lowwater: catalog returned a malformed error")

// Bounds of the walk over a catalog's error: no real error comes near
// them, and one that does not end is cut there.
const (
	maxErrorDepth = 64   // errors wrapped in one another
	maxErrorNodes = 1024 // errors in the whole tree (errors.Join)
)

// checkCatalogError returns err, or, if err is malformed (see
// ErrMalformedCatalogError), an error in its stead that is safe to
// inspect and says what was wrong. Every error a catalog hands lowwater
// goes through it before anything asks errors.Is of it. A nil error costs
// no call.
func checkCatalogError(err error) error {
	if err == nil {
		return nil
	}
	return checkNonNil(err)
}

func checkNonNil(err error) error {
	why := malformed(err)
	if why == "" {
		return err
	}
	return &malformedError{msg: messageOf(err), why: why}
}

// checkPanicValue is what a catalog panicked with, an error among them
// checked as checkCatalogError does: CatalogPanicError unwraps to it.
func checkPanicValue(r any) any {
	if err, ok := r.(error); ok {
		return checkCatalogError(err)
	}
	return r
}

// isTargets are what malformed asks each error's Is about: every error
// lowwater, or package metrics, asks errors.Is of a catalog's error for,
// so that an Is that panics for one of them only is caught here too, and
// an error that is no one's.
var isTargets = []error{
	errors.ErrUnsupported, context.Canceled, context.DeadlineExceeded,
	persistence.ErrCorruptRecord, persistence.ErrFenced, persistence.ErrStoredAhead, persistence.ErrClosed,
	ErrCatalogOverdue, errNoOnes,
}

// errNoOnes is an error no catalog's error can wrap: one whose Is
// matches it matches anything.
var errNoOnes = errors.New("lowwater: an error that is no one's")

// malformed says what makes err unsafe to inspect, or "" if nothing does.
// It calls Error on err, and Unwrap, Is and As on every error in its
// tree, as errors.Is and errors.As would for the targets lowwater asks
// about, under a recover.
func malformed(err error) (why string) {
	defer func() {
		if r := recover(); r != nil {
			why = "a method of it panicked: " + describe(r)
		}
	}()
	_ = err.Error()
	type node struct {
		err   error
		depth int
	}
	next := []node{{err, 1}}
	for n := 0; len(next) > 0; n++ {
		e := next[0]
		next = next[1:]
		switch {
		case e.depth > maxErrorDepth:
			return fmt.Sprintf("its errors are wrapped more than %d deep", maxErrorDepth)
		case n == maxErrorNodes:
			return fmt.Sprintf("it holds more than %d errors", maxErrorNodes)
		}
		if v := reflect.ValueOf(e.err); v.Kind() == reflect.Pointer && v.IsNil() {
			return fmt.Sprintf("it holds a nil %T", e.err)
		}
		if x, ok := e.err.(interface{ Is(error) bool }); ok {
			for _, target := range isTargets {
				if x.Is(target) && target == errNoOnes {
					return fmt.Sprintf("its %T's Is matches an error no catalog can hold, so it would pass for any", e.err)
				}
			}
		}
		if x, ok := e.err.(interface{ As(any) bool }); ok {
			var stored *persistence.StoredAheadError // as the persister asks
			_ = x.As(&stored)
			var probe *malformedError
			if x.As(&probe) {
				return fmt.Sprintf("its %T's As takes the form of an error no catalog can hold, so it would pass for any", e.err)
			}
		}
		switch u := e.err.(type) {
		case interface{ Unwrap() error }:
			if inner := u.Unwrap(); inner != nil {
				next = append(next, node{inner, e.depth + 1})
			}
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if inner != nil {
					next = append(next, node{inner, e.depth + 1})
				}
			}
		}
	}
	return ""
}

// messageOf is err's message, or what its Error panicked with.
func messageOf(err error) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprintf("%T whose Error panicked: %s", err, describe(r))
		}
	}()
	return err.Error()
}

// describe formats a value a catalog panicked with, which may itself
// panic when formatted (an Error that panics with its own receiver): its
// type then stands for it. It is cut and quoted as an ID's text is
// (shorten.Text): it goes into errors, events and log lines.
func describe(v any) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("a %T that cannot be formatted", v)
		}
	}()
	return shorten.Value(v)
}

// malformedError stands for a malformed catalog error.
type malformedError struct {
	msg string // the catalog error's message, if it had one
	why string
}

func (e *malformedError) Error() string {
	return fmt.Sprintf("%v: %s (%s)", ErrMalformedCatalogError, shorten.QuotedText(e.msg), e.why)
}

func (e *malformedError) Unwrap() error { return ErrMalformedCatalogError }

// answered is what lowwater classifies of a catalog call's error err:
// err, or nil if the catalog panicked. A panic is the catalog's bug,
// whatever it panicked with, never its verdict: one with
// persistence.ErrClosed, ErrFenced or a *persistence.StoredAheadError is a
// failure like any, retried, and not what that error returned would say
// (nothing saved again, the ownership lost, a value stored that may be
// none).
func answered(err error) error {
	var panicked *CatalogPanicError
	if errors.As(err, &panicked) {
		return nil
	}
	return err
}
