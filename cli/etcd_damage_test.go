package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// onDamagedEtcd starts an etcd and returns the --catalog flag of the
// catalog under prefix "cli" on it, and a client to damage its keys with
// as a hand or another tool would.
func onDamagedEtcd(t *testing.T) (flag string, client *clientv3.Client) {
	t.Helper()
	eps := etcdtest.Start(t)
	client, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, client.Close()) })
	return "--catalog=etcd://" + strings.TrimPrefix(eps[0], "http://") + "/cli", client
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A record under the empty pchannel name, at cli/wal//consume-checkpoint,
// was in no command's sight: list and verify passed it over, and delete
// --quoted '""' was a bad command line. It is a name no node can use, as
// verify says of the others, and delete --quoted '""' removes it.
func TestEtcdRecordUnderTheEmptyName(t *testing.T) {
	catalog, client := onDamagedEtcd(t)
	out, code := run(t, catalog, "set", "good", "kafka:1")
	require.Equal(t, cli.ExitOK, code, out)
	raw, err := persistence.EncodeRecord("", persistence.Record{Checkpoint: wal.KafkaID(7)})
	require.NoError(t, err)
	const key = "cli/wal//consume-checkpoint"
	_, err = client.Put(ctxT(t), key, string(raw))
	require.NoError(t, err)

	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Equal(t, `BAD NAME  "": persistence: invalid argument: empty pchannel name
2 records, 1 unreadable
lowwater: 1 unreadable record
  BAD NAME: no node can use it: 'delete --quoted NAME', NAME quoted as shown here
`, out)
	out, code = run(t, catalog, "list")
	require.Equal(t, cli.ExitOK, code, out)
	lines := strings.Split(out, "\n")
	require.Equal(t, []string{"PCHANNEL  WAL    CHECKPOINT  TERM  VERSION", `""        kafka  BAD NAME    0     2`},
		lines[:2], out)
	require.Equal(t, "2 pchannels, 1 unreadable (run verify)", lines[3], out)
	out, code = run(t, catalog, "list", "--json")
	require.Equal(t, cli.ExitOK, code, out)
	var listed []struct{ PChannel, Quoted, Error string }
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed, 2)
	require.Equal(t, struct{ PChannel, Quoted, Error string }{"", `""`,
		"persistence: invalid argument: empty pchannel name"}, listed[0])
	out, code = run(t, catalog, "get", "--quoted", `""`)
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Contains(t, out, "pchannel    \"\"\nwal         kafka\ncheckpoint  BAD NAME: ")

	// Without --quoted the empty name is still a bad command line.
	out, code = run(t, catalog, "delete", "")
	require.Equal(t, cli.ExitUsage, code, out)
	out, code = run(t, catalog, "delete", "--quoted", `""`, "--dry-run")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, `"": would delete kafka:7`+"\n", out)
	out, code = run(t, catalog, "delete", "--quoted", `""`)
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, `"": deleted kafka:7`+"\n", out)
	left, err := client.Get(ctxT(t), "cli/", clientv3.WithPrefix())
	require.NoError(t, err)
	var keys []string
	for _, kv := range left.Kvs {
		keys = append(keys, string(kv.Key))
	}
	// No owner key left either: the tool's write of good released it, and
	// left the release's mark.
	require.Equal(t, []string{"cli/wal/good/consume-checkpoint", "cli/wal/good/released"}, keys)
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, "1 record, 0 unreadable\n", out)
	out, code = run(t, catalog, "delete", "--quoted", `""`)
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, `"": nothing stored`+"\n", out)
}

