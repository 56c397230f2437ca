package cli_test

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
)

// TestEtcdNothingListens: an endpoint that refuses connections is said at
// once; etcd's client would retry it until --timeout, 30 s by default.
func TestEtcdNothingListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	out, code := run(t, "--catalog=etcd://"+addr+"/x", "--timeout", "1m", "list")
	require.Equal(t, cli.ExitFailed, code, out)
	require.Contains(t, out, "nothing listens at "+addr+" (connection refused)")
}

// A host with no address is said at once too. A .onion name is never
// looked up (RFC 7686): it has none, whatever the machine's DNS.
func TestEtcdNoSuchHost(t *testing.T) {
	out, code := run(t, "--catalog=etcd://no-such-host.onion:2379/x", "--timeout", "1m", "list")
	require.Equal(t, cli.ExitFailed, code, out)
	require.Contains(t, out, "nothing listens at no-such-host.onion:2379 (no suitable address found)")
}
