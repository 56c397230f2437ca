package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
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
	"github.com/lowwater/lowwater/internal/testkit/cmdtest"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/internal/testkit/termtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// etcdURL starts an embedded etcd and returns a catalog URL on it with the
// prefix, and a catalog of the test's own on the same keys, whose owner
// keys name the node querynode-1.
func etcdURL(t *testing.T, prefix string) (string, *etcdcatalog.Catalog) {
	t.Helper()
	var hosts []string
	eps := etcdtest.Start(t)
	for _, e := range eps {
		hosts = append(hosts, strings.TrimPrefix(e, "http://"))
	}
	cat, err := etcdcatalog.Open(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		etcdcatalog.WithPrefix(prefix), etcdcatalog.WithHolder("querynode-1"))
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
	session := nodeSession(t, cat)
	const p = "by-dev-rootcoord-dml_0"
	node, err := cat.TryOwn(ctxT(t), p, session)
	require.NoError(t, err)
	defer node.Close()
	owned := "owned by a running node, querynode-1 (term " + itoa(node.Term()) + ")"

	wantCode(t, on(t, url, "get", p), cli.ExitOK, "owner       term "+itoa(node.Term())+" (a node owns it: querynode-1)\n")
	wantCode(t, on(t, url, "set", p, "kafka:2000"), cli.ExitRefused, owned, "--force")
	// Refused for what it writes, a lowering, and owned too: both said,
	// where the owner came to light only once --force had gone around it.
	r := on(t, url, "set", p, "kafka:1")
	wantCode(t, r, cli.ExitRefused, "lowering needs --force\n")
	require.True(t, strings.HasSuffix(r.stderr, "\n"+p+" is "+owned+": stop it, or --force\n"), "%s", r)
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

	// --force writes around the owner, and says so, dry or not.
	wantCode(t, on(t, url, "set", p, "kafka:2000", "--force", "--dry-run"), cli.ExitOK,
		"warning: "+p+" is owned by a running node, querynode-1 (term "+itoa(node.Term())+"); it would be written anyway (--force)",
		"would raise from kafka:1200 to kafka:2000")
	wantCode(t, on(t, url, "set", p, "kafka:2000", "--force"), cli.ExitOK, "warning: "+p+" is owned",
		"the raise stands", "raised from kafka:1200 to kafka:2000")
	alwaysStored(t, cat.Client(), "owned/wal/"+p+"/consume-checkpoint", func() {
		wantCode(t, on(t, url, "set", p, "kafka:1900", "--force"), cli.ExitOK, "warning: "+p+" is owned",
			"LOWERED from kafka:2000 to kafka:1900")
	})
	id, err := cat.Load(ctxT(t), p)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(1900), id)
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
	wantCode(t, on(t, url, "set", "good", "kafka:0"), cli.ExitRefused, "lowering needs --force", "(1 message)")
	alwaysStored(t, cat.Client(), "verify/wal/good/consume-checkpoint", func() {
		wantCode(t, on(t, url, "set", "good", "kafka:0", "--force"), cli.ExitOK, "LOWERED from kafka:1 to kafka:0")
	})
}

// alwaysStored runs write, and fails unless key held a record at every
// revision etcd made meanwhile: a forced write replaces a record in one
// transaction, and a delete before the save would leave a moment (or,
// after a crash, for good) with none.
func alwaysStored(t *testing.T, client *clientv3.Client, key string, write func()) {
	t.Helper()
	before, err := client.Get(ctxT(t), key)
	require.NoError(t, err)
	write()
	after, err := client.Get(ctxT(t), key)
	require.NoError(t, err)
	require.Greater(t, after.Header.Revision, before.Header.Revision, "nothing written")
	for rev := before.Header.Revision + 1; rev <= after.Header.Revision; rev++ {
		at, err := client.Get(ctxT(t), key, clientv3.WithRev(rev))
		require.NoError(t, err)
		require.Len(t, at.Kvs, 1, "no record at revision %d", rev)
	}
}