// An owner key with no lease (put by hand, or left by another tool) read
// as a running node's for good: get said a node owns it, and a write was
// refused as owned, with no word that the key never expires, nor that it
// keeps every node off the pchannel, nor of what removes it. Now get,
// verify and the refusals say so; --force still writes around it, and
// release removes it, never a node's.
func TestEtcdOwnerKeyWithNoLease(t *testing.T) {
	catalog, client := onDamagedEtcd(t)
	out, code := run(t, catalog, "set", "p", "kafka:100")
	require.Equal(t, cli.ExitOK, code, out)
	put, err := client.Put(ctxT(t), "cli/wal/p/owner", "by hand")
	require.NoError(t, err)
	term := put.Header.Revision
	leaseless := fmt.Sprintf("its owner key (term %d) has no lease: put by hand or by another tool, not by a node, "+
		"it never expires, and no node can own p until 'release p' removes it", term)

	out, code = run(t, catalog, "get", "p")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("owner       term %d, no lease: not a node's, and it never expires\n"+
		"            (no node can own p until 'release p' removes it)\n", term))
	require.NotContains(t, out, "a node owns it")
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Equal(t, fmt.Sprintf(`NO LEASE  p: its owner key (term %d) has no lease: it never expires
1 record, 0 unreadable
lowwater: 1 owner key with no lease
  NO LEASE: put by hand or by another tool, not by a node: it keeps every node off the pchannel for good; 'release PCHANNEL', or for a name shown quoted, 'release --quoted NAME' as shown here
`, term), out)
	for _, args := range [][]string{
		{"set", "p", "kafka:200"}, {"set", "p", "kafka:200", "--dry-run"}, {"delete", "p"}, {"delete", "p", "--dry-run"},
	} {
		out, code = run(t, append([]string{catalog}, args...)...)
		require.Equal(t, cli.ExitRefused, code, "%v: %s", args, out)
		require.Equal(t, "lowwater: p: "+leaseless+"; --force writes around it\n", out, args)
	}
	stdout, stderr, code := runSplit(t, catalog, "set", "p", "kafka:200", "--force", "--dry-run")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "warning: p: "+leaseless+"; it would be written anyway (--force)\n", stderr)
	require.Equal(t, "p: would raise from kafka:100 to kafka:200\n", stdout)
	stdout, stderr, code = runSplit(t, catalog, "set", "p", "kafka:200", "--force")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "warning: p: "+leaseless+"; writing anyway (--force)\n", stderr)
	require.Equal(t, "p: raised from kafka:100 to kafka:200\n", stdout)
	requireOwnerKey(t, client, "p", term, 0) // written around, not removed

	out, code = run(t, catalog, "release", "p", "--dry-run")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, fmt.Sprintf("p: would remove its owner key (term %d), which has no lease\n", term), out)
	requireOwnerKey(t, client, "p", term, 0)
	out, code = run(t, catalog, "release", "p")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, fmt.Sprintf("p: removed its owner key (term %d), which had no lease\n", term), out)
	requireOwnerKey(t, client, "p", 0, 0)
	out, code = run(t, catalog, "release", "p")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, "p: no owner\n", out)
	out, code = run(t, catalog, "set", "p", "kafka:300")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, "p: raised from kafka:200 to kafka:300\n", out)
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, "1 record, 0 unreadable\n", out)

	// A node's owner key, bound to its session's lease, is not release's
	// to remove: refused, and the node keeps its ownership.
	cat, err := etcdcatalog.New(client, etcdcatalog.WithPrefix("cli"), etcdcatalog.WithHolder("querynode-1"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	session, err := concurrency.NewSession(client, concurrency.WithTTL(30))
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	node, err := cat.TryOwn(ctxT(t), "p", session)
	require.NoError(t, err)
	t.Cleanup(func() { _ = node.Close() })
	out, code = run(t, catalog, "release", "p")
	require.Equal(t, cli.ExitRefused, code, out)
	require.Equal(t, fmt.Sprintf("lowwater: p is owned by a running node, querynode-1 (term %d): its ownership ends with "+
		"the node's session; stop the node\n", node.Term()), out)
	requireOwnerKey(t, client, "p", int64(node.Term()), session.Lease())
	require.NoError(t, node.Err())
	out, code = run(t, catalog, "get", "p")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, fmt.Sprintf("owner       term %d (a node owns it: querynode-1)\n", node.Term()))
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitOK, code, out, "a node's owner key is no finding")

	out, code = run(t, "--catalog=bolt:"+filepath.Join(t.TempDir(), "c.db"), "release", "p")
	require.Equal(t, cli.ExitUsage, code, out)
	require.Contains(t, out, "release: only an etcd catalog has owners")
}

