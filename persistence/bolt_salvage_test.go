package persistence_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// salvaged maps each salvaged pchannel to its checkpoint's text, and
// checks that every record's state is want.
func salvaged(t *testing.T, s *persistence.Salvage, want persistence.PageState) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, r := range s.Records {
		require.Equal(t, want, r.State, "%s: read from page %d", r.PChannel, r.Page)
		require.Equal(t, wal.Name("kafka"), r.WAL)
		got[r.PChannel] = r.Checkpoint.String()
	}
	return got
}

// putRecord stores pchannel's record of id in bk, as the catalog writes
// it: for files laid out by hand.
func putRecord(bk *bolt.Bucket, pchannel string, id wal.MessageID) error {
	rec, err := persistence.EncodeRecord(pchannel, persistence.Record{Checkpoint: id})
	if err != nil {
		return err
	}
	return bk.Put([]byte(pchannel), rec)
}

// healthy is what writeHealthyBolt stores.
func healthy() map[string]string { return savedFrom(1000) }

// savedFrom is damagedRecords pchannels, pchannel i at kafka:base+i.
func savedFrom(base int) map[string]string {
	want := map[string]string{}
	for i := range damagedRecords {
		want[damagedName(i)] = wal.KafkaID(int64(base + i)).String()
	}
	return want
}

// Whatever the damage, a salvage neither panics nor gives a checkpoint
// the file did not hold for that pchannel: every record it returns is
// one that was saved, under the name it was saved for.
func TestSalvageNeverInventsACheckpoint(t *testing.T) {
	for _, c := range damagedCases() {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.db")
			writeHealthyBolt(t, path)
			rewrite(t, path, c.damage)
			s, err := noPanicValue(t, "SalvageBolt", func() (*persistence.Salvage, error) {
				return persistence.SalvageBolt(context.Background(), path)
			})
			if err != nil {
				require.ErrorIs(t, err, persistence.ErrCorruptStore)
				require.ErrorContains(t, err, path)
				return
			}
			requireSaved(t, s)
		})
	}
}

// requireSaved checks that each record s gives is the one
// writeHealthyBolt saved for its pchannel.
func requireSaved(t *testing.T, s *persistence.Salvage) {
	t.Helper()
	want := healthy()
	for _, r := range s.Records {
		require.Equal(t, want[r.PChannel], r.Checkpoint.String(), r.PChannel)
	}
}

// A file whose bucket's root page is damaged is refused whole by
// OpenBolt: every record is in it still, on leaf pages the root no longer
// reaches, and the freelist says they are not free.
func TestSalvageOfADamagedBranchPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		root := bucketRoot(t, data)
		require.Equal(t, uint16(branchPageFlag), binary.LittleEndian.Uint16(data[root*bboltPageSize+8:]))
		clear(data[root*bboltPageSize : (root+1)*bboltPageSize])
		return data
	})
	_, err := persistence.OpenBolt(path, persistence.WithReadOnly(true))
	require.ErrorIs(t, err, persistence.ErrCorruptStore)

	before := readFile(t, path)
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.Equal(t, healthy(), salvaged(t, s, persistence.PageLive))
	require.Equal(t, 1, s.Unreadable, "the zeroed root page")
	require.Zero(t, s.Damaged)
	require.Equal(t, bboltPageSize, s.PageSize)
	require.Equal(t, before, readFile(t, path), "a salvage writes nothing")
}

// With both meta pages gone, nothing says the page size, where the tree
// starts, or which pages are free: the size is the one at which pages say
// they are the page they are, and every record's page is of unknown
// state.
func TestSalvageWithoutMetaPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		clear(data[:2*bboltPageSize])
		return data
	})
	_, err := persistence.OpenBolt(path, persistence.WithReadOnly(true))
	require.ErrorIs(t, err, persistence.ErrCorruptStore)
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.Equal(t, bboltPageSize, s.PageSize)
	require.Equal(t, healthy(), salvaged(t, s, persistence.PageUnknown))
}

