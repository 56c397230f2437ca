package cli_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// salvageNames is how many pchannels the salvaged files hold: enough for
// a bucket whose root is a branch page over several leaves.
const salvageNames = 300

func salvageName(i int) string { return fmt.Sprintf("by-dev-rootcoord-dml_%d", i) }

// A file whose bucket's root page is damaged is refused whole, and the
// refusal says how to salvage it. dump --salvage then writes every
// record its leaf pages hold, restore puts them into a new file, and the
// operator has every checkpoint back.
func TestDumpSalvageOfADamagedFile(t *testing.T) {
	ids := map[string]wal.MessageID{}
	for i := range salvageNames {
		ids[salvageName(i)] = wal.KafkaID(int64(1000 + i))
	}
	url, path := boltWith(t, ids)
	var root uint64
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte(persistence.DefaultBucket)).Root())
		return nil
	}))
	pageSize := db.Info().PageSize
	require.NoError(t, db.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	clear(data[root*uint64(pageSize) : (root+1)*uint64(pageSize)])
	require.NoError(t, os.WriteFile(path, data, 0o600))

	_, stderr, code := runSplit(t, url, "list")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stderr, "or salvage the records its pages still hold into a dump (lowwater --catalog bolt:"+path+" dump --salvage salvaged.json), "+
		"check what it says, and restore the dump into a new file (lowwater --catalog bolt:NEW.db restore salvaged.json)")

	out := filepath.Join(t.TempDir(), "salvaged.json")
	stdout, stderr, code := runSplit(t, url, "dump", "--salvage", out)
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Equal(t, fmt.Sprintf("salvaged 300 checkpoints of bucket %q from %s: %d pages of %d bytes, 1 unreadable; 0 elements damaged\n"+
		"damaged: page %d, in the tree, reads as no page\n"+
		"dumping 300 checkpoints from bbolt file %s (salvaged) to %s\n", persistence.DefaultBucket, path, len(data)/pageSize, pageSize, root, path, out), stdout)
	require.Equal(t, "lowwater: "+path+" is damaged: the dump is written, with every whole record its pages hold; restore it into a new file\n", stderr)

	fresh := "--catalog=bolt:" + filepath.Join(t.TempDir(), "new.db")
	stdout, stderr, code = runSplit(t, fresh, "restore", out)
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stdout, "restored 300 checkpoints into")
	stdout, stderr, code = runSplit(t, fresh, "list", "--json")
	require.Equal(t, cli.ExitOK, code, stderr)
	for i := range salvageNames {
		require.Contains(t, stdout, fmt.Sprintf(`"checkpoint": "kafka:%d"`, 1000+i))
	}
	require.Equal(t, salvageNames, strings.Count(stdout, `"pchannel"`))
	// The new file is whole: its salvage is its dump, and says nothing.
	dumped, stderr, code := runSplit(t, fresh, "dump")
	require.Equal(t, cli.ExitOK, code, stderr)
	stdout, stderr, code = runSplit(t, fresh, "dump", "--salvage", "-")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, strings.Replace(dumped, ".db\",", ".db (salvaged)\",", 1), stdout)
	require.True(t, strings.HasPrefix(stderr, "salvaged 300 checkpoints of bucket "), stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), stderr)
}

