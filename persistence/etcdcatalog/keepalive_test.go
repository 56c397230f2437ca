package etcdcatalog_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// A member that keeps its connections open and answers nothing is dropped
// by Open's keep-alive: a call there fails once the pings go unanswered,
// not at its deadline.
func TestFrozenMemberIsDropped(t *testing.T) {
	eps := etcdtest.Start(t)
	f := etcdtest.NewFreezer(t, strings.TrimPrefix(eps[0], "http://"))
	c := openCatalog(t, []string{f.Endpoint()}, nil)
	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(1)))

	f.Freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := c.Save(ctx, "p", wal.KafkaID(2))
	took := time.Since(start)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the call waited out its deadline: the frozen connection was never dropped")
	require.Less(t, took, etcdcatalog.DefaultKeepAliveTime+etcdcatalog.DefaultKeepAliveTimeout+3*time.Second)
	t.Logf("a save on a frozen member failed after %v: %v", took, err)
}

// A member whose first bytes come after more than a second (TLS on a
// loaded host, a distant member) is connected to: each attempt had a
// second, was cut, and was cut again at every retry, so that no call ever
// reached it.
func TestSlowToConnectMemberIsReached(t *testing.T) {
	eps := etcdtest.Start(t)
	f := etcdtest.NewFreezer(t, strings.TrimPrefix(eps[0], "http://"))
	f.Delay(2500 * time.Millisecond)
	c := openCatalog(t, []string{f.Endpoint()}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, c.Save(ctx, "p", wal.KafkaID(1)))
	require.Greater(t, time.Since(start), 2500*time.Millisecond, "the connection was not held")
	id, err := c.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(1), id)
}
