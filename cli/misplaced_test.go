package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/internal/testkit/recordtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A record whose key was damaged ("orders-dml-0" read as "nrders-dml-0")
// is told for what it is, and what it holds, and the tool leads to its
// repair: the checkpoint written under its own name, then the record
// deleted. get of the real name said "no checkpoint stored" while a node
// of it refused to start; verify advised 'set --force' on the damaged
// name, which made a clean record under the wrong one, and the node then
// started from nothing. verify names whose it is, and once it is written
// under that name, delete needs no --force: it is a copy.
func TestAMisplacedRecordIsToldAndRepaired(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"orders-dml-0": wal.KafkaID(120)})
	moveRecord(t, path, "orders-dml-0", "nrders-dml-0")
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	stdout, stderr, code := runSplit(t, url, "get", "orders-dml-0")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, `orders-dml-0: nothing stored under this name, but `+path+` holds a record under "nrders-dml-0" that was written for this one`)
	require.Contains(t, stderr, "(lowwater verify says how to repair it); it holds kafka:120\n")

	stdout, stderr, code = runSplit(t, url, "verify")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Equal(t, "MISPLACED  nrders-dml-0: another pchannel's record: its key was damaged, or it was copied under this name; it holds kafka:120, "+
		"written for \"orders-dml-0\"\n1 record, 1 unreadable\n", stdout)
	require.Contains(t, stderr, "MISPLACED: a whole record under another name")
	require.Contains(t, stderr, "a node of the pchannel it was written for, with nothing stored, does not start")
	require.Contains(t, stderr, "'set --force PCHANNEL ID' with the ID it holds, then 'delete' it (with --force when none is named)")

	// Salvaged, it is dumped as the pchannel it was written for, and said
	// to be found under another key.
	stdout, stderr, code = runSplit(t, url, "dump", "--salvage", "-")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stdout, `"pchannel": "orders-dml-0"`)
	require.NotContains(t, stdout, "nrders")
	require.Regexp(t, `(?m)^MISPLACED  orders-dml-0: kafka:120, stored under nrders-dml-0 on page \d+$`, stderr)
	require.Contains(t, stderr, "1 record (MISPLACED above) found under a damaged key")

	// It holds back orders-dml-0 alone: another pchannel is created as ever.
	_, stderr, code = runSplit(t, url, "get", "payments-0")
	require.Equal(t, cli.ExitNotFound, code, stderr)
	require.Equal(t, "lowwater: payments-0: no checkpoint stored\n", stderr)
	stdout, stderr, code = runSplit(t, url, "set", "--dry-run", "payments-0", "kafka:1")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "payments-0: would create at kafka:1\n", stdout)

	for _, args := range [][]string{{"set", "orders-dml-0", "kafka:120"}, {"set", "--dry-run", "orders-dml-0", "kafka:120"}} {
		stdout, stderr, code = runSplit(t, append([]string{url}, args...)...)
		require.Equal(t, cli.ExitRefused, code, "%v: %s", args, stderr)
		require.Empty(t, stdout)
		require.Contains(t, stderr, "that was written for this one, its key damaged or the record copied there")
		require.Contains(t, stderr, "--force writes it all the same")
	}
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a refused set changed the file")

	stdout, stderr, code = runSplit(t, url, "set", "--force", "--dry-run", "orders-dml-0", "kafka:120")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "orders-dml-0: would create at kafka:120\n", stdout)
	// Its checkpoint is the only copy: deleting it needs --force, and the
	// refusal says how to keep it.
	for _, args := range [][]string{{"delete", "nrders-dml-0"}, {"delete", "--dry-run", "nrders-dml-0"}} {
		_, stderr, code = runSplit(t, append([]string{url}, args...)...)
		require.Equal(t, cli.ExitRefused, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "nrders-dml-0 holds kafka:120, written for orders-dml-0 (its key damaged, or copied here)")
		require.Contains(t, stderr, "write it under its own name first ('set --force orders-dml-0 kafka:120', see verify)")
	}
	stdout, stderr, code = runSplit(t, url, "set", "--force", "orders-dml-0", "kafka:120")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "orders-dml-0: created at kafka:120\n", stdout)
	stdout, stderr, code = runSplit(t, url, "delete", "--dry-run", "nrders-dml-0")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "nrders-dml-0: would delete a misplaced record holding kafka:120 (orders-dml-0, whose it was, holds kafka:120)\n", stdout)
	stdout, stderr, code = runSplit(t, url, "delete", "nrders-dml-0")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "nrders-dml-0: deleted a misplaced record holding kafka:120 (orders-dml-0, whose it was, holds kafka:120)\n", stdout)

	require.Equal(t, map[string]string{"orders-dml-0": "kafka:120"}, storedIn(t, path))
	_, stderr, code = runSplit(t, url, "verify")
	require.Equal(t, cli.ExitOK, code, stderr)
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	defer b.Close()
	id, err := b.Load(context.Background(), "orders-dml-0")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(120), id)
	id, err = b.Load(context.Background(), "orders-dml-1")
	require.NoError(t, err, "a new pchannel starts again")
	require.Nil(t, id)
}