// A pchannel deleted in the last commit is still on the page that commit
// freed, and one lowered by it keeps its higher checkpoint there. While
// the file is whole, dump --salvage is its dump: the deleted one left
// out, and said so, the lowered ones at their live checkpoints, exit 0.
// With its freelist damaged, what the freed pages hold can no longer be
// told from live pages damage cut off: the deleted one is dumped on an
// UNSURE line, the lowered ones' higher checkpoints named on HIGHER
// lines, with warnings, and it exits ExitCorrupt, so that they are not
// restored unread.
func TestDumpSalvageSaysWhatCameFromFreedPages(t *testing.T) {
	ids := map[string]wal.MessageID{}
	for i := range salvageNames {
		ids[salvageName(i)] = wal.KafkaID(int64(5000 + i))
	}
	url, path := boltWith(t, ids)
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(persistence.DefaultBucket))
		for i := range 3 {
			rec, err := persistence.EncodeRecord(salvageName(i), persistence.Record{Checkpoint: wal.KafkaID(int64(2000 + i))})
			if err != nil {
				return err
			}
			if err := bk.Put([]byte(salvageName(i)), rec); err != nil {
				return err
			}
		}
		return bk.Delete([]byte(salvageName(7)))
	}))
	require.NoError(t, db.Close())
	info, err := os.Stat(path)
	require.NoError(t, err)
	summary := fmt.Sprintf("salvaged 299 checkpoints of bucket %q from %s: %d pages of %d bytes, ",
		persistence.DefaultBucket, path, info.Size()/int64(os.Getpagesize()), os.Getpagesize())

	dumped, stderr, code := runSplit(t, url, "dump")
	require.Equal(t, cli.ExitOK, code, stderr)
	stdout, stderr, code := runSplit(t, url, "dump", "--salvage")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Equal(t, strings.Replace(dumped, ".db\",", ".db (salvaged)\",", 1), stdout)
	require.Equal(t, summary+"0 unreadable; 0 elements damaged\n"+
		"left out: 1 pchannel found only on pages a later commit freed, deleted since (the file's tree is whole)\n", stderr)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	clear(data[freelistPage(t, data)*os.Getpagesize():][:os.Getpagesize()])
	require.NoError(t, os.WriteFile(path, data, 0o600))
	stdout, stderr, code = runSplit(t, url, "dump", "--salvage")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stdout, `"checkpoint": "kafka:5007"`)
	require.Contains(t, stdout, `"checkpoint": "kafka:2001"`)
	require.NotContains(t, stdout, `"checkpoint": "kafka:5001"`)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	want := []string{
		"HIGHER  by-dev-rootcoord-dml_0: kafka:2000 dumped, kafka:5000 on freed page ",
		"HIGHER  by-dev-rootcoord-dml_1: kafka:2001 dumped, kafka:5001 on freed page ",
		"HIGHER  by-dev-rootcoord-dml_2: kafka:2002 dumped, kafka:5002 on freed page ",
		"UNSURE  by-dev-rootcoord-dml_7: kafka:5007, on page ",
		"warning: 1 pchannel (UNSURE above) read from pages whose state the file no longer tells",
		"warning: 3 pchannels (HIGHER above) with a higher checkpoint on a freed page than the live one dumped: each was lowered or replaced since (set --force), " +
			"or the commit that wrote the higher one is hidden by a damaged meta page. A checkpoint too low replays records, one too high skips them: " +
			"raise one in the dump only if it is known to be the last saved",
		strings.Replace(summary, "299", "300", 1) + "1 unreadable; 0 elements damaged",
		fmt.Sprintf("damaged: its freelist, page %d, does not read whole", freelistPage(t, data)),
		"lowwater: " + path + " is damaged: the dump is written: read the warnings above before restoring it",
	}
	require.Len(t, lines, len(want), stderr)
	for i, w := range want {
		require.True(t, strings.HasPrefix(lines[i], w), "line %d: %q, want it to begin %q", i, lines[i], w)
	}

	_, stderr, code = runSplit(t, "--catalog=etcd://127.0.0.1:1/lowwater", "dump", "--salvage")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, stderr, "dump --salvage reads a bbolt file's pages: an etcd catalog has none")
}

// freelistPage is the freelist page the newer of a bbolt file's two meta
// pages names (bbolt's layout: a 16-byte page header, then the meta's
// magic, version, page size, flags, root bucket, freelist page, high
// water mark and transaction ID).
func freelistPage(t *testing.T, data []byte) int {
	t.Helper()
	le := binary.LittleEndian
	var txid, freelist uint64
	for _, off := range []int{0, os.Getpagesize()} {
		meta := data[off+16:]
		if tx := le.Uint64(meta[48:]); tx >= txid {
			txid, freelist = tx, le.Uint64(meta[32:])
		}
	}
	require.Greater(t, freelist, uint64(1))
	return int(freelist)
}

// An empty file holds nothing to salvage: the refusal of every other
// command does not send the operator to a salvage that can only say so.
func TestDumpSalvageOfAnEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.db")
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, stderr, code := runSplit(t, "--catalog=bolt:"+path, "list")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stderr, "an empty file holds nothing to salvage")
	require.NotContains(t, stderr, "dump --salvage")
	stdout, stderr, code := runSplit(t, "--catalog=bolt:"+path, "dump", "--salvage", "-")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "the file is empty")
}

