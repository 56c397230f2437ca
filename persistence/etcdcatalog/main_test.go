package etcdcatalog_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
)

// The leader-stop test runs a 3-member cluster, whose peer HTTP connections
// end up to 5 s after the members stop; IgnorePeerConnections documents why
// and ignores those alone.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.IgnorePeerConnections()...) }