// A key damaged out of the names a node takes (a bit that makes it no
// UTF-8, a byte more) still holds another pchannel's record: verify says
// so, with what it holds, not only that no node can use the name, whose
// advice, delete, threw that pchannel's checkpoint away.
func TestAMisplacedRecordUnderABadNameIsTold(t *testing.T) {
	for _, key := range []string{"p\xb2", "p2\x00"} {
		url, path := boltWith(t, map[string]wal.MessageID{"p2": wal.KafkaID(52)})
		moveRecord(t, path, "p2", key)
		stdout, stderr, code := runSplit(t, url, "verify")
		require.Equal(t, cli.ExitCorrupt, code, stderr)
		require.Equal(t, "MISPLACED  "+strconv.Quote(key)+": another pchannel's record: its key was damaged, "+
			"or it was copied under this name; it holds kafka:52, written for \"p2\"\n1 record, 1 unreadable\n", stdout)
		require.Contains(t, stderr, "MISPLACED: ")
		_, stderr, code = runSplit(t, url, "delete", "--quoted", strconv.Quote(key))
		require.Equal(t, cli.ExitRefused, code, stderr)
		require.Contains(t, stderr, strconv.Quote(key)+" holds kafka:52")
		// A script reaches it from list --json, by its quoted name.
		stdout, stderr, code = runSplit(t, url, "list", "--json")
		require.Equal(t, cli.ExitOK, code, stderr)
		require.Contains(t, stdout, `"quoted": `+strconv.Quote(strconv.Quote(key)))
	}
}

// set over a misplaced record is refused as delete is, naming what it
// holds, not as over a corrupt record of its own; forced, it says what it
// drops.
func TestASetOverAMisplacedRecordSaysWhatItDrops(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"p2": wal.KafkaID(52)})
	moveRecord(t, path, "p2", "p3")
	_, stderr, code := runSplit(t, url, "set", "p3", "kafka:1")
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Equal(t, "lowwater: p3 holds kafka:52, written for p2 (its key damaged, or copied here): "+
		"write it under its own name first (see verify); --force replaces it\n", stderr)
	stdout, stderr, code := runSplit(t, url, "set", "--force", "p3", "kafka:1")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "p3: replaced from a misplaced record holding kafka:52 to kafka:1\n", stdout)
	require.Equal(t, "warning: p3: the record of p2, holding kafka:52, is dropped: write it under its own name (see verify)\n", stderr)

	// A sentinel forced over it is said too, as over anything.
	moveRecord(t, path, "p3", "p7")
	plantRaw(t, path, "p3", mustEncode(t, "p2", wal.KafkaID(52)))
	_, stderr, code = runSplit(t, url, "set", "--force", "p3", "kafka:-1")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "warning: p3: the record of p2, holding kafka:52, is dropped: write it under its own name (see verify)\n"+
		"warning: p3: kafka:-1 is no offset (Kafka's clients read -1 as the end of the log and -2 as its start): "+
		"no node recovers from it until 'set' gives an offset\n", stderr)

	// Of another WAL, it is no switch of p3's WAL: p3 had none.
	moveRecord(t, path, "p3", "p4")
	// Copied from a name further off than a byte: whose it is is not told.
	plantRaw(t, path, "p5", recordtest.WithWAL(mustEncode(t, "elsewhere-6", wal.KafkaID(1)), "fancy"))
	_, stderr, code = runSplit(t, url, "set", "--force", "p5", "kafka:1")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "warning: p5: another pchannel's record, holding a checkpoint of WAL fancy that this build cannot read, is dropped: "+
		"write it under its own name (see verify)\n", stderr)
}

