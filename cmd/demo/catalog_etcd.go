package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
)

// etcdStore is an etcd cluster, reconnected by each phase as a restarted
// process would: the restart reads what etcd really holds.
type etcdStore struct {
	endpoints []string
	prefix    string
	access    etcdaccess.Access
}

func openEtcdStore(u catalogurl.URL, cfg config) (store, error) {
	return &etcdStore{endpoints: u.Endpoints, prefix: u.Prefix, access: cfg.etcd}, nil
}

func (e *etcdStore) open(ctx context.Context) (persistence.Catalog, error) {
	if err := etcdaccess.AnyListens(ctx, e.endpoints); err != nil {
		return nil, err
	}
	cfg := clientv3.Config{Endpoints: e.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if err := e.access.Apply(&cfg); err != nil {
		return nil, err
	}
	return etcdcatalog.Open(cfg, etcdcatalog.WithPrefix(e.prefix))
}

// diagnose says why etcd may not have answered in time: the client's own
// error says only that the deadline passed.
func (e *etcdStore) diagnose() string { return e.access.Diagnose(e.endpoints) }

func (e *etcdStore) describe() string {
	return fmt.Sprintf("etcd at %s, prefix %q", strings.Join(e.endpoints, ","), e.prefix)
}

func (e *etcdStore) close() error { return nil }