// bbolt writes a changed page elsewhere and frees the one before, which
// keeps the older records: a salvage takes the live page's, and of a
// pchannel whose live page is damaged, or that was deleted, it gives the
// freed page's, saying so.
func TestSalvagePrefersTheLiveRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	b := openBolt(t, path, persistence.WithNoSync(true))
	ctx := context.Background()
	// Raised, then lowered by an operator: the freed pages hold the
	// higher checkpoints, the live ones the lower.
	for i := range damagedRecords {
		require.NoError(t, b.Save(ctx, damagedName(i), wal.KafkaID(5000+i)))
	}
	require.NoError(t, b.Close())
	// One commit rewrites every leaf page: the pages before it are freed,
	// and none is reused, since nothing commits after it.
	commitRecords(t, path, func(i int) wal.MessageID { return wal.KafkaID(int64(2000 + i)) }, damagedName(7))

	want := healthy()
	for i := range damagedRecords {
		want[damagedName(i)] = wal.KafkaID(2000 + i).String()
	}
	delete(want, damagedName(7))
	s, err := persistence.SalvageBolt(ctx, path)
	require.NoError(t, err)
	got := map[string]string{}
	for _, r := range s.Records {
		require.Equal(t, persistence.PageLive, r.State, r.PChannel)
		require.GreaterOrEqual(t, r.Versions, 2, "%s: its page before the last commit is there too", r.PChannel)
		require.Nil(t, r.Higher, "%s: in a whole file, a freed page's higher checkpoint was lowered since", r.PChannel)
		got[r.PChannel] = r.Checkpoint.String()
	}
	require.Equal(t, want, got, "the live records, lowered, not the freed ones above them")
	// The file is whole: the pchannel found only on freed pages was
	// deleted, and is left out.
	require.True(t, s.Whole)
	require.Equal(t, 1, s.Deleted)
	require.Len(t, s.Records, damagedRecords-1)

	// A live leaf page zeroed: its pchannels come back from the freed
	// pages, as they were before the last commit, and say so.
	leaf := liveLeafPage(t, path)
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		clear(data[leaf*bboltPageSize : (leaf+1)*bboltPageSize])
		return data
	})
	s, err = persistence.SalvageBolt(ctx, path)
	require.NoError(t, err)
	require.Equal(t, 1, s.Unreadable)
	freed := 0
	for _, r := range s.Records {
		if r.State == persistence.PageFreed && r.PChannel != damagedName(7) {
			freed++
			require.Equal(t, wal.KafkaID(5000+mustIndex(t, r.PChannel)).String(), r.Checkpoint.String(), r.PChannel)
			continue
		}
		if r.PChannel != damagedName(7) {
			require.Equal(t, want[r.PChannel], r.Checkpoint.String(), r.PChannel)
		}
	}
	require.Positive(t, freed, "the zeroed page's pchannels")
	// The tree is damaged now: the deleted pchannel may be one of the
	// zeroed page's, and is salvaged, from its freed page.
	require.False(t, s.Whole)
	require.Len(t, s.Records, damagedRecords, "none lost: each had a freed page")
}

// liveLeafPage is the first leaf page of records the newest commit of the
// bbolt file at path holds: not the root's, which holds the bucket.
func liveLeafPage(t *testing.T, path string) int {
	t.Helper()
	var leaf int
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			if info.Type == "leaf" && info.Count > 1 {
				leaf = id
				return nil
			}
		}
	}))
	require.NoError(t, db.Close())
	require.NotZero(t, leaf)
	return leaf
}

// mustIndex is i of damagedName(i).
func mustIndex(t *testing.T, name string) int64 {
	t.Helper()
	var i int64
	_, err := fmt.Sscanf(name, "pchannel-%04d", &i)
	require.NoError(t, err)
	return i
}