// mustEncode is pchannel's record of id.
func mustEncode(t *testing.T, pchannel string, id wal.MessageID) []byte {
	t.Helper()
	raw, err := persistence.EncodeRecord(pchannel, persistence.Record{Checkpoint: id})
	require.NoError(t, err)
	return raw
}

// A misplaced record of a WAL this build does not know is told as
// misplaced, with its WAL, not as a corrupt record whose advice lost it.
func TestAMisplacedRecordOfAnUnknownWALIsTold(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"p2": wal.KafkaID(52)})
	raw, err := persistence.EncodeRecord("p5", persistence.Record{Checkpoint: wal.KafkaID(1), Term: 4})
	require.NoError(t, err)
	plantRaw(t, path, "p9", recordtest.WithWAL(raw, "fancy"))
	stdout, stderr, code := runSplit(t, url, "verify")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stdout, `MISPLACED  p9: another pchannel's record: its key was damaged, or it was copied under this name; `+
		`it holds a checkpoint of WAL "fancy" that cannot be read here`)
	require.Contains(t, stderr, "UNKNOWN WAL: read with a lowwater built with that WAL", "the ID it holds is read so")
	stdout, stderr, code = runSplit(t, url, "list")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Regexp(t, `p9 +fancy +MISPLACED +4 +2`, stdout)
	_, stderr, code = runSplit(t, url, "delete", "p9")
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Contains(t, stderr, `p9 holds a checkpoint of WAL fancy that this build cannot read, written for p5`)
	require.Contains(t, stderr, "write it under its own name first (with a lowwater built with WAL fancy (package cli), "+
		"'set --force p5 ID' with the ID it holds, see verify)")
}

