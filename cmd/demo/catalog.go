package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

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

// storeOpener makes a store from what follows the scheme in --catalog
// ("" when nothing does) and the demo's configuration.
type storeOpener func(rest string, cfg config) (store, error)

// stores maps the schemes of --catalog to their openers; each kind lives in
// a file of its own (etcd in catalog_etcd.go).
var stores = map[string]storeOpener{
	"bolt":   openBoltStore,
	"memory": openMemoryStore,
	"etcd":   openEtcdStore,
}

// splitCatalog splits a --catalog value into its scheme and the rest:
// "bolt", "bolt:/tmp/x.db", "memory", "etcd://h1:2379,h2:2379/prefix".
func splitCatalog(spec string) (scheme, rest string) {
	if s, r, ok := strings.Cut(spec, "://"); ok {
		return s, r
	}
	if s, r, ok := strings.Cut(spec, ":"); ok {
		return s, r
	}
	return spec, ""
}

// checkCatalog validates --catalog while parsing flags: the kind, and what
// its opener can tell without touching the store.
func checkCatalog(spec string) error {
	scheme, rest := splitCatalog(spec)
	if open, ok := stores[scheme]; ok {
		_, err := open(rest, config{})
		return err
	}
	known := make([]string, 0, len(stores))
	for s := range stores {
		known = append(known, s)
	}
	slices.Sort(known)
	return fmt.Errorf("--catalog %q: unknown kind %q, want one of %s", spec, scheme, strings.Join(known, ", "))
}

func openStore(cfg config) (store, error) {
	scheme, rest := splitCatalog(cfg.catalog)
	open, ok := stores[scheme]
	if !ok {
		return nil, checkCatalog(cfg.catalog)
	}
	return open(rest, cfg)
}

// boltStore is a bbolt file, reopened by each phase: the restart reads what
// the file really holds.
type boltStore struct{ path string }

// openBoltStore uses the file named after "bolt:", or lowwater.db in the
// --data directory.
func openBoltStore(rest string, cfg config) (store, error) {
	path := rest
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

func (b *boltStore) open(context.Context) (persistence.Catalog, error) {
	return persistence.OpenBolt(b.path)
}

func (b *boltStore) describe() string { return "bbolt file " + b.path }
func (b *boltStore) close() error     { return nil }

// memoryStore is one persistence.Memory for the whole demo: a phase's
// Close leaves it open, so that the restart finds what the run saved.
type memoryStore struct{ mem *persistence.Memory }

func openMemoryStore(rest string, _ config) (store, error) {
	if rest != "" {
		return nil, fmt.Errorf("--catalog memory takes no argument, got %q", rest)
	}
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
