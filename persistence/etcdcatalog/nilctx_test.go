package etcdcatalog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// Every call given a nil context, a caller's bug, is refused with
// ErrInvalidArgument: it panicked inside the catalog. Nothing changes.
func TestNilContextIsRefused(t *testing.T) {
	eps := etcdtest.Start(t)
	n := newNode(t, eps)
	owned := own(t, n, "p")
	require.NoError(t, owned.Save(ctxT(t), "p", wal.KafkaID(7)))
	b, err := etcdcatalog.NewBatcher(n.cat)
	require.NoError(t, err)
	var noContext context.Context // nil, as a caller's bug passes it
	calls := map[string]func() error{
		"Catalog.Load":                 func() error { _, err := n.cat.Load(noContext, "p"); return err },
		"Catalog.LoadAll":              func() error { _, err := n.cat.LoadAll(noContext); return err },
		"Catalog.Save":                 func() error { return n.cat.Save(noContext, "p", wal.KafkaID(9)) },
		"Catalog.Delete":               func() error { return n.cat.Delete(noContext, "p") },
		"Catalog.DeleteBadName":        func() error { return n.cat.DeleteBadName(noContext, "") },
		"Catalog.Replace":              func() error { return n.cat.Replace(noContext, "p", wal.KafkaID(1)) },
		"Catalog.Inspect":              func() error { _, err := n.cat.Inspect(noContext); return err },
		"Catalog.OwnerTerm":            func() error { _, err := n.cat.OwnerTerm(noContext, "p"); return err },
		"Catalog.OwnerOf":              func() error { _, err := n.cat.OwnerOf(noContext, "p"); return err },
		"Catalog.Owners":               func() error { _, err := n.cat.Owners(noContext); return err },
		"Catalog.StrayKeys":            func() error { _, err := n.cat.StrayKeys(noContext); return err },
		"Catalog.DeleteLeaselessOwner": func() error { _, err := n.cat.DeleteLeaselessOwner(noContext, "p", 1); return err },
		"Catalog.Own":                  func() error { _, err := n.cat.Own(noContext, "q", n.session); return err },
		"Catalog.TryOwn":               func() error { _, err := n.cat.TryOwn(noContext, "q", n.session); return err },
		"Catalog.NewSession":           func() error { _, err := n.cat.NewSession(noContext, 7); return err },
		"Catalog.CloseSession":         func() error { return n.cat.CloseSession(noContext, n.session) },
		"Owned.Load":                   func() error { _, err := owned.Load(noContext, "p"); return err },
		"Owned.LoadAll":                func() error { _, err := owned.LoadAll(noContext); return err },
		"Owned.Save":                   func() error { return owned.Save(noContext, "p", wal.KafkaID(9)) },
		"Owned.Delete":                 func() error { return owned.Delete(noContext, "p") },
		"Owned.DeleteAnyTerm":          func() error { return owned.DeleteAnyTerm(noContext, "p") },
		"Owned.Replace":                func() error { return owned.Replace(noContext, "p", wal.KafkaID(1)) },
		"Owned.ReplaceAnyTerm":         func() error { return owned.ReplaceAnyTerm(noContext, "p", wal.KafkaID(1)) },
		"Batcher.Load":                 func() error { _, err := b.Load(noContext, "p"); return err },
		"Batcher.LoadAll":              func() error { _, err := b.LoadAll(noContext); return err },
		"Batcher.Save":                 func() error { return b.Save(noContext, "p", wal.KafkaID(9)) },
		"Batcher.Delete":               func() error { return b.Delete(noContext, "p") },
		"Owned.Release":                func() error { return owned.Release(noContext) },
	}
	for name, call := range calls {
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panicked: %v", r)
				}
			}()
			return call()
		}()
		if !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Errorf("%s(nil context) = %v, want ErrInvalidArgument", name, err)
		}
	}
	got, err := n.cat.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(7), got, "nothing changed")
	require.NoError(t, b.Close())
}
