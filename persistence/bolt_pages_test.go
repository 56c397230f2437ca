package persistence

import (
	"fmt"
	"os"
	"path/filepath"
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
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
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
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	newest, err := newestMeta(data)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(newest.pageSize)
	for _, c := range []struct {
		page int
		want MetaDamage
	}{
		{int(newest.txid % 2), MetaDamage{Page: int(newest.txid % 2), Held: newest.txid, Known: true, Newer: true, ReadsAs: newest.txid - 1}},
		{int(1 - newest.txid%2), MetaDamage{Page: int(1 - newest.txid%2), Held: newest.txid - 1, Known: true, ReadsAs: newest.txid}},
	} {
		damaged := append([]byte(nil), data...)
		damaged[c.page*pageSize+pageHeaderSize+metaChecksumOffset] ^= 0xff
		if got := metaDamage(damaged); got == nil || *got != c.want {
			t.Errorf("page %d damaged: metaDamage = %+v, want %+v", c.page, got, c.want)
		}
	}
	// The transaction ID itself damaged: the commit it held is not known.
	damaged := append([]byte(nil), data...)
	page := int(newest.txid % 2)
	damaged[page*pageSize+pageHeaderSize+48] ^= 0x40
	want := MetaDamage{Page: page, ReadsAs: newest.txid - 1}
	if got := metaDamage(damaged); got == nil || *got != want {
		t.Errorf("txid damaged: metaDamage = %+v, want %+v", got, want)
	}
}
