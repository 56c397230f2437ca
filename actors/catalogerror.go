package actors

import (
	"errors"
	"fmt"
	"reflect"
)

// ErrMalformedCatalogError matches the error of a catalog call that
// returned (or panicked with) an error lowwater could not safely look
// into: a typed nil (a nil *T returned as error, whose Unwrap or Error
// dereferences it), an Error or Unwrap that panics, or a chain of wrapped
// errors that does not end (an Unwrap that returns its own receiver). The
// call failed, and is retried on the backoff like any other failure; the
// catalog's own error is replaced, since errors.Is or errors.As on it, in
// lowwater or in a subscriber, would panic or never return.
var ErrMalformedCatalogError = errors.New("lowwater: catalog returned a malformed error")

// maxErrorChain bounds how many wrapped errors checkCatalogError walks: no
// real chain comes near it, and one that does not end is cut there.
const maxErrorChain = 64

// checkCatalogError returns err, or, if err is malformed (see
// ErrMalformedCatalogError), an error in its stead that is safe to
// inspect and says what was wrong. Every error a catalog hands lowwater
// goes through it before anything asks errors.Is of it.
func checkCatalogError(err error) error {
	if err == nil {
		return nil
	}
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

// malformed says what makes err unsafe to inspect, or "" if nothing does.
func malformed(err error) (why string) {
	defer func() {
		if r := recover(); r != nil {
			why = fmt.Sprintf("a method of it panicked: %v", r)
		}
	}()
	_ = err.Error()
	next := []error{err}
	for n := 0; len(next) > 0; n++ {
		if n == maxErrorChain {
			return fmt.Sprintf("its chain of wrapped errors goes on past %d", maxErrorChain)
		}
		e := next[0]
		next = next[1:]
		if v := reflect.ValueOf(e); v.Kind() == reflect.Pointer && v.IsNil() {
			return fmt.Sprintf("it holds a nil %T", e)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if inner := u.Unwrap(); inner != nil {
				next = append(next, inner)
			}
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if inner != nil {
					next = append(next, inner)
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
			msg = fmt.Sprintf("%T whose Error panicked: %v", err, r)
		}
	}()
	return err.Error()
}

// malformedError stands for a malformed catalog error.
type malformedError struct {
	msg string // the catalog error's message, if it had one
	why string
}

func (e *malformedError) Error() string {
	return fmt.Sprintf("%v: %q (%s)", ErrMalformedCatalogError, e.msg, e.why)
}

func (e *malformedError) Unwrap() error { return ErrMalformedCatalogError }
