package persistence

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/wal"
)

// salvageSeed is a small bbolt file of the catalog's: 40 pchannels, p-aa
// at kafka:0 to p-nb at kafka:39.
func salvageSeed(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "seed.db")
	b, err := OpenBolt(path, WithNoSync(true))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if err := b.Save(context.Background(), salvageSeedName(i), wal.KafkaID(int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return seed
}

func salvageSeedName(i int) string { return "p-" + string(rune('a'+i%26)) + string(rune('a'+i/26)) }

// checkSalvage salvages data and fails t on a panic or on a record the
// seed did not hold: damage never makes up a checkpoint.
func checkSalvage(t *testing.T, data []byte) {
	t.Helper()
	want := map[string]string{}
	for i := range 40 {
		want[salvageSeedName(i)] = wal.KafkaID(int64(i)).String()
	}
	s, err := salvage(context.Background(), data, []byte(DefaultBucket))
	if err != nil {
		return
	}
	for _, r := range s.Records {
		if got := r.Checkpoint.String(); want[r.PChannel] != got {
			t.Fatalf("salvaged %q at %s, which the file never held", r.PChannel, got)
		}
	}
}

// FuzzSalvage: whatever the bytes, a salvage returns, never panics, and
// gives no checkpoint the seed did not hold.
func FuzzSalvage(f *testing.F) {
	seed := salvageSeed(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{})
	f.Fuzz(checkSalvage)
}

// Go's fuzzer ran a few inputs a second of a file's size here; this runs the same
// check over 2,000 seeded damages of the seed: bytes flipped, runs of
// bytes zeroed or set at random, the file cut.
func TestSalvageOfRandomDamage(t *testing.T) {
	seed := salvageSeed(t)
	rng := rand.New(rand.NewPCG(7, 11))
	for range 2000 {
		data := bytes.Clone(seed)
		for range 1 + rng.IntN(8) {
			at := rng.IntN(len(data))
			switch rng.IntN(4) {
			case 0:
				data[at] ^= byte(1 + rng.IntN(255))
			case 1:
				clear(data[at:min(len(data), at+rng.IntN(4096))])
			case 2:
				for i := at; i < min(len(data), at+rng.IntN(64)); i++ {
					data[i] = byte(rng.Uint32())
				}
			case 3:
				data = data[:at]
			}
			if len(data) == 0 {
				break
			}
		}
		checkSalvage(t, data)
	}
}

// bbolt sizes a freelist before it takes the list's own pages out of it:
// a list may span a page more than its ids need, and is whole; one that
// spans more than that, or less than its ids need, is not. It writes the
// rest of the list's pages as zeros: ids past the count say the count was
// lowered, and the pages they name would be taken for live ones.
func TestSalvageFreelistLength(t *testing.T) {
	const pageSize = 512
	for _, c := range []struct {
		ids, pages int
		ok         bool
		counted    int // the count the page says, if not ids
	}{
		{ids: 60, pages: 1, counted: 20, ok: false},
		{ids: 60, pages: 1, ok: true},   // 16 + 480 bytes: one page
		{ids: 62, pages: 1, ok: false},  // 512 bytes: two
		{ids: 123, pages: 3, ok: true},  // needs two; sized with its own three ids, 126: three
		{ids: 123, pages: 2, ok: true},  // as it needs
		{ids: 120, pages: 4, ok: false}, // more than 124 ids would need
		{ids: 549, pages: 12, ok: false},
	} {
		data := make([]byte, (2+c.pages)*pageSize)
		le := binary.LittleEndian
		page := data[2*pageSize:]
		le.PutUint64(page, 2)
		le.PutUint16(page[8:], freelistPageFlag)
		le.PutUint16(page[10:], uint16(cmp.Or(c.counted, c.ids)))
		le.PutUint32(page[12:], uint32(c.pages-1))
		for i := range c.ids {
			le.PutUint64(page[pageHeaderSize+8*i:], uint64(1000+i))
		}
		ok, pages := readFreelist(data, boltMeta{freelist: 2, pgid: 5000}, pageSize, map[uint64]bool{})
		require.Equal(t, c.ok, ok, "%d ids on %d pages", c.ids, c.pages)
		if ok {
			require.Equal(t, uint64(c.pages), pages)
		}
	}
}
