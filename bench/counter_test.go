package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// The group commit benchmark waits on untilCount for every round: a count
// reached before the wait began, or by the save that races with it, must
// still be told, once, or a round would hang.
func TestCounterTellsEachCountOnce(t *testing.T) {
	c := counted(persistence.NewMemory())
	save := func(id int) {
		t.Helper()
		if err := c.Save(context.Background(), "p", wal.KafkaID(id)); err != nil {
			t.Fatal(err)
		}
	}
	save(1)
	save(2)
	select {
	case <-c.untilCount(2):
	default:
		t.Fatal("a count reached before the wait was not told")
	}
	at := c.untilCount(4)
	save(3)
	select {
	case <-at:
		t.Fatal("told at 3 saves, waiting for 4")
	default:
	}
	save(4)
	select {
	case <-at:
	case <-time.After(10 * time.Second):
		t.Fatal("the fourth save was not told")
	}
	save(5)
	select {
	case <-at:
		t.Fatal("told twice")
	default:
	}
}

// Over a catalog that starts saves without waiting (bbolt with group
// commit), the counter passes StartSave on and counts a save once it is
// told.
func TestCounterCountsStartedSavesWhenTold(t *testing.T) {
	bolt, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "c.db"), persistence.WithGroupCommit(true))
	if err != nil {
		t.Fatal(err)
	}
	defer bolt.Close()
	c := counted(bolt)
	starter, ok := c.(persistence.SaveStarter)
	if !ok {
		t.Fatal("a counter of a SaveStarter has no StartSave")
	}
	at := c.untilCount(3)
	told := make(chan error, 3)
	for _, p := range []string{"p0", "p1", "p2"} {
		if err := starter.StartSave(context.Background(), p, wal.KafkaID(7), func(err error) { told <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case err := <-told:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a started save was not told")
		}
	}
	select {
	case <-at:
	case <-time.After(10 * time.Second):
		t.Fatal("three told saves were not counted")
	}
	if _, ok := counted(persistence.NewMemory()).(persistence.SaveStarter); ok {
		t.Fatal("a counter of a catalog without StartSave has one")
	}
}
