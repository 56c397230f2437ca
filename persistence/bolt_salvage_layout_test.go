package persistence_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A leaf element whose offset was made to point at the next element's
// key, of the same sizes, reads that element's record, whole: the page's
// records all check, and the file's pages are all accounted for. bbolt
// lays elements end to end, keys ascending, and a page that breaks
// either is damaged: the file is not whole, and the record it hides is
// not taken for deleted.
func TestSalvageOfAnElementReadingItsNeighbour(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	rewrite(t, path, onLiveLeaf(func(page []byte) {
		le := binary.LittleEndian
		second := page[pageHeaderSize+leafElemSize:]
		third := page[pageHeaderSize+2*leafElemSize:]
		le.PutUint32(second[4:], le.Uint32(third[4:])+leafElemSize)
	}))
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.False(t, s.Whole)
	require.Positive(t, s.Damaged)
	require.Zero(t, s.Deleted)
	requireSaved(t, s)
}

// A branch key made greater than the one after it, or grown (its size
// damaged) into the page's free space, above its child's first key:
// bbolt's look-ups through it go astray, and its check and verify refuse
// the file. Every record is salvaged, from its live page, and the file is
// not whole.
func TestSalvageOfADamagedBranchKey(t *testing.T) {
	for name, c := range map[string]struct {
		damage  func(page, elem []byte)
		damaged int
		broken  string // what Salvage.Broken matches
	}{
		// Out of order on its page: a damaged element.
		"the first key above every other": {func(page, _ []byte) {
			page[pageHeaderSize+int(binary.LittleEndian.Uint32(page[pageHeaderSize:]))] = 0xff
		}, 1, `^page \d+, in the tree, has 1 damaged element$`},
		// In order on its page, out of its child's range: the reason
		// alone tells it.
		"the last key grown": {func(_, elem []byte) {
			binary.LittleEndian.PutUint32(elem[4:], binary.LittleEndian.Uint32(elem[4:])+8)
		}, 0, `^branch page \d+: page \d+'s first key lies below its branch key$`},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.db")
			writeHealthyBolt(t, path)
			rewrite(t, path, onBranchElement(func(page []byte, _ uint64, elem []byte) { c.damage(page, elem) }))
			s, err := persistence.SalvageBolt(context.Background(), path)
			require.NoError(t, err)
			require.False(t, s.Whole)
			require.Equal(t, c.damaged, s.Damaged)
			require.Regexp(t, c.broken, s.Broken)
			require.Equal(t, healthy(), salvaged(t, s, persistence.PageLive))
		})
	}
}

// One byte made a sibling bucket's name ours: two elements of one name
// on one page (keys out of order), the sibling's under its own name's
// mark. Only the bucket whose mark is ours is ours; the sibling's records
// stay out, and the file is not whole. Salvaged by its own name, the
// sibling is found by its mark.
func TestSalvageOfASiblingRenamedAsOurs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeBuckets(t, path, map[string]int{"tenant-0": 1000, "tenant-1": 9000})
	rewrite(t, path, siblingRenamedAsOurs)
	s, err := persistence.SalvageBolt(context.Background(), path, persistence.WithBucket("tenant-0"))
	require.NoError(t, err)
	require.False(t, s.Whole)
	require.Equal(t, bucketRecords(1000), salvaged(t, s, persistence.PageLive))
	s, err = persistence.SalvageBolt(context.Background(), path, persistence.WithBucket("tenant-1"))
	require.NoError(t, err)
	require.Equal(t, "tenant-0", s.RenamedAs)
	require.Equal(t, bucketRecords(9000), salvaged(t, s, persistence.PageLive))
}

