//go:build soak

package etcd_test

import (
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
)

// The longer variants, for `go test -tags soak ./tests/etcd/` (about 2 min).

// TestSoakEtcdKilledOneMinute keeps etcd down long enough for the backoff
// to reach its cap, and kills it rather than stopping it.
func TestSoakEtcdKilledOneMinute(t *testing.T) {
	testOutage(t, time.Minute, (*etcdtest.Server).Kill)
}

// TestSoakClusterLeaderGracefulStop stops the leader gracefully: it hands
// its leadership over first.
func TestSoakClusterLeaderGracefulStop(t *testing.T) {
	testLeaderStop(t, (*etcdtest.Server).Stop, 200)
}

func TestSoakClusterLeaderKill(t *testing.T) {
	testLeaderStop(t, (*etcdtest.Server).Kill, 200)
}
