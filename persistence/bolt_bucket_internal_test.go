package persistence

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowwater/lowwater/wal"
)

// A bit of the bucket's name and a bit of its mark, both flipped: the
// bucket was known by neither, and a writer's OpenBolt made a new, empty
// one beside it, over which every pchannel read as nothing stored and a
// save below a stored checkpoint went through. A bucket whose mark is no
// name's it bears, holding lowwater's records, is damage.
func TestBoltBucketNameAndMarkFlippedIsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Save(context.Background(), "p", wal.KafkaID(1007)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mark := binary.LittleEndian.AppendUint64(nil, bucketMark([]byte(DefaultBucket)))
	damagedMark := bytes.Clone(mark)
	damagedMark[0] ^= 0x01
	if !bytes.Contains(data, mark) {
		t.Fatal("no mark in the file")
	}
	data = bytes.ReplaceAll(data, mark, damagedMark)
	data = bytes.ReplaceAll(data, []byte(DefaultBucket), []byte("lowwauer-checkpoints"))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, readOnly := range []bool{false, true} {
		_, err := OpenBolt(path, WithReadOnly(readOnly))
		if !errors.Is(err, ErrCorruptStore) || !strings.Contains(err.Error(), `one named "lowwauer-checkpoints" that holds lowwater's records under a mark that is not its name's`) {
			t.Fatalf("read-only %t: OpenBolt = %v, want the bucket taken for damage", readOnly, err)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(after, data) {
		t.Fatalf("the refused opens changed the file (%v)", err)
	}
}
