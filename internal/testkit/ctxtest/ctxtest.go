// Package ctxtest gives tests contexts that end by themselves.
package ctxtest

import (
	"context"
	"time"
)

// Within returns a context whose deadline is d from now, for a call in a
// test that must not wait longer. Its resources are released when the
// deadline passes, so a test need not keep a cancel function; inside a
// testing/synctest bubble the deadline is in the bubble's fake time.
func Within(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	time.AfterFunc(d, cancel)
	return ctx
}