// A file made before lowwater marked its buckets, two tenants in it, and
// one byte of the sibling's name made ours: two buckets of the asked
// name, neither told from the other. Both are taken, and said to be: the
// sibling's records were dumped among ours with no line.
func TestSalvageOfAnUnmarkedSiblingRenamedAsOurs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	want := map[string]string{}
	boltUpdate(t, path, nil, func(tx *bolt.Tx) error {
		for _, prefix := range []string{"tenant-0", "tenant-1"} {
			bk, err := tx.CreateBucket([]byte(prefix)) // unmarked: its sequence is 0
			if err != nil {
				return err
			}
			for i := range 300 {
				name := fmt.Sprintf("%s-pchannel-%04d", prefix, i)
				if err := putRecord(bk, name, wal.KafkaID(int64(i))); err != nil {
					return err
				}
				want[name] = wal.KafkaID(int64(i)).String()
			}
		}
		return nil
	})
	s, err := persistence.SalvageBolt(context.Background(), path, persistence.WithBucket("tenant-0"))
	require.NoError(t, err)
	require.True(t, s.Whole)
	require.Zero(t, s.Twins)
	require.Len(t, s.Records, 300)

	rewrite(t, path, siblingRenamedAsOurs)
	s, err = persistence.SalvageBolt(context.Background(), path, persistence.WithBucket("tenant-0"))
	require.NoError(t, err)
	require.False(t, s.Whole)
	require.Equal(t, 2, s.Twins)
	require.Equal(t, want, salvaged(t, s, persistence.PageLive))
}

// Another program's bucket in the file, whose values are none of
// lowwater's records: not damage, and the file is whole. Each of its
// values counted as a damaged record, and the file as damaged.
func TestSalvageOfAFileSharedWithAnotherProgram(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeBuckets(t, path, map[string]int{defaultBucket: 1000})
	boltUpdate(t, path, nil, func(tx *bolt.Tx) error {
		for _, n := range []int{3, 300} { // kept inline, and in pages of its own
			app, err := tx.CreateBucket(fmt.Appendf(nil, "app-%d", n))
			if err != nil {
				return err
			}
			for i := range n {
				if err := app.Put(fmt.Appendf(nil, "setting-%04d", i), []byte("on")); err != nil {
					return err
				}
			}
		}
		return nil
	})
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.True(t, s.Whole)
	require.Empty(t, s.Broken)
	require.Zero(t, s.Twins)
	require.Zero(t, s.Damaged)
	require.Equal(t, bucketRecords(1000), salvaged(t, s, persistence.PageLive))
	require.Equal(t, []string{"app-3", "app-300"}, s.OtherBuckets)
}

// A sibling whose name has our name's CRC-32, and so our mark: its mark
// is its own name's, and it is that name's bucket, not ours under a
// damaged name. The file is whole, and its salvage is its dump.
func TestSalvageOfASiblingWhoseNameSharesOurMark(t *testing.T) {
	const twin = "tenant-bb`bab`ba``ac```aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	require.Equal(t, crc32.ChecksumIEEE([]byte(defaultBucket)), crc32.ChecksumIEEE([]byte(twin)))
	path := filepath.Join(t.TempDir(), "c.db")
	writeBuckets(t, path, map[string]int{defaultBucket: 1000, twin: 9000})
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.True(t, s.Whole)
	require.Empty(t, s.RenamedAs)
	require.Equal(t, bucketRecords(1000), salvaged(t, s, persistence.PageLive))
}

// A bucket of our name inside another program's bucket is that bucket's:
// only the file's top-level bucket is the catalog, and the nested one's
// records were mixed into it, in a whole file. So too when it is small
// enough for bbolt to keep it inside its element (inline), whose records
// were taken for ours as the page was read, before its nesting was known.
func TestSalvageOfANestedBucketOfOurName(t *testing.T) {
	for _, nested := range []int{damagedRecords, 3} {
		t.Run(fmt.Sprint(nested, " records"), func(t *testing.T) { testSalvageOfANestedBucketOfOurName(t, nested) })
	}
}

func testSalvageOfANestedBucketOfOurName(t *testing.T, records int) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeBuckets(t, path, map[string]int{defaultBucket: 1000})
	boltUpdate(t, path, nil, func(tx *bolt.Tx) error {
		app, err := tx.CreateBucket([]byte("app"))
		if err != nil {
			return err
		}
		nested, err := app.CreateBucket([]byte(defaultBucket))
		if err != nil {
			return err
		}
		if err := nested.SetSequence(0x6c776d6b<<32 | uint64(crc32.ChecksumIEEE([]byte(defaultBucket)))); err != nil {
			return err
		}
		for i := range records {
			if err := putRecord(nested, fmt.Sprintf("other-%04d", i), wal.KafkaID(int64(5000+i))); err != nil {
				return err
			}
		}
		return nil
	})
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.True(t, s.Whole)
	require.Zero(t, s.Twins)
	require.Equal(t, bucketRecords(1000), salvaged(t, s, persistence.PageLive))
	require.Equal(t, []string{"app"}, s.OtherBuckets)
	if records < damagedRecords {
		return // app is kept inline: it has no root pointer to damage
	}
	// app's root pointer damaged: its page, cut off the tree, cannot be
	// told nested, and the bucket of our name in it is taken. That is
	// said: its records were dumped among ours with no line.
	rewrite(t, path, rootPointerDamaged("app"))
	s, err = persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.False(t, s.Whole)
	require.Equal(t, 2, s.Twins)
	require.Len(t, s.Records, damagedRecords+records)
}

