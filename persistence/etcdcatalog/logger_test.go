package etcdcatalog_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// cutShort is what clientv3's retry interceptor logs of a call that failed.
const cutShort = "retrying of unary invoker failed"

func TestClientLoggerLowersCallsCutShortToDebug(t *testing.T) {
	for _, level := range []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel} {
		core, logs := observer.New(level)
		lg := etcdcatalog.ClientLogger(zap.New(core)).With(zap.String("target", "t"))
		lg.Warn(cutShort, zap.Error(status.Error(codes.Canceled, "context canceled")))
		lg.Warn(cutShort, zap.Error(status.Error(codes.DeadlineExceeded, "context deadline exceeded")))
		lg.Warn(cutShort, zap.Error(status.Error(codes.Unavailable, "connection refused")))
		lg.Warn("another warning", zap.Error(status.Error(codes.Canceled, "context canceled")))
		lg.Debug(cutShort, zap.Error(status.Error(codes.Canceled, "context canceled")))

		type line struct {
			level zapcore.Level
			msg   string
			err   string
		}
		var got []line
		for _, e := range logs.All() {
			require.Equal(t, "t", e.ContextMap()["target"], "fields added with With are kept")
			got = append(got, line{e.Level, e.Message, fmt.Sprint(e.ContextMap()["error"])})
		}
		want := []line{
			{zapcore.WarnLevel, cutShort, "rpc error: code = DeadlineExceeded desc = context deadline exceeded"},
			{zapcore.WarnLevel, cutShort, "rpc error: code = Unavailable desc = connection refused"},
			{zapcore.WarnLevel, "another warning", "rpc error: code = Canceled desc = context canceled"},
		}
		if level == zapcore.DebugLevel {
			canceled := line{zapcore.DebugLevel, cutShort, "rpc error: code = Canceled desc = context canceled"}
			want = []line{canceled, want[0], want[1], want[2], canceled}
		}
		require.Equal(t, want, got, "at %v", level)
	}
}

// The wrapped core still decides what it takes: a sampling one (zap's
// production loggers sample) drops what it would drop without the wrapper,
// and the Debug lines it is not asked to write.
func TestClientLoggerKeepsTheSamplingOfTheCoreItWraps(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	sampled := zapcore.NewSamplerWithOptions(core, time.Hour, 1, 0) // the first of each level and message
	lg := etcdcatalog.ClientLogger(zap.New(sampled))
	for range 3 {
		lg.Warn("another warning")
		lg.Warn(cutShort, zap.Error(status.Error(codes.DeadlineExceeded, "context deadline exceeded")))
		lg.Debug("retrying of unary invoker")
	}
	lg.Warn(cutShort, zap.Error(status.Error(codes.Canceled, "context canceled")))
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Level.String()+" "+e.Message)
	}
	require.Equal(t, []string{"warn another warning", "warn " + cutShort, "debug retrying of unary invoker"}, got)
}

// Each core of a Tee writes what its own level takes, the lowered lines
// too: the Tee writes whatever it is given to each of its cores.
func TestClientLoggerWritesThroughTheCoresThatTakeEachLine(t *testing.T) {
	debugCore, debugLogs := observer.New(zapcore.DebugLevel)
	warnCore, warnLogs := observer.New(zapcore.WarnLevel)
	errorCore, errorLogs := observer.New(zapcore.ErrorLevel)
	lg := etcdcatalog.ClientLogger(zap.New(zapcore.NewTee(debugCore, warnCore, errorCore)))
	lg.Warn(cutShort, zap.Error(status.Error(codes.Canceled, "context canceled")))
	lg.Warn(cutShort, zap.Error(status.Error(codes.DeadlineExceeded, "context deadline exceeded")))
	levels := func(logs *observer.ObservedLogs) (got []string) {
		for _, e := range logs.All() {
			got = append(got, e.Level.String())
		}
		return got
	}
	require.Equal(t, []string{"debug", "warn"}, levels(debugLogs))
	require.Equal(t, []string{"warn"}, levels(warnLogs))
	require.Empty(t, levels(errorLogs))
	require.Nil(t, etcdcatalog.ClientLogger(nil))
}

// TestCopiesCutShortAreNoWarning saves on a client of three members one of
// which answers nothing: each save the client sent there is sent again,
// and the copy left there is cut short once another answers. clientv3
// warns of each such call, as a client given to New still does; through
// Open's client, those lines come at Debug.
func TestCopiesCutShortAreNoWarning(t *testing.T) {
	const saves = 30
	// Each client reaches the member to freeze through a proxy of its
	// own, which tells when the client's connection there is up.
	frozen, others := clusterWithAFreezer(t)
	frozenToo := etcdtest.NewFreezer(t, frozen.Target())

	opened, openedLogs := observer.New(zapcore.DebugLevel)
	cfg := clientConfig(append(others, frozen.Endpoint()), nil)
	cfg.Logger = zap.New(opened)
	viaOpen, err := etcdcatalog.Open(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, viaOpen.Close()) })

	given, givenLogs := observer.New(zapcore.DebugLevel)
	cfg = clientConfig(append(others, frozenToo.Endpoint()), nil)
	cfg.Logger = zap.New(given)
	cli, err := clientv3.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cli.Close()) })
	viaNew, err := etcdcatalog.New(cli)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, viaNew.Close()) })

	// Each client saves until one of its saves went through the member
	// to freeze: a client whose connection there was not yet up when it
	// froze would send it nothing (a run saw none of 30 saves go there).
	warm := 0
	for c, f := range map[*etcdcatalog.Catalog]*etcdtest.Freezer{viaOpen: frozen, viaNew: frozenToo} {
		for i := 1; ; i++ {
			connected := f.Moved() // its handshake, at the least
			warm++
			require.NoError(t, c.Save(ctxT(t), "warm", wal.KafkaID(warm)))
			if connected > 0 && f.Moved() > connected {
				break
			}
			require.Less(t, i, 100, "no save went through the member to freeze")
		}
	}
	frozen.Freeze()
	frozenToo.Freeze()
	for i := range saves {
		for _, c := range []*etcdcatalog.Catalog{viaOpen, viaNew} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			require.NoError(t, c.Save(ctx, fmt.Sprintf("p%02d", i), wal.KafkaID(1)))
			cancel()
		}
	}
	debug, warn := cutShortByLevel(openedLogs)
	t.Logf("Open's client, %d saves: %d copies cut short logged at Debug", saves, debug)
	require.Zero(t, warn, "copies cut short logged above Debug")
	require.Positive(t, debug, "no save was sent to the frozen member, one in three of %d", saves)
	_, warn = cutShortByLevel(givenLogs)
	require.Positive(t, warn, "New's client")
}

// cutShortByLevel counts clientv3's lines of calls cut short (Canceled)
// at Debug, and above it.
func cutShortByLevel(logs *observer.ObservedLogs) (debug, above int) {
	for _, e := range logs.FilterMessage(cutShort).All() {
		if !strings.Contains(fmt.Sprint(e.ContextMap()["error"]), "code = Canceled") {
			continue
		}
		if e.Level == zapcore.DebugLevel {
			debug++
		} else {
			above++
		}
	}
	return debug, above
}