// A file holding two catalogs (persistence.WithBucket) under the same
// pchannel names: a salvage of one gives its records alone, and once the
// tree of its bucket is damaged, leaves out the pages it no longer
// reaches, which may be the other's, rather than mix them in.
func TestSalvageOfOneBucketAmongTwo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	for _, c := range []struct {
		bucket string
		base   int
	}{{"tenant-a", 1000}, {"tenant-b", 9000}} {
		b := openBolt(t, path, persistence.WithNoSync(true), persistence.WithBucket(c.bucket))
		for i := range damagedRecords {
			require.NoError(t, b.Save(ctx, damagedName(i), wal.KafkaID(int64(c.base+i))))
		}
		require.NoError(t, b.Close())
	}
	s, err := persistence.SalvageBolt(ctx, path, persistence.WithBucket("tenant-a"))
	require.NoError(t, err)
	require.Equal(t, healthy(), salvaged(t, s, persistence.PageLive))
	require.Equal(t, []string{"tenant-b"}, s.OtherBuckets)
	require.Zero(t, s.LeftOut, "tenant-b's live pages are its tree's")
	_, err = persistence.SalvageBolt(ctx, path, persistence.WithBucket("tenant-c"))
	require.ErrorIs(t, err, persistence.ErrNoBucket)
	require.ErrorContains(t, err, `no bucket "tenant-c" found, only "tenant-a", "tenant-b"`)

	var rootA int
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error { rootA = int(tx.Bucket([]byte("tenant-a")).Root()); return nil }))
	require.NoError(t, db.Close())
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		clear(data[rootA*bboltPageSize : (rootA+1)*bboltPageSize])
		return data
	})
	s, err = persistence.SalvageBolt(ctx, path, persistence.WithBucket("tenant-a"))
	require.NoError(t, err)
	// Its leaves are told as its own only where a tree of an earlier
	// commit of tenant-a's, and none of tenant-b's, reaches them; the
	// others are left out. Never is tenant-b's checkpoint given.
	for _, r := range s.Records {
		require.Equal(t, wal.KafkaID(int64(1000+mustIndex(t, r.PChannel))).String(), r.Checkpoint.String(), r.PChannel)
	}
	require.Empty(t, s.Ambiguous)
	if len(s.Records) < damagedRecords {
		require.Positive(t, s.LeftOut, "the ones not salvaged are told left out")
	}
	s, err = persistence.SalvageBolt(ctx, path, persistence.WithBucket("tenant-b"))
	require.NoError(t, err)
	want := map[string]string{}
	for i := range damagedRecords {
		want[damagedName(i)] = wal.KafkaID(int64(9000 + i)).String()
	}
	require.Equal(t, want, salvaged(t, s, persistence.PageLive))
}