// TestEtcdRecordOfAHigherTermIsCleared: a record whose term is above any
// owner's in this etcd (written before a restore reset the terms, or
// copied from another cluster) fences every owner's saves; the README
// sends the operator to delete it, which the tool's own fenced delete
// refused. verify reports it, delete clears it, and set refuses to judge
// against it unless forced, which replaces it.
func TestEtcdRecordOfAHigherTermIsCleared(t *testing.T) {
	url, cat := etcdURL(t, "terms")
	for _, p := range []string{"a", "b"} {
		raw, err := persistence.EncodeRecord(p, persistence.Record{Checkpoint: wal.KafkaID(100), Term: 1 << 40})
		require.NoError(t, err)
		_, err = cat.Client().Put(ctxT(t), "terms/wal/"+p+"/consume-checkpoint", string(raw))
		require.NoError(t, err)
	}
	r := on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt, "FENCING  a: term 1099511627776 is above etcd's revision",
		"FENCING  b: term", "2 records no owner can write over", "it fences every owner's saves; 'delete PCHANNEL'")
	require.Empty(t, termtest.Wider(withoutHints(r.stdout+r.stderr), 80), "within 80 columns")
	r = on(t, url, "get", "a")
	wantCode(t, r, cli.ExitOK, "term        1099511627776\n            above etcd's revision, so above every owner's: it fences\n"+
		"            every save ('delete a' clears it; see verify)\n")
	require.Empty(t, termtest.Wider(r.stdout+r.stderr, 80), "within 80 columns")
	wantCode(t, on(t, url, "delete", "a"), cli.ExitOK, "a: deleted kafka:100")
	got, err := cat.Load(ctxT(t), "a")
	require.NoError(t, err)
	require.Nil(t, got)

	// Refused before anything is written, the dry run as the write; a
	// restore of c and b writes neither (it wrote c, then was refused b).
	for _, dry := range []bool{true, false} {
		args := []string{"set", "b", "kafka:200"}
		if dry {
			args = append(args, "--dry-run")
		}
		wantCode(t, on(t, url, args...), cli.ExitRefused,
			"b: its record's term 1099511627776 is above etcd's revision", "'delete b' clears it, or --force replaces it")
	}
	dump := filepath.Join(t.TempDir(), "dump.json")
	require.NoError(t, os.WriteFile(dump, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[
		{"pchannel":"c","wal":"kafka","checkpoint":"kafka:1"},
		{"pchannel":"b","wal":"kafka","checkpoint":"kafka:200"}]}`), 0o600))
	wantCode(t, on(t, url, "restore", dump, "--dry-run"), cli.ExitRefused, "1 of 2 checkpoints refused")
	wantCode(t, on(t, url, "restore", dump), cli.ExitRefused, "1 of 2 checkpoints refused; nothing written")
	entries, err := cat.Inspect(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, []persistence.Entry{{PChannel: "b", WAL: wal.Kafka, Checkpoint: wal.KafkaID(100), Term: 1 << 40, Version: 2}}, entries)
	alwaysStored(t, cat.Client(), "terms/wal/b/consume-checkpoint", func() {
		wantCode(t, on(t, url, "set", "b", "kafka:200", "--force"), cli.ExitOK, "raised from kafka:100 to kafka:200")
	})
	entries, err = cat.Inspect(ctxT(t))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, wal.KafkaID(200), entries[0].Checkpoint)
	require.Less(t, entries[0].Term, uint64(1<<40), "written under the tool's own term")
	wantCode(t, on(t, url, "verify"), cli.ExitOK, "1 record, 0 unreadable")
}

// TestEtcdVerifyFindsAnOwnerFencedByItsRecord: a record whose term is
// above its owner's, though below etcd's revision, fences that owner's
// saves. No owner of this etcd writes it (an owner's term is above every
// term stored before it took the pchannel): it came from another cluster,
// or from before a restore of etcd. verify passed over it.
func TestEtcdVerifyFindsAnOwnerFencedByItsRecord(t *testing.T) {
	url, cat := etcdURL(t, "fenced")
	require.NoError(t, cat.Save(ctxT(t), "p", wal.KafkaID(100)))
	session := nodeSession(t, cat)
	node, err := cat.TryOwn(ctxT(t), "p", session)
	require.NoError(t, err)
	defer node.Close()
	foreign := putForeignTerm(t, cat, "fenced", "p", node.Term())

	r := on(t, url, "verify")
	wantCode(t, r, cli.ExitCorrupt, "FENCED OWNER  p: term "+itoa(foreign)+", above its owner's ("+
		itoa(node.Term())+", querynode-1)\n", "1 record fencing an owner", "restart the node that owns it")
	require.NotContains(t, r.stdout, "FENCING  p")
	require.Empty(t, termtest.Wider(withoutHints(r.stdout+r.stderr), 80), "within 80 columns")
	// get says so too, and a forced write around the node, which keeps the
	// record's term, does not promise what the node's saves will do.
	wantCode(t, on(t, url, "get", "p"), cli.ExitOK, "            fenced: the record's term, "+itoa(foreign)+
		", is above it, so its saves are\n            refused; restart the node\n")
	wantCode(t, on(t, url, "set", "p", "kafka:150", "--force"), cli.ExitOK, "warning: p is owned by a running node, querynode-1 (term "+
		itoa(node.Term())+"); writing anyway (--force): the node's saves are refused all the same, as the record's term ("+
		itoa(foreign)+") is above its own: restart the node\n")
	require.ErrorIs(t, node.Save(ctxT(t), "p", wal.KafkaID(200)), persistence.ErrFenced)

	// A delete takes the fence away with the record: the node's next save
	// goes through, and the warning says so.
	other, err := cat.TryOwn(ctxT(t), "q", session)
	require.NoError(t, err)
	defer other.Close()
	putForeignTerm(t, cat, "fenced", "q", other.Term())
	wantCode(t, on(t, url, "delete", "q", "--force"), cli.ExitOK, "; deleting anyway (--force): the node's next save writes its checkpoint back")
	require.NoError(t, other.Save(ctxT(t), "q", wal.KafkaID(300)))
	require.NoError(t, other.Close())

	// As the hint says: owned again, under a newer term, the node saves.
	require.NoError(t, node.Close())
	again, err := cat.TryOwn(ctxT(t), "p", session)
	require.NoError(t, err)
	defer again.Close()
	wantCode(t, on(t, url, "verify"), cli.ExitOK, "2 records, 0 unreadable")
	require.NoError(t, again.Save(ctxT(t), "p", wal.KafkaID(200)))
}

// A forced write around a running node over a record whose term is above
// etcd's revision cleared that term when it was a delete and a save, and
// kept it when it became one write: the tool said it had written, verify
// still reported FENCING, and the node's next save was fenced. A record
// no owner of this etcd can have written carries no term over.
func TestEtcdForcedWriteAroundAnOwnerClearsAFencingTerm(t *testing.T) {
	url, cat := etcdURL(t, "around")
	session := nodeSession(t, cat)
	for _, p := range []string{"lower", "raise"} {
		raw, err := persistence.EncodeRecord(p, persistence.Record{Checkpoint: wal.KafkaID(500), Term: 1 << 40})
		require.NoError(t, err)
		_, err = cat.Client().Put(ctxT(t), "around/wal/"+p+"/consume-checkpoint", string(raw))
		require.NoError(t, err)
	}
	nodes := map[string]*etcdcatalog.Owned{}
	for _, p := range []string{"lower", "raise"} {
		var err error
		nodes[p], err = cat.TryOwn(ctxT(t), p, session)
		require.NoError(t, err)
		defer nodes[p].Close()
	}
	wantCode(t, on(t, url, "set", "lower", "kafka:300", "--force"), cli.ExitOK, "writing anyway (--force)", "LOWERED from kafka:500 to kafka:300")
	wantCode(t, on(t, url, "set", "raise", "kafka:700", "--force"), cli.ExitOK, "writing anyway (--force)", "raised from kafka:500 to kafka:700")
	wantCode(t, on(t, url, "verify"), cli.ExitOK, "2 records, 0 unreadable")
	require.NoError(t, nodes["lower"].Save(ctxT(t), "lower", wal.KafkaID(301)))
	require.NoError(t, nodes["raise"].Save(ctxT(t), "raise", wal.KafkaID(701)))
}

// TestEtcdForcedWriteAroundANodeSaysWhatBecomesOfIt: a forced write
// around a running node is warned of once, with what the node's saves do
// to that write, and each warning holds against the node's catalog. The
// warning was one line for every case, and restore gave it twice.
func TestEtcdForcedWriteAroundANodeSaysWhatBecomesOfIt(t *testing.T) {
	url, cat := etcdURL(t, "cases")
	pchannels := []string{"raise", "lower", "gone", "switch", "restored", "fresh"}
	for _, p := range pchannels[:5] {
		require.NoError(t, cat.Save(ctxT(t), p, wal.KafkaID(500)))
	}
	session := nodeSession(t, cat)
	nodes := map[string]*etcdcatalog.Owned{}
	for _, p := range pchannels {
		var err error
		nodes[p], err = cat.TryOwn(ctxT(t), p, session)
		require.NoError(t, err)
		defer nodes[p].Close()
	}
	warned := func(r result, p, doing, then string) {
		t.Helper()
		want := "warning: " + p + " is owned by a running node, querynode-1 (term " + itoa(nodes[p].Term()) + "); " + doing + ": " + then + "\n"
		require.Equal(t, 1, strings.Count(r.stderr, "is owned by a running node"), "%s", r)
		require.Contains(t, r.stderr, want, "%s", r)
	}
	const writing, wouldWrite = "writing anyway (--force)", "it would be written anyway (--force)"
	const deleting, wouldDelete = "deleting anyway (--force)", "it would be deleted anyway (--force)"

	r := on(t, url, "set", "raise", "kafka:700", "--force")
	wantCode(t, r, cli.ExitOK, "raised from kafka:500 to kafka:700")
	warned(r, "raise", writing, "the raise stands, as the node's saves never lower it")
	var ahead *persistence.StoredAheadError
	require.ErrorAs(t, nodes["raise"].Save(ctxT(t), "raise", wal.KafkaID(600)), &ahead)
	require.Equal(t, wal.KafkaID(700), ahead.Stored)

	const undone = "the node's next save writes over it if the node's checkpoint is higher: stop the node for a change that lasts"
	r = on(t, url, "set", "lower", "kafka:300", "--force")
	wantCode(t, r, cli.ExitOK, "LOWERED from kafka:500 to kafka:300")
	warned(r, "lower", writing, undone)
	require.NoError(t, nodes["lower"].Save(ctxT(t), "lower", wal.KafkaID(400)))

	r = on(t, url, "delete", "gone", "--force", "--dry-run")
	wantCode(t, r, cli.ExitOK, "gone: would delete kafka:500")
	warned(r, "gone", wouldDelete, "the node's next save writes its checkpoint back: stop the node for a change that lasts")
	r = on(t, url, "delete", "gone", "--force")
	wantCode(t, r, cli.ExitOK, "gone: deleted kafka:500")
	warned(r, "gone", deleting, "the node's next save writes its checkpoint back: stop the node for a change that lasts")
	require.NoError(t, nodes["gone"].Save(ctxT(t), "gone", wal.KafkaID(500)))

	r = on(t, url, "set", "switch", "woodpecker:4:0", "--force")
	wantCode(t, r, cli.ExitOK, "replaced from kafka:500 to woodpecker:4:0")
	warned(r, "switch", writing, "the node's saves, which cannot be ordered against it, fail: stop the node")
	require.ErrorIs(t, nodes["switch"].Save(ctxT(t), "switch", wal.KafkaID(600)), persistence.ErrInvalidArgument)

	// Nothing stored: the node's checkpoint may be of another WAL, which
	// the tool cannot see.
	r = on(t, url, "set", "fresh", "kafka:10", "--force")
	wantCode(t, r, cli.ExitOK, "fresh: created at kafka:10")
	warned(r, "fresh", writing, "the node's next save writes over it if the node's checkpoint is higher, and fails if it is of another WAL")
	require.ErrorIs(t, nodes["fresh"].Save(ctxT(t), "fresh", wal.PulsarID{LedgerID: 1}), persistence.ErrInvalidArgument)
	require.NoError(t, nodes["fresh"].Save(ctxT(t), "fresh", wal.KafkaID(11)))

	dump := filepath.Join(t.TempDir(), "d.json")
	wantCode(t, on(t, "bolt:"+seedBolt(t, map[string]wal.MessageID{"restored": wal.KafkaID(100)}), "dump", dump), cli.ExitOK)
	dry := on(t, url, "restore", dump, "--force", "--dry-run")
	wantCode(t, dry, cli.ExitOK, "restored: would LOWER from kafka:500 to kafka:100")
	warned(dry, "restored", wouldWrite, undone)
	r = on(t, url, "restore", dump, "--force")
	wantCode(t, r, cli.ExitOK, "(1 written)")
	warned(r, "restored", writing, undone)
	// A dry run warns in the order the restore does: of the replay, then
	// of the write around the node.
	for _, r := range []result{dry, r} {
		replayAt, ownedAt := strings.Index(r.stderr, "replay: consumers restart"), strings.Index(r.stderr, "is owned by")
		require.True(t, replayAt >= 0 && ownedAt > replayAt, "%s", r)
	}

	got, err := cat.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"raise": wal.KafkaID(700), "lower": wal.KafkaID(400), "gone": wal.KafkaID(500),
		"switch": wal.WoodpeckerID{SegmentID: 4}, "restored": wal.KafkaID(100), "fresh": wal.KafkaID(11)}, got)
}

// nodeSession is the etcd session of a node of cat's, ended with the test.
func nodeSession(t *testing.T, cat *etcdcatalog.Catalog) *concurrency.Session {
	t.Helper()
	session, err := concurrency.NewSession(cat.Client(), concurrency.WithTTL(30))
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// putForeignTerm puts a record of kafka:100 for pchannel under prefix
// with a term above owner's and below etcd's revision, as no owner of
// this etcd writes one (a copy from another cluster), and returns it.
func putForeignTerm(t *testing.T, cat *etcdcatalog.Catalog, prefix, pchannel string, owner uint64) uint64 {
	t.Helper()
	for i := range 5 { // revisions past the term, outside the prefix
		_, err := cat.Client().Put(ctxT(t), "elsewhere", strconv.Itoa(i))
		require.NoError(t, err)
	}
	term := owner + 3
	raw, err := persistence.EncodeRecord(pchannel, persistence.Record{Checkpoint: wal.KafkaID(100), Term: term})
	require.NoError(t, err)
	_, err = cat.Client().Put(ctxT(t), prefix+"/wal/"+pchannel+"/consume-checkpoint", string(raw))
	require.NoError(t, err)
	return term
}

// enableAuth turns authentication on, with the user root, password
// s3cret, through a client of cfg.
func enableAuth(t *testing.T, cfg clientv3.Config) {
	t.Helper()
	cfg.DialTimeout, cfg.Logger = 5*time.Second, zap.NewNop()
	admin, err := clientv3.New(cfg)
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.UserAdd(ctxT(t), "root", "s3cret")
	require.NoError(t, err)
	_, err = admin.UserGrantRole(ctxT(t), "root", "root")
	require.NoError(t, err)
	_, err = admin.AuthEnable(ctxT(t))
	require.NoError(t, err)
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestEtcdOverTLSWithAuth: an etcd that serves clients over TLS only, asks
// them for a certificate, and has authentication on. The tool reaches it
// with --etcd-cacert, --etcd-cert, --etcd-key and --etcd-user (the
// password from the environment only), or the same from the environment,
// and is refused without them.
func TestEtcdOverTLSWithAuth(t *testing.T) {
	eps, files := etcdtest.StartTLS(t)
	var hosts []string
	for _, e := range eps {
		hosts = append(hosts, strings.TrimPrefix(e, "https://"))
	}
	url := "etcd://" + strings.Join(hosts, ",") + "/secure"

	tlsConfig := func(t *testing.T) *tls.Config {
		t.Helper()
		pem, err := os.ReadFile(files.CA)
		require.NoError(t, err)
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(pem))
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		require.NoError(t, err)
		return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	enableAuth(t, clientv3.Config{Endpoints: eps, TLS: tlsConfig(t)})
	cat, err := etcdcatalog.Open(clientv3.Config{Endpoints: eps, TLS: tlsConfig(t), Username: "root", Password: "s3cret",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()}, etcdcatalog.WithPrefix("secure"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cat.Close() })
	require.NoError(t, cat.Save(ctxT(t), "p", wal.KafkaID(7)))

	tlsFlags := []string{"--etcd-cacert", files.CA, "--etcd-cert", files.Cert, "--etcd-key", files.Key}
	withPassword := []string{"LOWWATER_ETCD_PASSWORD=s3cret"}
	secured := func(env []string, args ...string) result {
		t.Helper()
		return lw(t, env, append(append([]string{"--catalog", url}, tlsFlags...), args...)...)
	}

	wantCode(t, secured(withPassword, "--etcd-user", "root", "list"), cli.ExitOK, "p         kafka  kafka:7", "1 pchannel\n")
	wantCode(t, secured(withPassword, "--etcd-user", "root", "set", "p", "kafka:9"), cli.ExitOK, "raised from kafka:7 to kafka:9")
	id, err := cat.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(9), id)

	// The same from the environment alone.
	env := []string{"LOWWATER_CATALOG=" + url, "LOWWATER_ETCD_CACERT=" + files.CA, "LOWWATER_ETCD_CERT=" + files.Cert,
		"LOWWATER_ETCD_KEY=" + files.Key, "LOWWATER_ETCD_USER=root", "LOWWATER_ETCD_PASSWORD=s3cret"}
	wantCode(t, lw(t, env, "get", "p"), cli.ExitOK, "kafka:9")

	// Refused: a wrong password, no user, no TLS, a CA that did not sign
	// etcd's certificate, no client certificate. The last three time out
	// in the client, and the tool finds out why.
	wantCode(t, secured([]string{"LOWWATER_ETCD_PASSWORD=wrong"}, "--etcd-user", "root", "list"), cli.ExitFailed, "authentication failed")
	// With no user, etcd takes the client certificate's name for one.
	wantCode(t, secured(nil, "list"), cli.ExitFailed, "etcdserver: permission denied")
	// Out of --timeout before etcd could say so: etcd answers, and a
	// longer --timeout shows why it refused. The probe took an etcd that
	// refused the user for a stopped one.
	wantCode(t, secured([]string{"LOWWATER_ETCD_PASSWORD=wrong"}, "--etcd-user", "root", "--timeout", "1ms", "list"), cli.ExitFailed,
		"(--timeout 1ms passed): etcd answers at "+hosts[0]+", so the command needs a longer --timeout")
	// With --etcd-cacert, an endpoint that takes connections and answers
	// nothing was a TLS failure ("i/o timeout"); a plain etcd, one that
	// said "EOF".
	silent := cmdtest.SilentListener(t)
	wantCode(t, on(t, "etcd://"+silent+"/secure", "--etcd-cacert", files.CA, "--timeout", "500ms", "list"), cli.ExitFailed,
		"(--timeout 500ms passed): "+silent+" takes connections but answers no request within 1s")
	plain := strings.TrimPrefix(etcdtest.Start(t)[0], "http://")
	wantCode(t, on(t, "etcd://"+plain+"/secure", "--etcd-cacert", files.CA, "--timeout", "1s", "list"), cli.ExitFailed,
		"(--timeout 1s passed): "+plain+" ended the TLS handshake unanswered: does it speak TLS?")
	// A healthy etcd, and a --timeout too short for anything to answer:
	// the tool asked "is etcd up?".
	r := secured(withPassword, "--etcd-user", "root", "--timeout", "1ms", "list")
	wantCode(t, r, cli.ExitFailed, "(--timeout 1ms passed): etcd answers at "+strings.Join(hosts, ",")+
		", so the command needs a longer --timeout")
	require.NotContains(t, r.stderr, "is etcd up", "%s", r)
	r = on(t, url, "--timeout", "1s", "list")
	wantCode(t, r, cli.ExitFailed, "(--timeout 1s passed): "+hosts[0]+" speaks TLS: give --etcd-cacert")
	require.Equal(t, 1, strings.Count(r.stderr, "--timeout"), "the timeout said once: %s", r.stderr)
	// Each endpoint is asked why, not the first alone: one that refuses
	// connections hid that the next speaks TLS.
	closed := "127.0.0.1:1"
	wantCode(t, on(t, "etcd://"+closed+","+hosts[0]+"/secure", "--timeout", "1s", "list"), cli.ExitFailed,
		"(--timeout 1s passed): cannot connect to "+closed+": ", "; "+hosts[0]+" speaks TLS: give --etcd-cacert")
	wantCode(t, on(t, url, "--timeout", "1s", "--etcd-cacert", files.Cert, "list"), cli.ExitFailed,
		"TLS with "+hosts[0]+" failed: tls: failed to verify certificate: x509: certificate signed by unknown authority")
	wantCode(t, on(t, url, "--timeout", "1s", "--etcd-cacert", files.CA, "list"), cli.ExitFailed,
		"TLS with "+hosts[0]+" failed: remote error: tls: certificate required")
	wantCode(t, secured([]string{"LOWWATER_ETCD_PASSWORD=s3cret"}, "list"), cli.ExitUsage,
		"$LOWWATER_ETCD_PASSWORD is set, but no user")
	// etcd's client sends no user without a password: etcd said "user
	// name is empty".
	wantCode(t, secured(nil, "--etcd-user", "root", "list"), cli.ExitUsage, "--etcd-user root needs its password in $LOWWATER_ETCD_PASSWORD")

	// Settings that cannot work are a bad command line.
	wantCode(t, on(t, url, "--etcd-cert", files.Cert, "list"), cli.ExitUsage, "--etcd-cert and --etcd-key ($LOWWATER_ETCD_CERT, $LOWWATER_ETCD_KEY) go together")
	wantCode(t, on(t, "bolt:"+seedBolt(t, seed), "--etcd-cacert", files.CA, "list"), cli.ExitUsage, "--etcd-cacert is for an etcd catalog")
	wantCode(t, on(t, url, "--etcd-cacert", files.Key, "list"), cli.ExitUsage, "no PEM certificate in it")
}

// An etcd with authentication on, and a command with no user: etcd's
// "user name is empty" said nothing of --etcd-user. Out of --timeout
// before etcd could say it, the probe took etcd for a stopped one.
func TestEtcdWithAuthAndNoUser(t *testing.T) {
	eps := etcdtest.Start(t)
	enableAuth(t, clientv3.Config{Endpoints: eps})
	host := strings.TrimPrefix(eps[0], "http://")
	url := "etcd://" + host + "/lowwater"

	wantCode(t, on(t, url, "list"), cli.ExitFailed,
		"etcdserver: user name is empty: etcd has authentication on: give --etcd-user, and its password in $LOWWATER_ETCD_PASSWORD")
	wantCode(t, on(t, url, "--timeout", "1ms", "list"), cli.ExitFailed,
		"(--timeout 1ms passed): etcd at "+host+" refuses the client: etcdserver: user name is empty: give --etcd-user, "+
			"and its password in $LOWWATER_ETCD_PASSWORD")
	wantCode(t, lw(t, []string{"LOWWATER_ETCD_PASSWORD=s3cret"}, "--catalog", url, "--etcd-user", "root", "list"), cli.ExitOK, "0 pchannels")
}

// A holder is judged by its lease as well as its name: a node that calls
// itself the tool, with a lease of another TTL, is a node; one whose
// lease is not renewed (killed, or cut off from etcd) looks gone, and the
// time its hold has left is said, where the tool said "stop it" until the
// lease ended.
func TestEtcdHolderJudgedByItsLease(t *testing.T) {
	url, cat := etcdURL(t, "leases")
	impostor, err := etcdcatalog.New(cat.Client(), etcdcatalog.WithPrefix("leases"), etcdcatalog.WithHolder("lowwater-cli set, pid 1 on x"))
	require.NoError(t, err)
	defer impostor.Close()
	session := nodeSession(t, cat)
	node, err := impostor.TryOwn(ctxT(t), "named", session)
	require.NoError(t, err)
	defer node.Close()
	wantCode(t, on(t, url, "set", "named", "kafka:1"), cli.ExitRefused,
		"named is owned by a running node, lowwater-cli set, pid 1 on x (term "+itoa(node.Term())+"): stop it, or --force")

	// A node killed: its session's keep-alive stops, and its lease runs
	// down. Judged once it has run past two thirds of its TTL, with 2 s
	// left: the commands that follow run well within them.
	const ttl = 9
	gone, err := concurrency.NewSession(cat.Client(), concurrency.WithTTL(ttl))
	require.NoError(t, err)
	owned, err := cat.TryOwn(ctxT(t), "gone", gone)
	require.NoError(t, err)
	gone.Orphan()
	for {
		resp, err := cat.Client().TimeToLive(ctxT(t), gone.Lease())
		require.NoError(t, err)
		require.Positive(t, resp.TTL, "the lease ended before it was judged")
		if 3*resp.TTL < ttl {
			break
		}
		select {
		case <-ctxT(t).Done():
			t.Fatal("the lease did not run down")
		case <-time.After(100 * time.Millisecond): // a poll of etcd's clock, not a wait for this process
		}
	}
	term := itoa(owned.Term())
	r := on(t, url, "set", "gone", "kafka:1")
	require.Equal(t, cli.ExitRefused, r.code, "%s", r)
	require.Regexp(t, `^lowwater: gone is owned by a node that looks gone, querynode-1 \(term `+term+`\): `+
		`its lease is not being renewed, and ends within [12] s; wait, or --force\n$`, r.stderr)
	r = on(t, url, "get", "gone")
	require.Equal(t, cli.ExitNotFound, r.code, "%s", r)
	require.Regexp(t, `^owner       term `+term+` \(querynode-1, which looks gone\):\n`+
		`            its lease is not being renewed, and ends within [12] s\n$`, r.stdout)
	r = on(t, url, "set", "gone", "kafka:1", "--force")
	wantCode(t, r, cli.ExitOK, "gone: created at kafka:1")
	require.Contains(t, r.stderr, "; writing anyway (--force): should it still run, the node's next save writes over it")
}

// A prefix that holds nothing, mistyped most likely (they are
// case-sensitive), read as an empty catalog and took a write as the start
// of a new one, in silence.
func TestEtcdEmptyPrefixIsSaid(t *testing.T) {
	url, cat := etcdURL(t, "lowwater")
	require.NoError(t, cat.Save(ctxT(t), "p", wal.KafkaID(500)))
	typo := strings.Replace(url, "/lowwater", "/Lowwater", 1)

	r := on(t, typo, "list")
	wantCode(t, r, cli.ExitOK, "0 pchannels")
	require.Equal(t, "warning: etcd holds nothing under the prefix \"Lowwater\": is it the right one? (prefixes are case-sensitive)\n", r.stderr)
	// A write starts a catalog there: said, not warned of.
	r = on(t, typo, "set", "p", "kafka:900")
	wantCode(t, r, cli.ExitOK, "p: created at kafka:900")
	require.Equal(t, "note: etcd holds nothing under the prefix \"Lowwater\": set starts a catalog there (prefixes are case-sensitive)\n", r.stderr)
	r = on(t, typo, "list")
	wantCode(t, r, cli.ExitOK, "1 pchannel")
	require.Empty(t, r.stderr)
	r = on(t, url, "get", "p")
	wantCode(t, r, cli.ExitOK, "checkpoint  kafka:500")
	require.Empty(t, r.stderr)

	// A restore into a new prefix, as from bbolt to etcd.
	dump := filepath.Join(t.TempDir(), "d.json")
	wantCode(t, on(t, url, "dump", dump), cli.ExitOK, "")
	r = on(t, strings.Replace(url, "/lowwater", "/fresh", 1), "restore", dump)
	wantCode(t, r, cli.ExitOK, "restored 1 checkpoint")
	require.Equal(t, "note: etcd holds nothing under the prefix \"fresh\": restore starts a catalog there (prefixes are case-sensitive)\n", r.stderr)
}

// A restore that --timeout cuts short goes on where it stopped when run
// again, however big the dump: its checks of the owners, before any
// write, read every owner key at once. They read one key per pchannel,
// and on a big enough dump ran --timeout out before the first write on
// every rerun. A cut is exit 1, never the refusal of a write (exit 4).
func TestRestoreCutShortGoesOnWhenRunAgain(t *testing.T) {
	url, cat := etcdURL(t, "cut")
	dump := filepath.Join(t.TempDir(), "d.json")
	const n = 1500
	writeDump(t, dump, n)
	// How many runs it takes is the machine's: each must go on from
	// where the one before stopped, and write something within a few.
	runs, stored, idle := 0, 0, 0
	for ; ; runs++ {
		r := on(t, url, "--timeout", "500ms", "restore", dump)
		if r.code == cli.ExitOK {
			break
		}
		// Cut by --timeout, or, on a loaded machine, by etcd's own
		// request timeout: either way a failure that a rerun goes on
		// from, never a refusal.
		wantCode(t, r, cli.ExitFailed)
		require.Regexp(t, `--timeout 500ms passed|a rerun writes the rest`, r.stderr)
		require.NotContains(t, r.stderr, "refused", "%s", r)
		all, err := cat.LoadAll(ctxT(t))
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(all), stored, "run %d", runs+1)
		if len(all) == stored {
			idle++
			require.Less(t, idle, 5, "%d runs in a row wrote nothing, %d of %d written", idle, stored, n)
		} else {
			idle = 0
		}
		stored = len(all)
	}
	all, err := cat.LoadAll(ctxT(t))
	require.NoError(t, err)
	require.Len(t, all, n, "after %d runs", runs+1)
	require.Greater(t, runs, 0, "no run was cut short: the test tells nothing")
	t.Logf("restored in %d runs", runs+1)
}

// A connection whose first bytes come after more than a second (TLS on a
// loaded host) is made: each attempt had a second, and was cut again at
// every retry until --timeout.
func TestASlowConnectionWithinTimeout(t *testing.T) {
	url, cat := etcdURL(t, "slow")
	require.NoError(t, cat.Save(ctxT(t), "p", wal.KafkaID(7)))
	host, _, _ := strings.Cut(strings.TrimPrefix(url, "etcd://"), "/")
	slow := etcdtest.NewFreezer(t, host)
	slow.Delay(2500 * time.Millisecond)
	start := time.Now()
	wantCode(t, on(t, "etcd://"+slow.Addr()+"/slow", "get", "p"), cli.ExitOK, "kafka:7")
	require.Greater(t, time.Since(start), 2500*time.Millisecond, "the connection was not held")
}

// A member restarting behind its address, which takes connections and
// closes them until etcd is up, is waited for within --timeout, however
// long that is: with a user, the client's first request (its token) was
// cut at a bound of its own, and the command failed with most of
// --timeout left.
func TestAMemberRestartingWithinTimeout(t *testing.T) {
	url, cat := etcdURL(t, "restarting")
	require.NoError(t, cat.Save(ctxT(t), "p", wal.KafkaID(7)))
	host, _, _ := strings.Cut(strings.TrimPrefix(url, "etcd://"), "/")
	enableAuth(t, clientv3.Config{Endpoints: []string{"http://" + host}})
	restarting := etcdtest.NewFreezer(t, host)
	const down = 6 * time.Second
	restarting.Refuse(down)
	start := time.Now()
	wantCode(t, lw(t, []string{"LOWWATER_ETCD_PASSWORD=s3cret"}, "--catalog", "etcd://"+restarting.Addr()+"/restarting",
		"--etcd-user", "root", "--timeout", "20s", "get", "p"), cli.ExitOK, "kafka:7")
	require.Greater(t, time.Since(start), down, "the connections were not refused")
}
