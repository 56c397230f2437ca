package etcdcatalog

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ClientLogger returns lg for the client of a catalog (clientv3.Config's
// Logger), with clientv3's warning of a call cut short by its context
// ("retrying of unary invoker failed", code Canceled) lowered to Debug.
// The catalog sends a call with no answer again to the other members and
// cuts the copies left short once one answers (docs/etcd.md), and
// clientv3 warns of each: in trials, a node beginning to wait for 1,000
// pchannels, every member answering, cut short a median of 114 copies of
// its claims, and up to 1,634 (hedged). A deadline that
// passed (DeadlineExceeded) is still a warning, and every other entry is
// the wrapped core's to take or drop (its level, its sampling).
//
// Open does this to the logger it is given (or to clientv3's default); a
// client given to New logs as its owner set it up. ClientLogger(nil) is
// nil, for which clientv3 makes a default of its own.
func ClientLogger(lg *zap.Logger) *zap.Logger {
	if lg == nil {
		return nil // clientv3 makes its own then
	}
	return lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return cutShortAtDebug{c} }))
}

// cutShortMessage is what clientv3's retry interceptor logs of each call
// that failed, once per attempt.
const cutShortMessage = "retrying of unary invoker failed"

// cutShortAtDebug writes clientv3's warning of a call cut short at Debug.
type cutShortAtDebug struct{ zapcore.Core }

func (c cutShortAtDebug) With(fields []zapcore.Field) zapcore.Core {
	return cutShortAtDebug{c.Core.With(fields)}
}

// Check leaves every entry to the core it wraps, but clientv3's warning
// of a failed call, whose error only Write sees: that one is written
// through the cores that take it as it comes (at their levels, past their
// sampling), or, should its call have been cut short, through those that
// take it at Debug (lowered).
func (c cutShortAtDebug) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message != cutShortMessage || e.Level <= zapcore.DebugLevel {
		return c.Core.Check(e, ce)
	}
	taken := c.Core.Check(e, nil)
	if taken == nil {
		return ce
	}
	return ce.AddCore(e, lowered{c.Core, taken})
}

// lowered writes one warning of a failed call: taken is the wrapped core's
// check of it, which names the cores that take it (a Tee's writes to each
// of its cores, whatever their levels).
type lowered struct {
	zapcore.Core
	taken *zapcore.CheckedEntry
}

func (l lowered) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if !cutShort(fields) {
		l.taken.Write(fields...)
		return nil
	}
	e.Level = zapcore.DebugLevel
	if debug := l.Core.Check(e, nil); debug != nil {
		debug.Write(fields...)
	}
	return nil
}

func cutShort(fields []zapcore.Field) bool {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType {
			return status.Code(err) == codes.Canceled
		}
	}
	return false
}
