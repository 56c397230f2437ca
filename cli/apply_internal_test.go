package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// endsOnDelete ends the command (a --timeout, a Ctrl-C) right after its
// Delete has deleted; failSave, if set, is what every Save returns.
type endsOnDelete struct {
	persistence.Catalog
	end      func()
	failSave error
}

func (c *endsOnDelete) Delete(ctx context.Context, pchannel string) error {
	err := c.Catalog.Delete(ctx, pchannel)
	c.end()
	return err
}

func (c *endsOnDelete) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	if c.failSave != nil {
		return c.failSave
	}
	return c.Catalog.Save(ctx, pchannel, id)
}

// A forced lowering deletes, then saves: a command that ended between the
// two, its save under the same context, lost the checkpoint.
func TestLoweringOutlivesTheCommandsEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mem := persistence.NewMemory()
	require.NoError(t, mem.Save(ctx, "p", wal.KafkaID(1000)))
	s := &store{}
	require.NoError(t, s.apply(ctx, &endsOnDelete{Catalog: mem, end: cancel}, "p", lower, wal.KafkaID(500)))
	got, err := mem.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(500), got)
	require.False(t, s.graceEnd.IsZero(), "the grace is fixed once the command is over")
	require.WithinDuration(t, time.Now().Add(cleanupGrace), s.graceEnd, cleanupGrace)
}

// When the save after the delete fails all the same, the error says what
// is left to do.
func TestLoweringWhoseSaveFailsSaysHowToFinish(t *testing.T) {
	ctx := context.Background()
	mem := persistence.NewMemory()
	require.NoError(t, mem.Save(ctx, "p", wal.KafkaID(1000)))
	down := errors.New("catalog down")
	s := &store{}
	err := s.apply(ctx, &endsOnDelete{Catalog: mem, end: func() {}, failSave: down}, "p", lower, wal.KafkaID(500))
	require.ErrorIs(t, err, down)
	require.ErrorContains(t, err, "p: its record was deleted and kafka:500 not written: 'set p kafka:500' writes it: catalog down")
}

// A write on etcd that the command's end cut short left the tool's owner
// key for its session's TTL: its release and its session's revoke ran
// under the command's context, over by then, and the next command within
// 10 s was refused as if a node owned the pchannel.
func TestAnInterruptedWriteLeavesNoOwner(t *testing.T) {
	eps := etcdtest.Start(t)
	u, err := catalogurl.Parse("etcd://" + strings.TrimPrefix(eps[0], "http://") + "/ghost")
	require.NoError(t, err)
	e := &env{opts: options{url: u, timeout: time.Minute}, stdout: io.Discard, stderr: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := e.open(ctx, readWrite)
	require.NoError(t, err)
	err = s.write(ctx, "p", 0, false, func(c persistence.Catalog) error {
		cancel() // Ctrl-C, as the tool writes
		return c.Save(ctx, "p", wal.KafkaID(1))
	})
	require.ErrorIs(t, err, context.Canceled)
	began := time.Now()
	s.close()
	require.Less(t, time.Since(began), cleanupGrace+time.Second/2)

	check, err := e.open(context.Background(), readOnly)
	require.NoError(t, err)
	defer check.close()
	term, err := check.etcd.OwnerTerm(context.Background(), "p")
	require.NoError(t, err)
	require.Zero(t, term, "the tool's owner key is gone with the command")
}