// Another bucket's root pointer damaged loses its live tree. Its live
// pages, some of them freed by ours in an earlier commit and reused, were
// reached by our earlier trees, and their records were dumped as ours,
// pchannels we deleted among them, with no line: with our live tree
// whole, a live page it does not reach is not ours now.
func TestSalvageOfAnotherBucketsLostTree(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.db")
			final := churnBuckets(t, path, seed, nil, "a", "b")
			rewrite(t, path, rootPointerDamaged("b"))
			s, err := persistence.SalvageBolt(context.Background(), path, persistence.WithBucket("a"))
			require.NoError(t, err)
			for _, r := range s.Records {
				if r.State != persistence.PageLive {
					continue // told on a line of its own
				}
				want, ok := final[r.PChannel]
				require.True(t, ok, "%s: deleted from a, dumped as live (%s, page %d)", r.PChannel, r.Checkpoint, r.Page)
				require.Equal(t, want, r.Checkpoint.String(), r.PChannel)
			}
		})
	}
}

// A freelist of several pages, after a mass delete: undamaged, the pages
// it frees are not unreadable (the rest of a freed run of several has no
// header of its own), and the file is whole. With a page of the list
// zeroed, or its count lowered, the pages it no longer names were taken
// for live ones cut off the tree, and thousands of deleted pchannels came
// back as live: a list that is not sorted, below the mark, and as long
// as its pages, is unread.
func TestSalvageOfADamagedFreelistOfSeveralPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	live := massDelete(t, path)
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.True(t, s.Whole)
	require.Zero(t, s.Unreadable)
	require.Equal(t, live, salvaged(t, s, persistence.PageLive))
	undamaged := readFile(t, path)

	for name, damage := range map[string]func(page []byte){
		"its second page zeroed": func(page []byte) { clear(page[bboltPageSize : 2*bboltPageSize]) },
		"its count lowered":      func(page []byte) { binary.LittleEndian.PutUint16(page[10:], binary.LittleEndian.Uint16(page[10:])/4) },
	} {
		t.Run(name, func(t *testing.T) {
			rewrite(t, path, func(t *testing.T, _ []byte) []byte {
				data := append([]byte(nil), undamaged...)
				page := freelistPage(t, data)
				require.Positive(t, binary.LittleEndian.Uint32(page[12:]), "a list of one page")
				damage(page)
				return data
			})
			s, err := persistence.SalvageBolt(context.Background(), path)
			require.NoError(t, err)
			require.False(t, s.Whole)
			for _, r := range s.Records {
				if _, ok := live[r.PChannel]; !ok {
					require.NotEqual(t, persistence.PageLive, r.State, "%s: deleted, dumped as live", r.PChannel)
				}
			}
		})
	}
}

// Small pages, rewritten over many commits: a record takes a run of
// several pages, and the rest of a freed run, whose first page was
// reused, has no header of its own. Such pages were counted unreadable,
// and an undamaged file was said to be damaged.
func TestSalvageOfReusedRunsOfSmallPages(t *testing.T) {
	for seed := range uint64(4) {
		path := filepath.Join(t.TempDir(), fmt.Sprint(seed, ".db"))
		final := churnBuckets(t, path, seed, &bolt.Options{PageSize: 512}, defaultBucket)
		s, err := persistence.SalvageBolt(context.Background(), path)
		require.NoError(t, err)
		require.Zero(t, s.Unreadable, "seed %d", seed)
		require.True(t, s.Whole, "seed %d", seed)
		require.Equal(t, final, salvaged(t, s, persistence.PageLive), "seed %d", seed)
	}
}

