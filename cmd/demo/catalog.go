package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/persistence"
)

// store is where the demo keeps its checkpoints across its two phases (the
// run, then the restart). Each phase opens the catalog anew, as a restarted
// process would, and closes it when it ends; close releases the store
// itself at the very end.
type store interface {
	// open returns the catalog of one phase. Closing it ends the phase.
	open(ctx context.Context) (persistence.Catalog, error)
	// describe says in a few words what the store is, for the header.
	describe() string
	close() error
}

// storeOpener makes a store of one kind from its URL and the demo's
// configuration.
type storeOpener func(u catalogurl.URL, cfg config) (store, error)

// stores maps the kinds of --catalog to their openers; each kind lives in
// a file of its own (etcd in catalog_etcd.go). The URL syntax is
// internal/catalogurl's, shared with cmd/lowwater.
var stores = map[string]storeOpener{
	catalogurl.Bolt:   openBoltStore,
	catalogurl.Memory: openMemoryStore,
	catalogurl.Etcd:   openEtcdStore,
}

// checkCatalog validates --catalog and the etcd access flags while
// parsing flags, without touching the store. given names the flags on the
// command line: an etcd flag given for another catalog would be ignored,
// and is refused; the environment may well be meant for another command.
func checkCatalog(spec string, etcd etcdaccess.Access, given map[string]bool) error {
	u, err := parseCatalog(spec)
	if err != nil {
		return err
	}
	return etcd.Check(u, given)
}

// explain adds to err, a store's failure to answer in time, what the
// store can find out about the cause: an etcd client says only that the
// deadline passed, whether etcd is down or wants TLS.
func explain(s store, err error) error {
	d, ok := s.(interface{ diagnose() string })
	if !ok || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if why := d.diagnose(); why != "" {
		return fmt.Errorf("%w; %s", err, why)
	}
	return err
}

func parseCatalog(spec string) (catalogurl.URL, error) {
	u, err := catalogurl.Parse(spec)
	if errors.Is(err, catalogurl.ErrCredentials) {
		return catalogurl.URL{}, fmt.Errorf("--catalog: %w; give them in $%s and $%s", err, etcdaccess.EnvUser, etcdaccess.EnvPassword)
	}
	if err != nil {
		return catalogurl.URL{}, fmt.Errorf("--catalog: %w", err)
	}
	return u, nil
}

func openStore(cfg config) (store, error) {
	u, err := parseCatalog(cfg.catalog)
	if err != nil {
		return nil, err
	}
	return stores[u.Kind](u, cfg)
}

// boltStore is a bbolt file, reopened by each phase: the restart reads what
// the file really holds.
type boltStore struct{ path string }

// openBoltStore uses the file named after "bolt:", or lowwater.db in the
// --data directory.
func openBoltStore(u catalogurl.URL, cfg config) (store, error) {
	path := u.Path
	if path == "" {
		return &boltStore{path: filepath.Join(cfg.dataDir, "lowwater.db")}, nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := checkWritable("--catalog bolt:", path); err != nil {
			return nil, err // bbolt could not create it
		}
	}
	return &boltStore{path: path}, nil
}

// open refuses a file with a damaged meta page: it may hide the file's
// last commit, and the demo's first save would lose it for good.
func (b *boltStore) open(context.Context) (persistence.Catalog, error) {
	return persistence.OpenBolt(b.path, persistence.WithIntactMeta(true))
}

func (b *boltStore) describe() string { return "bbolt file " + b.path }
func (b *boltStore) close() error     { return nil }

// memoryStore is one persistence.Memory for the whole demo: a phase's
// Close leaves it open, so that the restart finds what the run saved.
type memoryStore struct{ mem *persistence.Memory }

func openMemoryStore(catalogurl.URL, config) (store, error) {
	return &memoryStore{mem: persistence.NewMemory()}, nil
}

func (m *memoryStore) open(context.Context) (persistence.Catalog, error) {
	return keepOpen{m.mem}, nil
}

func (m *memoryStore) describe() string { return "in memory (gone when the demo exits)" }
func (m *memoryStore) close() error     { return m.mem.Close() }

// keepOpen is a catalog whose Close does nothing.
type keepOpen struct{ persistence.Catalog }

func (keepOpen) Close() error { return nil }