// A file with nothing of bbolt's in it, most likely a wrong path, is not
// sent to a salvage either: the refusal says to check the path.
func TestAFileThatIsNotBboltIsNotSentToSalvage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lowwater.yaml")
	require.NoError(t, os.WriteFile(path, []byte("catalog: bolt:/var/lib/lowwater/checkpoints.db\n"), 0o600))
	_, stderr, code := runSplit(t, "--catalog=bolt:"+path, "list")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stderr, "check the path; if it is the catalog's, restore it from a backup: nothing of bbolt's is left in it to salvage")
	require.NotContains(t, stderr, "dump --salvage")
	_, stderr, code = runSplit(t, "--catalog=bolt:"+path, "dump", "--salvage", "-")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Contains(t, stderr, "no page size at which the file holds bbolt pages")
}

// Two buckets of the asked name on live pages, as one byte of damage
// makes of a file written before lowwater marked its buckets: both are
// dumped, and a warning says so, where the sibling's records came among
// ours with no line.
func TestDumpSalvageOfTwoBucketsOfOneName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		for b, prefix := range []string{"a", "b"} {
			bk, err := tx.CreateBucket(fmt.Appendf(nil, "tenant-%d", b)) // unmarked
			if err != nil {
				return err
			}
			for i := range 50 {
				name := fmt.Sprintf("%s-%d", prefix, i)
				rec, err := persistence.EncodeRecord(name, persistence.Record{Checkpoint: wal.KafkaID(int64(i))})
				if err != nil {
					return err
				}
				if err := bk.Put([]byte(name), rec); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(data), "tenant-1"))
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), "tenant-1", "tenant-0", 1)), 0o600))

	stdout, stderr, code := runSplit(t, "--catalog=bolt:"+path, "--bucket=tenant-0", "dump", "--salvage")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	require.Equal(t, 100, strings.Count(stdout, `"pchannel"`))
	require.Contains(t, stderr, `warning: 2 buckets on live pages are taken for bucket "tenant-0", where a file holds one: `+
		"made before lowwater marked its buckets, another's renamed by damage, or one nested in another's and cut off by damage")
	require.Contains(t, stderr, "\ndamaged: page ")
}

// The commands the refusal of a damaged file gives, pasted as they are
// (the new file and the dump named), bring its checkpoints back into a
// new file, of the bucket given.
func TestTheSalvageAdviceRunsAsGiven(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenant.db")
	b, err := persistence.OpenBolt(path, persistence.WithBucket("tenant-0"))
	require.NoError(t, err)
	for i := range salvageNames {
		require.NoError(t, b.Save(context.Background(), salvageName(i), wal.KafkaID(int64(1000+i))))
	}
	require.NoError(t, b.Close())
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	var root uint64
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("tenant-0")).Root())
		return nil
	}))
	pageSize := uint64(db.Info().PageSize)
	require.NoError(t, db.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	clear(data[root*pageSize : (root+1)*pageSize])
	require.NoError(t, os.WriteFile(path, data, 0o600))

	_, stderr, code := runSplit(t, "--catalog=bolt:"+path, "--bucket=tenant-0", "list")
	require.Equal(t, cli.ExitCorrupt, code, stderr)
	commands := regexp.MustCompile(`\(lowwater ([^)]*)\)`).FindAllStringSubmatch(stderr, -1)
	require.Len(t, commands, 2, stderr)
	dir := t.TempDir()
	for i, c := range commands {
		args := strings.Fields(strings.NewReplacer("NEW.db", filepath.Join(dir, "new.db"), "salvaged.json", filepath.Join(dir, "salvaged.json")).Replace(c[1]))
		_, stderr, code := runSplit(t, args...)
		// The salvage exits as for a damaged file, its dump written.
		require.Equal(t, []int{cli.ExitCorrupt, cli.ExitOK}[i], code, "lowwater %s: %s", c[1], stderr)
	}
	stdout, stderr, code := runSplit(t, "--catalog=bolt:"+filepath.Join(dir, "new.db"), "--bucket=tenant-0", "list")
	require.Equal(t, cli.ExitOK, code, stderr)
	require.Contains(t, stdout, fmt.Sprintf("%d pchannels", salvageNames))
}
