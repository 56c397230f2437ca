package bench

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
)

// BenchmarkEtcdSaves runs a 3-member cluster, whose peer connections
// outlive it by a few seconds (see etcdtest.IgnorePeerConnections).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnorePeerConnections()...) }