// An owner key with a lease that no node put (another program's, or put
// by hand with a lease) was called a running node's: release said to stop
// the node, and verify said nothing, while it kept every node off the
// pchannel for as long as its lease lived. get, release and verify now
// say what it is, and how it goes; a node's key is not taken for one.
func TestEtcdOwnerKeyOfAnotherProgram(t *testing.T) {
	catalog, client := onDamagedEtcd(t)
	out, code := run(t, catalog, "set", "p", "kafka:100")
	require.Equal(t, cli.ExitOK, code, out)
	lease, err := client.Grant(ctxT(t), 60)
	require.NoError(t, err)
	put, err := client.Put(ctxT(t), "cli/wal/p/owner", "leased-by-hand", clientv3.WithLease(lease.ID))
	require.NoError(t, err)
	term := put.Header.Revision

	out, code = run(t, catalog, "get", "p")
	require.Equal(t, cli.ExitOK, code, out)
	require.Regexp(t, fmt.Sprintf(`owner       term %d, not a node's: bound to lease %x,
            put by another program or by hand; no node can own p until
            it goes: within [0-9]+ s unless its lease is renewed
            \(or at once: etcdctl lease revoke %x\)
`, term, int64(lease.ID), int64(lease.ID)), out)
	require.NotContains(t, out, "a node owns it")
	out, code = run(t, catalog, "release", "p")
	require.Equal(t, cli.ExitRefused, code, out)
	require.Contains(t, out, fmt.Sprintf("p: its owner key (term %d) is not a node's: bound to lease %x", term, int64(lease.ID)))
	require.NotContains(t, out, "stop the node")
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Equal(t, fmt.Sprintf(`NOT A NODE'S  p: its owner key (term %d), bound to lease %x, is not what a node puts
1 record, 0 unreadable
lowwater: 1 owner key not a node's
  NOT A NODE'S: put with a lease by another program, or by hand: it keeps every node off the pchannel until its lease ends, and no node renews it; find what put it, or revoke the lease (etcdctl lease revoke LEASE)
`, term, int64(lease.ID)), out)

	// Gone with its lease; a node's own key is not another program's.
	_, err = client.Revoke(ctxT(t), lease.ID)
	require.NoError(t, err)
	cat, err := etcdcatalog.New(client, etcdcatalog.WithPrefix("cli"), etcdcatalog.WithHolder("querynode-1"))
	require.NoError(t, err)
	session, err := concurrency.NewSession(client, concurrency.WithTTL(30))
	require.NoError(t, err)
	defer session.Close()
	owned, err := cat.Own(ctxT(t), "p", session)
	require.NoError(t, err)
	defer owned.Close()
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitOK, code, out)
	out, code = run(t, catalog, "get", "p")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, "(a node owns it: querynode-1)")
}

// requireOwnerKey checks pchannel's owner key: its term (create revision,
// 0 for no key) and lease.
func requireOwnerKey(t *testing.T, client *clientv3.Client, pchannel string, term int64, lease clientv3.LeaseID) {
	t.Helper()
	resp, err := client.Get(ctxT(t), "cli/wal/"+pchannel+"/owner")
	require.NoError(t, err)
	if term == 0 {
		require.Empty(t, resp.Kvs)
		return
	}
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, term, resp.Kvs[0].CreateRevision)
	require.Equal(t, lease, clientv3.LeaseID(resp.Kvs[0].Lease))
}