// A page one bucket freed may be reused by another, and still be reached
// by the first bucket's tree of an earlier commit if the file holds its
// root page: the live trees are asked first, so that a salvage of one
// bucket never gives the other's records. (bbolt's allocation decides
// whether this file holds such a page; the check holds either way.)
func TestSalvageOfAPageReusedByAnotherBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	put := func(bucket, prefix string, base int) {
		require.NoError(t, db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte(bucket))
			if err != nil {
				return err
			}
			for i := range damagedRecords {
				if err := putRecord(bk, fmt.Sprintf("%s-%04d", prefix, i), wal.KafkaID(int64(base+i))); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	put(defaultBucket, "a", 1000) // the pages of an earlier commit of a,
	put(defaultBucket, "a", 2000) // freed by this one,
	put("other", "b", 9000)       // and reused by b
	require.NoError(t, db.Close())
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.Len(t, s.Records, damagedRecords)
	for _, r := range s.Records {
		require.True(t, strings.HasPrefix(r.PChannel, "a-"), "%s, another bucket's, salvaged as this one's", r.PChannel)
		require.Equal(t, wal.KafkaID(int64(2000+mustIndexOf(t, r.PChannel))).String(), r.Checkpoint.String())
	}
	require.Empty(t, s.Ambiguous)
	require.Zero(t, s.LeftOut)
}

// mustIndexOf is i of a name that ends in -%04d.
func mustIndexOf(t *testing.T, name string) int {
	t.Helper()
	var i int
	_, err := fmt.Sscanf(name[strings.LastIndexByte(name, '-')+1:], "%04d", &i)
	require.NoError(t, err)
	return i
}

// One bit of an element's flags turns a record into a bucket, or a
// bucket into a record: what its value is decides. A record flagged a
// bucket is still the record (and its "root", the first bytes of every
// record, page 2, is no other bucket's tree); another bucket whose flag
// is cleared on every page that names it is still another bucket.
func TestSalvageOfAFlippedBucketFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		leaf := leafPageOf(t, data, uint64(bucketRoot(t, data)))
		data[leaf*uint64(bboltPageSize)+pageHeaderSize] |= 0x01 // its first element's flags
		return data
	})
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.Equal(t, healthy(), salvaged(t, s, persistence.PageLive))
	require.Positive(t, s.Damaged)

	// A record's value cut to 16 bytes reads as a bucket's header (every
	// record begins with its version and a term of 0: "page 2"); a page
	// that holds records holds no bucket, and page 2's records stay.
	path = filepath.Join(t.TempDir(), "cut.db")
	writeHealthyBolt(t, path)
	var cutName string
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		le := binary.LittleEndian
		page := data[leafPageOf(t, data, uint64(bucketRoot(t, data)))*uint64(bboltPageSize):]
		elem := page[pageHeaderSize:]
		at := pageHeaderSize + int(le.Uint32(elem[4:]))
		cutName = string(page[at : at+int(le.Uint32(elem[8:]))])
		le.PutUint32(elem[12:], 16)
		return data
	})
	s, err = persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	want := healthy()
	delete(want, cutName)
	got := map[string]string{}
	for _, r := range s.Records {
		if r.PChannel != cutName {
			got[r.PChannel] = r.Checkpoint.String()
		}
	}
	require.Equal(t, want, got, "no record lost to a bucket that is not one")
	require.Empty(t, s.OtherBuckets)

	path = filepath.Join(t.TempDir(), "two.db")
	ctx := context.Background()
	for bucket, prefix := range map[string]string{defaultBucket: "pchannel", "other": "theirs"} {
		b := openBolt(t, path, persistence.WithNoSync(true), persistence.WithBucket(bucket))
		for i := range damagedRecords {
			require.NoError(t, b.Save(ctx, fmt.Sprintf("%s-%04d", prefix, i), wal.KafkaID(int64(1000+i))))
		}
		require.NoError(t, b.Close())
	}
	cleared := 0
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		eachBucketElement(data, func(_, elem []byte, name string) {
			if name == "other" {
				elem[0] &^= 0x01
				cleared++
			}
		})
		return data
	})
	require.Positive(t, cleared)
	s, err = persistence.SalvageBolt(ctx, path)
	require.NoError(t, err)
	require.Equal(t, []string{"other"}, s.OtherBuckets)
	require.Equal(t, healthy(), salvaged(t, s, persistence.PageLive), "none of the other bucket's")
}

// Two buckets, and every page that holds the elements naming them lost:
// no page can be told to be one bucket's rather than the other's. The
// pchannels they share are ambiguous, and left out, never given the
// other bucket's checkpoint.
func TestSalvageWithTheBucketsLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	ctx := context.Background()
	for bucket, base := range map[string]int{defaultBucket: 1000, "other": 100000} {
		b := openBolt(t, path, persistence.WithNoSync(true), persistence.WithBucket(bucket))
		for i := range damagedRecords {
			require.NoError(t, b.Save(ctx, damagedName(i), wal.KafkaID(int64(base+i))))
		}
		require.NoError(t, b.Close())
	}
	zeroed := 0
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		eachBucketElement(data, func(page, _ []byte, _ string) {
			clear(page)
			zeroed++
		})
		return data
	})
	require.Positive(t, zeroed)
	s, err := persistence.SalvageBolt(ctx, path)
	require.NoError(t, err)
	require.Empty(t, s.Records, "the other bucket's checkpoints are never given as this one's")
	require.Len(t, s.Ambiguous, damagedRecords)
	a := s.Ambiguous[0]
	require.Equal(t, damagedName(0), a.PChannel)
	require.ElementsMatch(t, []string{"kafka:1000", "kafka:100000"}, []string{a.Checkpoints[0].String(), a.Checkpoints[1].String()})
}