// On etcd a Load does not look for misplaced records, and a node of the
// pchannel it belongs to starts from nothing: verify says that, not that
// the node is held back.
func TestAMisplacedRecordOnEtcdIsToldAsEtcdTreatsIt(t *testing.T) {
	catalog, client := onDamagedEtcd(t)
	raw, err := persistence.EncodeRecord("orders-dml-0", persistence.Record{Checkpoint: wal.KafkaID(120)})
	require.NoError(t, err)
	_, err = client.Put(ctxT(t), "cli/wal/nrders-dml-0/consume-checkpoint", string(raw))
	require.NoError(t, err)
	stdout, stderr, code := runSplit(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stdout, "MISPLACED  nrders-dml-0: ")
	require.Contains(t, stderr, "a node of the pchannel it was written for, with nothing stored, starts from its vchannels' checkpoints")
	require.NotContains(t, stderr, "does not start")
	_, stderr, code = runSplit(t, catalog, "delete", "nrders-dml-0")
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Contains(t, stderr, "it may be the only copy of that pchannel's checkpoint; write it under its own name first "+
		"('set orders-dml-0 kafka:120', see verify)")
	stdout, stderr, code = runSplit(t, catalog, "set", "orders-dml-0", "kafka:120")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "orders-dml-0: created at kafka:120\n", stdout)
	// Written under its own name, it is a copy: delete needs no --force.
	stdout, stderr, code = runSplit(t, catalog, "delete", "nrders-dml-0")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "nrders-dml-0: deleted a misplaced record holding kafka:120 (orders-dml-0, whose it was, holds kafka:120)\n", stdout)

	// Under a name no node takes, which only delete --quoted reaches: it
	// failed on etcd, refused by the check of a name a node takes.
	// Each is orders-dml-0's, which holds its checkpoint now: a copy. The
	// first two are a byte from its name; the third is named by the names
	// stored. Of a pchannel not stored, a forced delete says its cost.
	copied := [2]string{" (orders-dml-0, whose it was, holds kafka:120)", ""}
	elsewhere, err := persistence.EncodeRecord("elsewhere-9", persistence.Record{Checkpoint: wal.KafkaID(120)})
	require.NoError(t, err)
	for key, want := range map[string][2]string{
		"orders-dml-\xb0":        copied,
		"orders-dml-0\x00":       copied,
		strings.Repeat("o", 600): copied,
		strings.Repeat("e", 600): {"", "warning: " + strconv.Quote(strings.Repeat("e", 600)) + ": it holds kafka:120, written for another pchannel's name: " +
			"it may be the only copy of that pchannel's checkpoint\n"},
	} {
		rec := raw
		if key == strings.Repeat("e", 600) {
			rec = elsewhere
		}
		_, err = client.Put(ctxT(t), "cli/wal/"+key+"/consume-checkpoint", string(rec))
		require.NoError(t, err)
		stdout, stderr, code = runSplit(t, catalog, "delete", "--force", "--quoted", strconv.Quote(key))
		require.Equal(t, cli.ExitOK, code, stderr)
		require.Equal(t, strconv.Quote(key)+": deleted a misplaced record holding kafka:120"+want[0]+"\n", stdout)
		require.Equal(t, want[1], stderr)
	}
	_, stderr, code = runSplit(t, catalog, "verify")
	require.Equal(t, cli.ExitOK, code, stderr)
}

// A restore that creates the pchannel a misplaced record was written for
// is refused as set is, before anything is written, and --force writes
// it; another pchannel it creates is not held back.
func TestARestoreBesideAMisplacedRecordNeedsForce(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"orders-dml-0": wal.KafkaID(120)})
	moveRecord(t, path, "orders-dml-0", "nrders-dml-0")
	dump := writeDumpFile(t, `{"pchannel":"orders-dml-0","wal":"kafka","checkpoint":"kafka:121"},{"pchannel":"b","wal":"kafka","checkpoint":"kafka:2"}`)
	_, stderr, code := runSplit(t, url, "restore", dump)
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Contains(t, stderr, "orders-dml-0: nothing stored under this name, but "+path+` holds a record under "nrders-dml-0" that was written for this one`)
	require.Contains(t, stderr, "1 of 2 checkpoints refused; nothing written")
	_, stderr, code = runSplit(t, url, "restore", "--force", dump)
	require.Equal(t, cli.ExitOK, code, stderr)
	b, err := persistence.OpenBolt(path, persistence.WithReadOnly(true))
	require.NoError(t, err)
	defer b.Close()
	for p, want := range map[string]wal.MessageID{"orders-dml-0": wal.KafkaID(121), "b": wal.KafkaID(2)} {
		id, err := b.Load(context.Background(), p)
		require.NoError(t, err)
		require.Equal(t, want, id)
	}
}

// plantRaw stores raw under key in the bbolt file at path.
func plantRaw(t *testing.T, path, key string, raw []byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(persistence.DefaultBucket)).Put([]byte(key), raw)
	}))
	require.NoError(t, db.Close())
}