// A file that keeps no freelist (bbolt's NoFreelistSync) frees, as bbolt
// opens it, every page its tree does not reach: read so, with a tree
// whole, it is whole, its deleted pchannels left out, its salvage its
// dump. It was read as a damaged file, deleted pchannels dumped.
func TestSalvageOfAFileWithoutAFreelist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	writeHealthyBolt(t, path)
	// Its last commit keeps no freelist.
	boltUpdate(t, path, &bolt.Options{NoFreelistSync: true}, func(tx *bolt.Tx) error {
		for i := range 10 {
			if err := tx.Bucket([]byte(defaultBucket)).Delete([]byte(damagedName(i))); err != nil {
				return err
			}
		}
		return nil
	})
	s, err := persistence.SalvageBolt(context.Background(), path)
	require.NoError(t, err)
	require.True(t, s.NoFreelist)
	require.True(t, s.Whole)
	want := healthy()
	for i := range 10 {
		delete(want, damagedName(i))
	}
	require.Equal(t, want, salvaged(t, s, persistence.PageLive))
	require.Equal(t, 10, s.Deleted)
}

// siblingRenamedAsOurs makes bucket "tenant-1" "tenant-0" by one byte of
// its name, on every page that names it.
func siblingRenamedAsOurs(t *testing.T, data []byte) []byte {
	renamed := 0
	eachBucketElement(data, func(page, elem []byte, name string) {
		if name == "tenant-1" {
			at := int(binary.LittleEndian.Uint32(elem[4:])) + (len(page) - len(elem))
			page[at+len(name)-1] = '0'
			renamed++
		}
	})
	require.Positive(t, renamed)
	return data
}

// rootPointerDamaged flips bit 10 of bucket's root page id on the newest
// commit's root page: its tree is lost.
func rootPointerDamaged(bucket string) damage {
	return func(t *testing.T, data []byte) []byte {
		eachBucketElement(data, func(page, elem []byte, name string) {
			if name == bucket && binary.LittleEndian.Uint64(page) == newestRoot(data) {
				at := int(binary.LittleEndian.Uint32(elem[4:])) + (len(page) - len(elem)) + len(name)
				page[at+1] ^= 0x04
			}
		})
		return data
	}
}

// boltUpdate runs update in one bbolt transaction on the file at path.
func boltUpdate(t *testing.T, path string, opts *bolt.Options, update func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, opts)
	require.NoError(t, err)
	require.NoError(t, db.Update(update))
	require.NoError(t, db.Close())
}

// onLiveLeaf damages a leaf page of records the catalog's bucket reaches
// (its root's second child).
func onLiveLeaf(damage func(page []byte)) damage {
	return func(t *testing.T, data []byte) []byte {
		le := binary.LittleEndian
		branch := data[bucketRoot(t, data)*bboltPageSize:]
		require.Equal(t, uint16(branchPageFlag), le.Uint16(branch[8:]))
		leaf := le.Uint64(branch[pageHeaderSize+leafElemSize+8:])
		page := data[leaf*uint64(bboltPageSize) : (leaf+1)*uint64(bboltPageSize)]
		require.Equal(t, uint16(leafPageFlag), le.Uint16(page[8:]))
		require.GreaterOrEqual(t, le.Uint16(page[10:]), uint16(3))
		damage(page)
		return data
	}
}

// writeBuckets saves damagedRecords pchannels in each bucket, pchannel i
// at kafka:base+i.
func writeBuckets(t *testing.T, path string, bases map[string]int) {
	t.Helper()
	for bucket, base := range bases {
		b := openBolt(t, path, persistence.WithNoSync(true), persistence.WithBucket(bucket))
		for i := range damagedRecords {
			require.NoError(t, b.Save(context.Background(), damagedName(i), wal.KafkaID(int64(base+i))))
		}
		require.NoError(t, b.Close())
	}
}

// bucketRecords is what writeBuckets saved in a bucket of base.
func bucketRecords(base int) map[string]string {
	want := map[string]string{}
	for i := range damagedRecords {
		want[damagedName(i)] = wal.KafkaID(int64(base + i)).String()
	}
	return want
}