// The freelist alone damaged: which pages an earlier commit freed can no
// longer be told from pages damage cut off the tree, so a pchannel found
// only on a page the tree does not reach (here, deleted) is salvaged, as
// freed, for an operator to judge; the live ones are all there.
func TestSalvageWithTheFreelistLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	b := openBolt(t, path, persistence.WithNoSync(true))
	require.NoError(t, b.Delete(context.Background(), damagedName(7)))
	require.NoError(t, b.Close())
	rewrite(t, path, onFreelist(func(page []byte) { clear(page) }))
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.False(t, s.Whole)
	require.Equal(t, 1, s.Unreadable, "the freelist page")
	got := map[string]string{}
	for _, r := range s.Records {
		if r.PChannel == damagedName(7) {
			require.Equal(t, persistence.PageUnknown, r.State)
			continue
		}
		require.Equal(t, persistence.PageLive, r.State, r.PChannel)
		got[r.PChannel] = r.Checkpoint.String()
	}
	want := healthy()
	delete(want, damagedName(7))
	require.Equal(t, want, got)
}

// A branch element damaged to point at a page the freelist frees, which
// holds an operator's lowering's earlier, higher checkpoint: the tree and
// the freelist disagree, and which of them is damaged cannot be told (an
// id of the freelist changed into a live page's looks the same). So both
// pages' states are unknown, the one reached and freed, and the one the
// branch no longer reaches, freed by none: taken for live, cut off by
// damage, it gave a deleted pchannel back as live where the freelist was
// the damaged one. The highest found is dumped, UNSURE.
func TestSalvageOfABranchPointingAtAFreedPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	var before, after uint64 // the leaf holding pchannel-0000, before and after its lowering
	leafOf := func() (id uint64) {
		db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
		require.NoError(t, err)
		defer db.Close()
		require.NoError(t, db.View(func(tx *bolt.Tx) error {
			c := tx.Bucket([]byte(defaultBucket)).Cursor()
			c.First()
			id = leafPageOf(t, readFile(t, path), uint64(tx.Bucket([]byte(defaultBucket)).Root()))
			return nil
		}))
		return id
	}
	before = leafOf()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		rec, err := persistence.EncodeRecord(damagedName(0), persistence.Record{Checkpoint: wal.KafkaID(5)})
		if err != nil {
			return err
		}
		return tx.Bucket([]byte(defaultBucket)).Put([]byte(damagedName(0)), rec)
	}))
	require.NoError(t, db.Close())
	after = leafOf()
	require.NotEqual(t, before, after)
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		root := uint64(bucketRoot(t, data))
		branch := data[root*uint64(bboltPageSize):]
		require.Equal(t, after, binary.LittleEndian.Uint64(branch[pageHeaderSize+8:]))
		binary.LittleEndian.PutUint64(branch[pageHeaderSize+8:], before)
		return data
	})
	_, err = persistence.OpenBolt(path, persistence.WithReadOnly(true))
	require.ErrorIs(t, err, persistence.ErrCorruptStore)
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.False(t, s.Whole)
	r := s.Records[0]
	require.Equal(t, damagedName(0), r.PChannel)
	require.Equal(t, "kafka:1000", r.Checkpoint.String())
	require.Equal(t, persistence.PageUnknown, r.State)
	require.Equal(t, before, r.Page)
	require.Equal(t, 2, r.Versions)
}

// leafPageOf is the first leaf page under the branch page root.
func leafPageOf(t *testing.T, data []byte, root uint64) uint64 {
	t.Helper()
	page := data[root*uint64(bboltPageSize):]
	require.Equal(t, uint16(branchPageFlag), binary.LittleEndian.Uint16(page[8:]))
	return binary.LittleEndian.Uint64(page[pageHeaderSize+8:])
}