// moveRecord moves the record of from under the key to, as a damaged key
// would read, in the bbolt file at path.
func moveRecord(t *testing.T, path, from, to string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(persistence.DefaultBucket))
		if err := bk.Put([]byte(to), bytes.Clone(bk.Get([]byte(from)))); err != nil {
			return err
		}
		return bk.Delete([]byte(from))
	}))
	require.NoError(t, db.Close())
}

// writeDumpFile writes a dump of the given checkpoint objects.
func writeDumpFile(t *testing.T, checkpoints string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[`+checkpoints+`]}`), 0o600))
	return path
}

// A repair below what a record written for the pchannel holds lowers it:
// set and restore say so, as a lowering says its replay, where the --force
// the repair needs let it pass unsaid. get names every record written for
// the pchannel and what each holds, and delete's refusal says what the
// pchannel holds now, and the raise that keeps the record.
func TestARepairBelowAMisplacedRecordSaysWhatItLowers(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"orders-dml-0": wal.KafkaID(200)})
	moveRecord(t, path, "orders-dml-0", "ordprs-dml-0")
	plantRaw(t, path, "orders-dml-00", mustEncode(t, "orders-dml-0", wal.KafkaID(100))) // a byte more
	_, stderr, code := runSplit(t, url, "get", "orders-dml-0")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stderr, "; 2 records written for it: orders-dml-00 holds kafka:100, ordprs-dml-0 holds kafka:200\n")

	for _, args := range [][]string{{"set", "--force", "--dry-run", "orders-dml-0", "kafka:150"}, {"set", "--force", "orders-dml-0", "kafka:150"}} {
		stdout, stderr, code := runSplit(t, append([]string{url}, args...)...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", args, stderr)
		require.Contains(t, stdout, "orders-dml-0: ")
		require.Equal(t, "warning: orders-dml-0: the record under ordprs-dml-0, written for it, holds kafka:200: "+
			"replay: consumers restart at kafka:150 and re-read what follows it up to kafka:200 (50 messages)\n", stderr, "%v", args)
	}
	_, stderr, code = runSplit(t, url, "delete", "ordprs-dml-0")
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Contains(t, stderr, "ordprs-dml-0 holds kafka:200, written for orders-dml-0 (its key damaged, or copied here): "+
		"orders-dml-0 holds kafka:150 now, and this may be the only copy of what it had; "+
		"write it under its own name first ('set orders-dml-0 kafka:200', a raise, see verify), or --force deletes it")
	// get of the pchannel, which stores something now, still tells it.
	stdout, stderr, code := runSplit(t, url, "get", "orders-dml-0")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stdout, "checkpoint  kafka:150\n")
	require.Contains(t, stdout, "misplaced   orders-dml-00 holds kafka:100, written for it (see verify)\n"+
		"misplaced   ordprs-dml-0 holds kafka:200, written for it (see verify)\n")
	// Forced, it says what it costs, as the refusal did.
	stdout, stderr, code = runSplit(t, url, "delete", "--force", "--dry-run", "ordprs-dml-0")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "ordprs-dml-0: would delete a misplaced record holding kafka:200\n", stdout)
	require.Equal(t, "warning: ordprs-dml-0: it holds kafka:200, written for orders-dml-0: "+
		"orders-dml-0 holds kafka:150 now, and this may be the only copy of what it had\n", stderr)
	// The lower one is a copy now.
	stdout, stderr, code = runSplit(t, url, "delete", "orders-dml-00")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "orders-dml-00: deleted a misplaced record holding kafka:100 (orders-dml-0, whose it was, holds kafka:150)\n", stdout)

	// restore says it as set does.
	url, path = boltWith(t, map[string]wal.MessageID{"orders-dml-0": wal.KafkaID(200)})
	moveRecord(t, path, "orders-dml-0", "ordprs-dml-0")
	dump := writeDumpFile(t, `{"pchannel":"orders-dml-0","wal":"kafka","checkpoint":"kafka:150"}`)
	_, stderr, code = runSplit(t, url, "restore", "--force", dump)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "warning: orders-dml-0: the record under ordprs-dml-0, written for it, holds kafka:200: "+
		"replay: consumers restart at kafka:150 and re-read what follows it up to kafka:200 (50 messages)\n", stderr)
}

// A record of another Pulsar partition than the one the pchannel stores
// is no copy of it, whatever the positions: delete keeps it without
// --force, as set refuses the partition without it, and a repair to
// another partition says so. A repair given without @P takes the
// record's partition: it took partition 0.
func TestAMisplacedRecordOfAnotherPartitionIsNoCopy(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"orders-dml-0": wal.PulsarID{LedgerID: 7, EntryID: 3, Partition: 2}})
	moveRecord(t, path, "orders-dml-0", "nrders-dml-0")
	// Without @P, the partition is the record's, as it is the stored one's.
	for _, args := range [][]string{{"set", "--force", "--dry-run", "orders-dml-0", "pulsar:7:4:0"},
		{"restore", "--force", "--dry-run", writeDumpFile(t, `{"pchannel":"orders-dml-0","wal":"pulsar","checkpoint":"pulsar:7:4:0"}`)}} {
		stdout, stderr, code := runSplit(t, append([]string{url}, args...)...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", args, stderr)
		require.Contains(t, stdout, "orders-dml-0: would create at pulsar:7:4:0@2\n", "%v", args)
		require.Empty(t, stderr, "%v", args)
	}
	stdout, stderr, code := runSplit(t, url, "set", "--force", "orders-dml-0", "pulsar:7:3:0@5")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, "orders-dml-0: created at pulsar:7:3:0@5\n", stdout)
	require.Equal(t, "warning: orders-dml-0: the record under nrders-dml-0, written for it, holds pulsar:7:3:0@2, "+
		"which pulsar:7:3:0@5 does not follow (another WAL or partition): its consumers lose their place\n", stderr)
	_, stderr, code = runSplit(t, url, "delete", "nrders-dml-0")
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Contains(t, stderr, "orders-dml-0 holds pulsar:7:3:0@5 now, and this may be the only copy of what it had; "+
		"write it under its own name first ('set --force orders-dml-0 pulsar:7:3:0@2', see verify)")
}

// A record copied under a name far from its own is named by the names
// stored, when its check names one of them: delete said that pchannel's
// node would start from its vchannels' checkpoints, where it stores one.
func TestACopyUnderAFarNameIsNamedByTheNamesStored(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"orders-dml-0": wal.KafkaID(500)})
	plantRaw(t, path, "zzz", mustEncode(t, "orders-dml-0", wal.KafkaID(700)))
	stdout, stderr, code := runSplit(t, url, "verify")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stdout, `MISPLACED  zzz: another pchannel's record: its key was damaged, or it was copied under this name; `+
		`it holds kafka:700, written for "orders-dml-0"`+"\n")
	_, stderr, code = runSplit(t, url, "delete", "zzz")
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Contains(t, stderr, "zzz holds kafka:700, written for orders-dml-0 (its key damaged, or copied here): "+
		"orders-dml-0 holds kafka:500 now, and this may be the only copy of what it had; "+
		"write it under its own name first ('set orders-dml-0 kafka:700', a raise, see verify)")
}

// The set a refusal gives names the pchannel and the ID whole, whatever
// the name holds: one with "ID" in it lost it to the ID.
func TestARefusalsSetNamesAPChannelWithIDInIt(t *testing.T) {
	url, path := boltWith(t, map[string]wal.MessageID{"orders-ID-0": wal.KafkaID(120)})
	moveRecord(t, path, "orders-ID-0", "nrders-ID-0")
	_, stderr, code := runSplit(t, url, "delete", "nrders-ID-0")
	require.Equal(t, cli.ExitRefused, code, stderr)
	require.Contains(t, stderr, "write it under its own name first ('set --force orders-ID-0 kafka:120', see verify)")
}