// churnBuckets writes each bucket (marked, as the catalog marks its
// own), 300 pchannels of one set of names each, and then 40 commits of a
// few raises, lowerings and deletes in any of them, so that pages one
// frees another reuses, and returns what the first holds at the end.
func churnBuckets(t *testing.T, path string, seed uint64, opts *bolt.Options, buckets ...string) map[string]string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	db, err := bolt.Open(path, 0o600, opts)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	name := func(i int) string { return fmt.Sprintf("pch-%06d-%s", i, strings.Repeat("x", i%30)) }
	held := map[string]map[string]int64{}
	for _, bucket := range buckets {
		held[bucket] = map[string]int64{}
	}
	put := func(tx *bolt.Tx, bucket string, i int, v int64) error {
		held[bucket][name(i)] = v
		return putRecord(tx.Bucket([]byte(bucket)), name(i), wal.KafkaID(v))
	}
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		for _, bucket := range buckets {
			bk, err := tx.CreateBucket([]byte(bucket))
			if err != nil {
				return err
			}
			if err := bk.SetSequence(0x6c776d6b<<32 | uint64(crc32.ChecksumIEEE([]byte(bucket)))); err != nil {
				return err
			}
			for i := range 300 {
				if err := put(tx, bucket, i, 10); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	for range 40 {
		require.NoError(t, db.Update(func(tx *bolt.Tx) error {
			for range 1 + rng.IntN(20) {
				bucket, i := buckets[rng.IntN(len(buckets))], rng.IntN(300)
				v, ok := held[bucket][name(i)]
				switch op := rng.IntN(10); {
				case op < 6:
					if err := put(tx, bucket, i, max(v, 10)+1+rng.Int64N(5)); err != nil {
						return err
					}
				case op < 7:
					if ok && v > 2 {
						if err := put(tx, bucket, i, v-1-rng.Int64N(2)); err != nil {
							return err
						}
					}
				case ok:
					delete(held[bucket], name(i))
					if err := tx.Bucket([]byte(bucket)).Delete([]byte(name(i))); err != nil {
						return err
					}
				}
			}
			return nil
		}))
	}
	final := map[string]string{}
	for n, v := range held[buckets[0]] {
		final[n] = wal.KafkaID(v).String()
	}
	return final
}

// massDelete saves 60,000 pchannels, deletes nine in ten of them in one
// commit, then raises a few in 20 more, and returns the live ones: the
// freelist then takes several pages, and earlier lists of several pages
// were freed.
func massDelete(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	live := map[string]string{}
	name := func(i int) string { return fmt.Sprintf("pchannel-%05d", i) }
	put := func(bk *bolt.Bucket, i int, id wal.MessageID) error {
		live[name(i)] = id.String()
		return putRecord(bk, name(i), id)
	}
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucket([]byte(defaultBucket))
		if err != nil {
			return err
		}
		for i := range 60000 {
			if err := put(bk, i, wal.KafkaID(int64(i))); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		for i := range 60000 {
			if i%10 != 0 {
				delete(live, name(i))
				if err := tx.Bucket([]byte(defaultBucket)).Delete([]byte(name(i))); err != nil {
					return err
				}
			}
		}
		return nil
	}))
	for commit := range 20 {
		require.NoError(t, db.Update(func(tx *bolt.Tx) error {
			return put(tx.Bucket([]byte(defaultBucket)), commit*10, wal.KafkaID(int64(10000+commit)))
		}))
	}
	return live
}

// newestMeta's fields of data: its root page and freelist page.
func newestMetaFields(data []byte) (root, freelist uint64) {
	le := binary.LittleEndian
	var txid uint64
	for _, off := range []int{0, bboltPageSize} {
		meta := data[off+pageHeaderSize:]
		if tx := le.Uint64(meta[48:]); tx >= txid {
			txid, root, freelist = tx, le.Uint64(meta[16:]), le.Uint64(meta[32:])
		}
	}
	return root, freelist
}

// newestRoot is the top-level root page of the newest commit of data.
func newestRoot(data []byte) uint64 {
	root, _ := newestMetaFields(data)
	return root
}

// freelistPage is the newest commit's freelist, all its pages.
func freelistPage(t *testing.T, data []byte) []byte {
	t.Helper()
	_, freelist := newestMetaFields(data)
	page := data[freelist*uint64(bboltPageSize):]
	require.Equal(t, uint16(0x10), binary.LittleEndian.Uint16(page[8:]), "page %d is no freelist", freelist)
	return page[:(uint64(binary.LittleEndian.Uint32(page[12:]))+1)*uint64(bboltPageSize)]
}