// A file cut short, a pipe, a lock held while the command's time ends,
// a page size that is no power of two with the meta page that says it
// gone: each is told, and none hangs.
func TestSalvageOfOddFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	cut := filepath.Join(dir, "cut.db")
	writeHealthyBolt(t, cut)
	data := readFile(t, cut)
	require.NoError(t, os.WriteFile(cut, data[:len(data)/2], 0o600))
	s, err := persistence.SalvageBolt(ctx, cut)
	require.NoError(t, err)
	require.Equal(t, len(data)/2/bboltPageSize, s.Pages)
	require.Positive(t, s.Missing)

	fifo := filepath.Join(dir, "fifo.db")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err = persistence.SalvageBolt(ctx, fifo)
	require.ErrorContains(t, err, "not a regular file")

	held := filepath.Join(dir, "held.db")
	b := openBolt(t, held)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = persistence.SalvageBolt(short, held, persistence.WithOpenTimeout(time.Minute))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second, "the wait for the lock ends with the context")
	require.NoError(t, b.Close())

	odd := filepath.Join(dir, "odd.db")
	db, err := bolt.Open(odd, 0o600, &bolt.Options{PageSize: 4000})
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucket([]byte(defaultBucket))
		if err != nil {
			return err
		}
		for i := range damagedRecords {
			if err := putRecord(bk, damagedName(i), wal.KafkaID(int64(1000+i))); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
	rewrite(t, odd, func(t *testing.T, data []byte) []byte {
		clear(data[:4000])
		return data
	})
	s, err = persistence.SalvageBolt(ctx, odd)
	require.NoError(t, err)
	require.Equal(t, 4000, s.PageSize)
	require.NotNil(t, s.MetaDamage)
	require.Equal(t, 0, s.MetaDamage.Page)
	// The commit that wrote them was meta page 0's: the other is the
	// empty file's, whose tree reaches none of them, and the records
	// read as freed, not as deleted.
	require.False(t, s.Whole)
	require.Equal(t, healthy(), salvaged(t, s, persistence.PageFreed))
}

// A bucket small enough is kept inside its parent's page: its records
// are read there, with the meta pages gone too.
func TestSalvageOfASmallBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b := openBolt(t, path)
	ctx := context.Background()
	for i := range 3 {
		require.NoError(t, b.Save(ctx, damagedName(i), wal.KafkaID(int64(1000+i))))
	}
	require.NoError(t, b.Close())
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		clear(data[:2*bboltPageSize])
		return data
	})
	s, err := persistence.SalvageBolt(ctx, path)
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		damagedName(0): "kafka:1000", damagedName(1): "kafka:1001", damagedName(2): "kafka:1002",
	}, salvaged(t, s, persistence.PageUnknown))
}

// A salvage reads under a shared lock: a node writing the file keeps it
// out (ErrLocked), and a file that is no bbolt file is ErrCorruptStore.
func TestSalvageRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.db")
	b := openBolt(t, path)
	_, err := persistence.SalvageBolt(context.Background(), path, persistence.WithOpenTimeout(10*time.Millisecond))
	require.ErrorIs(t, err, persistence.ErrLocked)
	require.NoError(t, b.Close())

	text := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(text, []byte("not a bbolt file\n"), 0o600))
	_, err = persistence.SalvageBolt(context.Background(), text)
	require.ErrorIs(t, err, persistence.ErrCorruptStore)

	_, err = persistence.SalvageBolt(context.Background(), filepath.Join(dir, "missing.db"))
	require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
	_, err = persistence.SalvageBolt(context.Background(), path, persistence.WithBucket(""))
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = persistence.SalvageBolt(ctx, path)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, persistence.ErrCorruptStore)
}

