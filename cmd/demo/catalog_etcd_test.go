package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
)

// TestRunOnEtcd runs the demo on a real embedded etcd: the same checks
// pass, and the restart recovers from what etcd holds.
func TestRunOnEtcd(t *testing.T) {
	var hosts []string
	for _, e := range etcdtest.Start(t) {
		hosts = append(hosts, strings.TrimPrefix(e, "http://"))
	}
	spec := "etcd://" + strings.Join(hosts, ",") + "/demo-test"
	var out, stderr bytes.Buffer
	code := run(context.Background(), []string{"--duration=1s", "--seed=3", "--catalog=" + spec}, &out, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), stderr.String())
	}
	text := out.String()
	if !strings.Contains(text, `etcd at `) || !strings.Contains(text, "\nPASS in ") {
		t.Fatalf("no etcd header or no PASS:\n%s", text)
	}
	running, restart, _ := strings.Cut(text, "\n== restart")
	last := lastPersisted(running)
	starts := recoveredStarts(t, restart)
	if len(starts) != 3 {
		t.Fatalf("%d recovered pchannels, want 3:\n%s", len(starts), text)
	}
	for name, start := range starts {
		if start != last[name] {
			t.Errorf("%s recovered start %s, last persisted event %s", name, start, last[name])
		}
	}
}

func TestEtcdSpec(t *testing.T) {
	u, err := parseCatalog("etcd://a:1,b:2/p")
	if err != nil {
		t.Fatal(err)
	}
	s, err := openEtcdStore(u, config{})
	if err != nil {
		t.Fatal(err)
	}
	e := s.(*etcdStore)
	if strings.Join(e.endpoints, " ") != "a:1 b:2" || e.prefix != "p" {
		t.Fatalf("parsed %+v", e)
	}
	if _, err := parseCatalog("etcd:///p"); err == nil {
		t.Fatal("no endpoint accepted")
	}
}

// TestEtcdNothingListens: an etcd endpoint that refuses connections is a
// setup failure said at once, not after the client's 10 s.
func TestEtcdNothingListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	code := run(context.Background(), []string{"--duration=1s", "--catalog=etcd://" + addr + "/x"}, &out, &stderr)
	if want := "nothing listens at " + addr + " (connection refused)"; code != exitSetup || !strings.Contains(stderr.String(), want) {
		t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), exitSetup, want)
	}
}

// TestRunOnEtcdOverTLS runs the demo on an etcd that serves clients over
// TLS only, asks them for a certificate and has authentication on: the
// demo reaches it with the lowwater tool's flags and environment, finds
// out why it cannot without them, and refuses settings that cannot work.
func TestRunOnEtcdOverTLS(t *testing.T) {
	eps, files := etcdtest.StartTLS(t)
	var hosts []string
	for _, e := range eps {
		hosts = append(hosts, strings.TrimPrefix(e, "https://"))
	}
	secure := etcdaccess.Access{CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key}
	admin := clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	require.NoError(t, secure.Apply(&admin))
	c, err := clientv3.New(admin)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = c.UserAdd(ctx, "root", "s3cret")
	require.NoError(t, err)
	_, err = c.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = c.AuthEnable(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Close())

	t.Setenv(etcdaccess.EnvPassword, "s3cret")
	spec := "--catalog=etcd://" + strings.Join(hosts, ",") + "/demo-tls"
	tlsFlags := []string{"--etcd-cacert", files.CA, "--etcd-cert", files.Cert, "--etcd-key", files.Key}
	var out, stderr bytes.Buffer
	args := append([]string{"--duration=1s", "--seed=3", spec, "--etcd-user", "root"}, tlsFlags...)
	if code := run(context.Background(), args, &out, &stderr); code != exitOK || !strings.Contains(out.String(), "\nPASS in ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), stderr.String())
	}

	// Without TLS, the client would say only that its deadline passed.
	s, err := openEtcdStore(catalogurl.URL{Kind: catalogurl.Etcd, Endpoints: hosts, Prefix: "demo-tls"}, config{})
	require.NoError(t, err)
	timedOut := fmt.Errorf("etcdcatalog: load all: %w", context.DeadlineExceeded)
	require.EqualError(t, explain(s, timedOut),
		"etcdcatalog: load all: context deadline exceeded; "+hosts[0]+" speaks TLS: give --etcd-cacert (and --etcd-cert, --etcd-key if it asks clients for a certificate)")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{spec, "--etcd-cert", files.Cert}, "--etcd-cert and --etcd-key ($LOWWATER_ETCD_CERT, $LOWWATER_ETCD_KEY) go together"},
		{[]string{spec}, "$LOWWATER_ETCD_PASSWORD is set, but no user: give --etcd-user (or $LOWWATER_ETCD_USER)"},
		{[]string{"--catalog=memory", "--etcd-cacert", files.CA}, "--etcd-cacert is for an etcd catalog, not in memory"},
	} {
		out.Reset()
		stderr.Reset()
		if code := run(context.Background(), c.args, &out, &stderr); code != exitSetup || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr.String(), exitSetup, c.want)
		}
	}
}
