package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

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