// A meta page damaged after the commit it held was acknowledged: bbolt
// reads the file as of the commit before, and so do the pages' states. A
// salvage takes that commit's records, and tells the hidden commit's as
// Higher, with the damage.
func TestSalvageUnderADamagedNewerMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	commitRecords(t, path, func(i int) wal.MessageID { return wal.KafkaID(int64(7000 + i)) }, damagedName(9))
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		// The newer meta page: the one of the higher transaction ID.
		le := binary.LittleEndian
		newer := 0
		if le.Uint64(data[bboltPageSize+pageHeaderSize+48:]) > le.Uint64(data[pageHeaderSize+48:]) {
			newer = 1
		}
		data[newer*bboltPageSize+pageHeaderSize+56] ^= 0xff // its checksum
		return data
	})
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.NotNil(t, s.MetaDamage)
	require.True(t, s.MetaDamage.Known && s.MetaDamage.Newer, "%v", s.MetaDamage)
	require.Equal(t, healthy(), salvaged(t, s, persistence.PageLive), "the commit the file reads as")
	// The damaged page's tree still reads whole: what its commit changed
	// is told, pchannel by pchannel.
	for _, r := range s.Records {
		if r.PChannel == damagedName(9) {
			require.True(t, r.HiddenDeleted, "deleted in the hidden commit")
			require.Nil(t, r.Hidden)
			continue
		}
		require.False(t, r.HiddenDeleted)
		require.Equal(t, wal.KafkaID(7000+mustIndex(t, r.PChannel)).String(), wal.String(r.Hidden), r.PChannel)
		require.Equal(t, wal.KafkaID(7000+mustIndex(t, r.PChannel)).String(), wal.String(r.Higher), r.PChannel)
	}
}

// commitRecords writes, in one bbolt commit, damagedName(i)'s record of
// id(i) for each i, and deletes the pchannels named deleted: a commit
// that rewrites every leaf page, as an operator's bulk change would.
func commitRecords(t *testing.T, path string, id func(i int) wal.MessageID, deleted ...string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(defaultBucket))
		for i := range damagedRecords {
			if err := putRecord(bk, damagedName(i), id(i)); err != nil {
				return err
			}
		}
		for _, p := range deleted {
			if err := bk.Delete([]byte(p)); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
}

// eachBucketElement calls do with each element flagged a bucket's in the
// leaf pages of a bbolt file's bytes, its page and the bucket's name.
func eachBucketElement(data []byte, do func(page, elem []byte, name string)) {
	le := binary.LittleEndian
	for id := 2; (id+1)*bboltPageSize <= len(data); id++ {
		page := data[id*bboltPageSize : (id+1)*bboltPageSize]
		if le.Uint64(page) != uint64(id) || le.Uint16(page[8:]) != leafPageFlag {
			continue
		}
		for e := range int(le.Uint16(page[10:])) {
			elem := page[pageHeaderSize+e*leafElemSize:]
			at := pageHeaderSize + e*leafElemSize + int(le.Uint32(elem[4:]))
			if elem[0]&0x01 != 0 {
				do(page, elem, string(page[at:at+int(le.Uint32(elem[8:]))]))
			}
		}
	}
}

// A record whose key was damaged (one bit, the keys still in order) is
// whole but for its name check, which names the pchannel one byte away
// that it was written for, as verify's MISPLACED says: salvage dumps it as
// that pchannel's. It left it out as no lowwater record, and dumped the
// older copy a freed page held: restored, the pchannel went back.
func TestSalvageOfARecordUnderADamagedKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	commitRecords(t, path, func(i int) wal.MessageID { return wal.KafkaID(int64(9000 + i)) })
	name, damaged := damagedName(9), "pchannel-000;" // '9' ^ 0x02: still before pchannel-0010
	var live int
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, PreLoadFreelist: true})
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, db.View(func(tx *bolt.Tx) error {
		for id := 2; (id+1)*bboltPageSize <= len(data); id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info != nil && info.Type == "leaf" && bytes.Contains(data[id*bboltPageSize:(id+1)*bboltPageSize], []byte(name)) {
				live = id
			}
		}
		return nil
	}))
	require.NoError(t, db.Close())
	require.NotZero(t, live)
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		page := data[live*bboltPageSize : (live+1)*bboltPageSize]
		at := bytes.Index(page, []byte(name))
		page[at+len(name)-1] ^= 0x02
		return data
	})

	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	want := savedFrom(9000)
	got := map[string]string{}
	for _, r := range s.Records {
		got[r.PChannel] = r.Checkpoint.String()
		if r.PChannel == name {
			require.Equal(t, persistence.PageLive, r.State)
			require.Equal(t, uint64(live), r.Page)
			require.Equal(t, damaged, r.StoredUnder)
			require.Nil(t, r.Higher)
		} else {
			require.Empty(t, r.StoredUnder, r.PChannel)
		}
	}
	require.Equal(t, want, got, "the misplaced record as its own pchannel's, not its older copy")
	require.Equal(t, 1, s.Damaged)
	require.False(t, s.Whole)
}

