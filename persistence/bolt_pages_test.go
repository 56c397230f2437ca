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
