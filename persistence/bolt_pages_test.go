package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/persistence/internal/record"
	"github.com/lowwater/lowwater/wal"
)

// FuzzCheckPages feeds checkPages arbitrary bytes, starting from a real
// bbolt file and damaged copies of it: it must never panic. OpenBolt runs
// it inside the recover that catches bbolt's own panic on a damaged file,
// where a panic of its own would end the caller (pageDamage recovers even
// so, and would hide the damage it was to name). The file it starts from
// is whole: checkPages finds nothing wrong with it.
func FuzzCheckPages(f *testing.F) {
	// Small pages keep the inputs small, and the fuzzer fast: with the
	// OS's 4 KiB pages a file is tens of KiB. checkPages reads the page
	// size from the meta page, as bbolt does.
	const page = 512
	path := filepath.Join(f.TempDir(), "checkpoints.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: page, NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		bucket, err := tx.CreateBucket([]byte("lowwater-checkpoints"))
		if err != nil {
			return err
		}
		for i := range 40 { // a branch page over leaves
			if err := bucket.Put(fmt.Appendf(nil, "pchannel-%03d", i), record.Encode(fmt.Sprintf("pchannel-%03d", i), wal.Kafka, wal.KafkaID(int64(i)).Marshal(), 0)); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		f.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	// bbolt grows the file to its first mapping (32 KiB); the pages past
	// the high-water mark hold nothing.
	meta, err := newestMeta(whole)
	if err != nil {
		f.Fatal(err)
	}
	whole = whole[:meta.pgid*page]
	if err := checkPages(whole); err != nil {
		f.Fatalf("checkPages of a whole file = %v, want nil", err)
	}
	f.Add(whole)
	f.Add(whole[:2*page])
	f.Add(whole[:len(whole)-page/2])
	for _, at := range []int{2 * page, 3*page + 17, len(whole) - 9} {
		if at < len(whole) {
			flipped := append([]byte(nil), whole...)
			flipped[at] ^= 0xff
			f.Add(flipped)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = checkPages(data)
	})
}

// A meta page damaged while the other is whole is found, with the commit
// it held on the side it held it; both whole, nothing is.
func TestMetaDamage(t *testing.T) {
	_, data, newest := savedFile(t, 3)
	pageSize := int(newest.pageSize)
	newer, older := int(newest.txid%2), int(1-newest.txid%2)
	checksum := func(meta []byte) { meta[metaChecksumOffset] ^= 0xff }
	txid := func(id uint64) func(meta []byte) {
		return func(meta []byte) { binary.LittleEndian.PutUint64(meta[metaTxidOffset:], id) }
	}
	heldNewer := MetaDamage{Page: newer, Held: newest.txid, Known: true, Newer: true, ReadsAs: newest.txid - 1}
	heldOlder := MetaDamage{Page: older, Held: newest.txid - 1, Known: true, ReadsAs: newest.txid}
	for _, c := range []struct {
		name   string
		page   int
		damage func(meta []byte)
		want   MetaDamage
	}{
		{"the newer's checksum", newer, checksum, heldNewer},
		{"the older's checksum", older, checksum, heldOlder},
		// The transaction ID itself damaged, the rest of the page whole:
		// the checksum tells the commit it held, also where the damage
		// makes the newer read as the older (WithIntactMeta opened such a
		// file, as of the commit before its last).
		{"the newer's ID read as the older", newer, txid(newest.txid - 2), heldNewer},
		{"the newer's ID, a bit flipped", newer, txid(newest.txid ^ 0x40), heldNewer},
		{"the older's ID, a bit flipped", older, txid((newest.txid - 1) ^ 0x40), heldOlder},
	} {
		damaged := append([]byte(nil), data...)
		c.damage(damaged[c.page*pageSize+pageHeaderSize:])
		if got := metaDamage(damaged); got == nil || *got != c.want {
			t.Errorf("%s: metaDamage = %+v, want %+v", c.name, got, c.want)
		}
		// WithIntactMeta refuses the page that held the newer commit, and
		// opens the file over the one that held the older: it hides
		// nothing.
		path := filepath.Join(t.TempDir(), "damaged.db")
		if err := os.WriteFile(path, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := OpenBolt(path, WithIntactMeta(true))
		if c.want.Newer != errors.Is(err, ErrCorruptStore) {
			t.Errorf("%s (held the newer commit: %t): OpenBolt WithIntactMeta = %v", c.name, c.want.Newer, err)
		}
		if err == nil {
			if got, err := b.Load(t.Context(), "p"); err != nil || got != wal.KafkaID(3) {
				t.Errorf("%s: Load = %v, %v, want kafka:3", c.name, got, err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The ID damaged, and the checksum too: the commit it held is not
	// known.
	damaged := append([]byte(nil), data...)
	at := newer*pageSize + pageHeaderSize
	damaged[at+metaTxidOffset] ^= 0x40
	damaged[at+metaChecksumOffset] ^= 0x01
	want := MetaDamage{Page: newer, ReadsAs: newest.txid - 1}
	if got := metaDamage(damaged); got == nil || *got != want {
		t.Errorf("txid and checksum damaged: metaDamage = %+v, want %+v", got, want)
	}
}

// A meta page torn to zeros, the first (whose page size then cannot be
// read) or the second, leaves the file readable as of the other page's
// commit, as bbolt reads it, read-only and read-write: checkPages found
// no valid meta for the first, and bbolt's own consistency check failed
// on the second.
func TestAZeroedMetaPageReadsAsTheOther(t *testing.T) {
	_, data, newest := savedFile(t, 3)
	pageSize := int(newest.pageSize)
	for page := range 2 {
		zeroed := append([]byte(nil), data...)
		clear(zeroed[page*pageSize : (page+1)*pageSize])
		holdsNewest := page == int(newest.txid%2)
		want := MetaDamage{Page: page, ReadsAs: newest.txid}
		if holdsNewest {
			want.ReadsAs = newest.txid - 1
		}
		if got := metaDamage(zeroed); got == nil || *got != want {
			t.Errorf("page %d zeroed: metaDamage = %+v, want %+v", page, got, want)
		}
		wantLoad := wal.KafkaID(3)
		if holdsNewest {
			wantLoad = 2
		}
		for _, readOnly := range []bool{true, false} {
			copyPath := filepath.Join(t.TempDir(), "zeroed.db")
			if err := os.WriteFile(copyPath, zeroed, 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := OpenBolt(copyPath, WithReadOnly(readOnly))
			if err != nil {
				t.Fatalf("page %d zeroed, read-only %t: OpenBolt = %v", page, readOnly, err)
			}
			got, err := c.Load(t.Context(), "p")
			if err != nil || got != wantLoad {
				t.Errorf("page %d zeroed, read-only %t: Load = %v, %v, want %v", page, readOnly, got, err, wantLoad)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// WithIntactMeta refuses it, and writes nothing.
		copyPath := filepath.Join(t.TempDir(), "zeroed.db")
		if err := os.WriteFile(copyPath, zeroed, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := OpenBolt(copyPath, WithIntactMeta(true))
		var refused *MetaDamageError
		if !errors.Is(err, ErrCorruptStore) || !errors.As(err, &refused) || refused.Damage != want || refused.Path != copyPath {
			t.Errorf("page %d zeroed: OpenBolt WithIntactMeta = %v, want a MetaDamageError of %+v", page, err, want)
		}
		if after, err := os.ReadFile(copyPath); err != nil || !bytes.Equal(after, zeroed) {
			t.Errorf("page %d zeroed: the refused open changed the file (%v)", page, err)
		}
	}
}

// A sound file opens WithIntactMeta.
func TestIntactMetaOpensASoundFile(t *testing.T) {
	path, _, _ := savedFile(t, 2)
	b, err := OpenBolt(path, WithIntactMeta(true))
	if err != nil {
		t.Fatalf("OpenBolt WithIntactMeta of a sound file = %v", err)
	}
	if got, err := b.Load(t.Context(), "p"); err != nil || got != wal.KafkaID(2) {
		t.Errorf("Load = %v, %v, want kafka:2", got, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	fresh, err := OpenBolt(filepath.Join(t.TempDir(), "new.db"), WithIntactMeta(true))
	if err != nil {
		t.Fatalf("OpenBolt WithIntactMeta of a new file = %v", err)
	}
	if err := fresh.Close(); err != nil {
		t.Fatal(err)
	}
}

// A freelist that frees a page the tree uses is refused: the next write
// would take that page for new data over the tree's.
func TestAFreelistFreeingATreePageIsRefused(t *testing.T) {
	_, data, meta := savedFile(t, 5)
	le := binary.LittleEndian
	free := data[meta.freelist*uint64(meta.pageSize):]
	if n := le.Uint16(free[10:]); n == 0 {
		t.Fatalf("the freelist frees no page: no entry to damage")
	}
	le.PutUint64(free[pageHeaderSize:], meta.root)
	err := checkPages(data)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("frees page %d, which the tree uses", meta.root)) {
		t.Fatalf("checkPages = %v, want the freed page in use named", err)
	}
}

// savedFile saves kafka:1 … kafka:saves for "p" in a new bbolt file, and
// returns its path, its bytes once closed, and its newest meta page.
func savedFile(t *testing.T, saves int) (path string, data []byte, newest boltMeta) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "c.db")
	b, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range saves {
		if err := b.Save(t.Context(), "p", wal.KafkaID(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := b.DamagedMeta(); d != nil || err != nil {
		t.Fatalf("DamagedMeta of a sound file = %+v, %v", d, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if newest, err = newestMeta(data); err != nil {
		t.Fatal(err)
	}
	return path, data, newest
}

// DamagedMeta reads the file the Bolt opened: a damaged file put at its
// path since is another's, and tells nothing of the Bolt's. After Close
// it returns ErrClosed; it answered nil, nil, of whatever file then lay
// at the path.
func TestDamagedMetaReadsTheFileTheBoltOpened(t *testing.T) {
	_, data, newest := savedFile(t, 3)
	path := filepath.Join(t.TempDir(), "c.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".moved"); err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte(nil), data...)
	pageSize := int(newest.pageSize)
	page := int(newest.txid % 2)
	clear(damaged[page*pageSize : (page+1)*pageSize])
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if d, err := b.DamagedMeta(); d != nil || err != nil {
		t.Fatalf("DamagedMeta of the Bolt's sound file, a damaged one at its path = %+v, %v; want nil, nil", d, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if d, err := b.DamagedMeta(); d != nil || !errors.Is(err, ErrClosed) {
		t.Fatalf("DamagedMeta after Close = %+v, %v; want ErrClosed", d, err)
	}
}