// A file cut short within its second page has lost that meta page, not
// had it damaged: salvage says which.
func TestSalvageOfAFileCutWithinItsSecondPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	require.NoError(t, os.Truncate(path, int64(bboltPageSize)))
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.Nil(t, s.MetaDamage, "said damaged, where it is gone")
	require.Positive(t, s.Missing)
	require.NotContains(t, s.Broken, "damaged")
	require.Empty(t, s.Records)
}

// A live leaf page whose type flag is damaged by one bit holds its
// records whole all the same: salvage reads them, and says what is wrong
// with the page. It read the page as none, and dumped the older copies of
// its records from freed pages.
func TestSalvageOfALeafWhoseTypeFlagIsDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	commitRecords(t, path, func(i int) wal.MessageID { return wal.KafkaID(int64(9000 + i)) })
	leaf := liveLeafPage(t, path)
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		data[leaf*bboltPageSize+8] ^= 0x40 // 0x02, a leaf's, reads 0x42
		return data
	})

	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	want := savedFrom(9000)
	onLeaf := 0
	for _, r := range s.Records {
		if r.Page == uint64(leaf) {
			onLeaf++
		}
	}
	require.Equal(t, want, salvaged(t, s, persistence.PageLive), "the live records, not their older copies")
	require.Positive(t, onLeaf)
	require.False(t, s.Whole)
	require.Equal(t, fmt.Sprintf("page %d, in the tree, is a leaf page whose type flag is damaged (it reads 0x42)", leaf), s.Broken)
	require.Zero(t, s.Unreadable)
}

// A record under a damaged key whose name check names a name the file
// holds nowhere else is not dumped under it: a key damaged in several
// bytes may sit a byte from a name that matches the check by chance.
func TestSalvageInventsNoNameForARecordUnderADamagedKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	boltUpdate(t, path, nil, func(tx *bolt.Tx) error {
		rec, err := persistence.EncodeRecord("orders-dml-0", persistence.Record{Checkpoint: wal.KafkaID(120)})
		if err != nil {
			return err
		}
		return tx.Bucket([]byte(defaultBucket)).Put([]byte("nrders-dml-0"), rec)
	})
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.Equal(t, healthy(), salvaged(t, s, persistence.PageLive), "neither the key nor the name it is a byte from")
	require.Equal(t, 1, s.Damaged)
}

// A copy under a damaged key of a record its pchannel's own key holds
// too, alike, says nothing more: the record dumped is the one under its
// own key, with no MISPLACED line.
func TestSalvagePrefersTheOwnKeyToAMisplacedCopyAlike(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	boltUpdate(t, path, nil, func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(defaultBucket))
		if err := putRecord(bk, "orders-dml-0", wal.KafkaID(120)); err != nil {
			return err
		}
		return bk.Put([]byte("nrders-dml-0"), bytes.Clone(bk.Get([]byte("orders-dml-0"))))
	})
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	want := healthy()
	want["orders-dml-0"] = "kafka:120"
	require.Equal(t, want, salvaged(t, s, persistence.PageLive))
	for _, r := range s.Records {
		require.Empty(t, r.StoredUnder, r.PChannel)
	}
}
