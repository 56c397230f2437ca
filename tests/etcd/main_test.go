// Package etcd_test drives pchannel actors against real etcd servers started
// inside the test (internal/testkit/etcdtest): ownership lost and taken over, etcd
// down and back, a thousand pchannels recovered by one LoadAll, and a leader
// stop in a 3-member cluster. Everything listens on 127.0.0.1 with ports the
// OS chose and keeps its data in t.TempDir().
//
// The longer variants build with the soak tag (go test -tags soak).
package etcd_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
)

// TestClusterLeaderStop runs a 3-member cluster, whose peer HTTP connections
// outlive the members by up to 5 s; IgnorePeerConnections documents why and
// ignores those alone (lowwater itself uses no net/http).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnorePeerConnections()...) }
