package etcdcatalog

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A try cut short by the call's end knows only that: the call's error
// says why the try before it failed (here, no leader), which it would
// have hidden.
func TestTheLastTryKeptIsOneThatKnowsWhy(t *testing.T) {
	c := &Catalog{ownClient: true, closing: context.Background()}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := catalogCall(c, ctx, func(ctx context.Context) (struct{}, error) {
		noLeader := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			return status.Error(codes.Unavailable, "etcdserver: no leader")
		}
		_ = keepLastTry(ctx, "/etcdserverpb.KV/Range", nil, nil, nil, noLeader)
		cut := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
			<-ctx.Done()
			return status.Error(codes.DeadlineExceeded, ctx.Err().Error())
		}
		return struct{}{}, keepLastTry(ctx, "/etcdserverpb.KV/Range", nil, nil, nil, cut)
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "no leader")
}
