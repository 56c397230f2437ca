package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// etcdURL starts an embedded etcd and returns a catalog URL on it with the
// prefix, and a catalog of the test's own on the same keys.
func etcdURL(t *testing.T, prefix string) (string, *etcdcatalog.Catalog) {
	t.Helper()
	var hosts []string
	eps := etcdtest.Start(t)
	for _, e := range eps {
		hosts = append(hosts, strings.TrimPrefix(e, "http://"))
	}
	cat, err := etcdcatalog.Open(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		etcdcatalog.WithPrefix(prefix))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	return "etcd://" + strings.Join(hosts, ",") + "/" + prefix, cat
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestMigrateBoltToEtcdAndBack dumps a bbolt catalog, restores it into
// etcd, and back into a new bbolt file: the checkpoints survive exactly.
func TestMigrateBoltToEtcdAndBack(t *testing.T) {
	url, cat := etcdURL(t, "cli")
	src := seedBolt(t, seed)
	file := filepath.Join(t.TempDir(), "dump.json")
	wantCode(t, on(t, "bolt:"+src, "dump", file), cli.ExitOK)

	wantCode(t, on(t, url, "restore", file), cli.ExitOK, "restored 3 checkpoints into etcd at")
	all, err := cat.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, seed, all)
	// The tool wrote each under an ownership of its own, and gave it back.
	for p := range seed {
		term, err := cat.OwnerTerm(ctxT(t), p)
		require.NoError(t, err)
		require.Zero(t, term, p)
	}
	wantCode(t, on(t, url, "list"), cli.ExitOK, "by-dev-rootcoord-dml_1  pulsar      pulsar:88:1402:0@1", "3 pchannels")

	back := filepath.Join(t.TempDir(), "back.json")
	wantCode(t, on(t, url, "dump", back), cli.ExitOK, "dumping 3 checkpoints")
	dst := filepath.Join(t.TempDir(), "back.db")
	wantCode(t, on(t, "bolt:"+dst, "restore", back), cli.ExitOK)
	require.Equal(t, seed, stored(t, dst))
}

// TestEtcdOwnerIsRespected: a running node owns a pchannel; every write to
// it that would change it is refused, dry or not, unless --force; other
// pchannels are writable.
func TestEtcdOwnerIsRespected(t *testing.T) {
	url, cat := etcdURL(t, "owned")
	for p, id := range seed {
		require.NoError(t, cat.Save(ctxT(t), p, id))
	}
	session, err := concurrency.NewSession(cat.Client(), concurrency.WithTTL(30))
	require.NoError(t, err)
	defer session.Close()
	const p = "by-dev-rootcoord-dml_0"
	node, err := cat.TryOwn(ctxT(t), p, session)
	require.NoError(t, err)
	defer node.Close()
	owned := "owned by a running node (term " + itoa(node.Term()) + ")"

	wantCode(t, on(t, url, "get", p), cli.ExitOK, "owner       term "+itoa(node.Term()))
	wantCode(t, on(t, url, "set", p, "kafka:2000"), cli.ExitRefused, owned, "--force")
	wantCode(t, on(t, url, "set", p, "kafka:2000", "--dry-run"), cli.ExitRefused, owned)
	wantCode(t, on(t, url, "delete", p), cli.ExitRefused, owned)
	dump := filepath.Join(t.TempDir(), "d.json")
	wantCode(t, on(t, "bolt:"+seedBolt(t, map[string]wal.MessageID{p: wal.KafkaID(3000), "other": wal.KafkaID(1)}), "dump", dump), cli.ExitOK)
	wantCode(t, on(t, url, "restore", dump), cli.ExitRefused, owned, "1 of 2 checkpoints refused; nothing written")
	// A write that changes nothing asks no owner, and its dry run says
	// the same: a script gating on the dry run gets the write's answer.
	wantCode(t, on(t, url, "set", p, "kafka:1200", "--dry-run"), cli.ExitOK, p+": would be unchanged at kafka:1200")
	wantCode(t, on(t, url, "set", p, "kafka:1200"), cli.ExitOK, p+": unchanged at kafka:1200")
	same := filepath.Join(t.TempDir(), "same.json")
	wantCode(t, on(t, url, "dump", same), cli.ExitOK)
	wantCode(t, on(t, url, "restore", same, "--dry-run"), cli.ExitOK, p+": would be unchanged at kafka:1200")
	wantCode(t, on(t, url, "restore", same), cli.ExitOK, "(0 written)")
	got, err := cat.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, seed, got, "nothing written while refused")

	// Another pchannel is free: written under the tool's own ownership.
	wantCode(t, on(t, url, "set", "by-dev-rootcoord-dml_2", "woodpecker:4:0"), cli.ExitOK, "raised")

	// --force writes around the owner, and says so.
	wantCode(t, on(t, url, "set", p, "kafka:2000", "--force"), cli.ExitOK, "warning: "+p+" is owned", "raised from kafka:1200 to kafka:2000")
	id, err := cat.Load(ctxT(t), p)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(2000), id)
	require.NoError(t, node.Err(), "the owner keeps its ownership")

	// Once the owner is gone, the tool's write is fenced by its own term.
	require.NoError(t, node.Close())
	wantCode(t, on(t, url, "set", p, "kafka:2500"), cli.ExitOK, "raised")
	wantCode(t, on(t, url, "list"), cli.ExitOK, "kafka:2500")
}

func TestEtcdVerifyAndDelete(t *testing.T) {
	url, cat := etcdURL(t, "verify")
	require.NoError(t, cat.Save(ctxT(t), "good", wal.KafkaID(1)))
	_, err := cat.Client().Put(ctxT(t), "verify/wal/bad/consume-checkpoint", "garbage")
	require.NoError(t, err)
	wantCode(t, on(t, url, "verify"), cli.ExitCorrupt, "CORRUPT  bad: record truncated", "2 records, 1 unreadable")
	wantCode(t, on(t, url, "delete", "bad"), cli.ExitOK, "bad: deleted a corrupt record")
	wantCode(t, on(t, url, "verify"), cli.ExitOK, "1 record, 0 unreadable")
	wantCode(t, on(t, url, "set", "good", "kafka:0"), cli.ExitRefused, "lowering needs --force", "(1 messages)")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
