package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
)

// etcdStore is an etcd cluster, reconnected by each phase as a restarted
// process would: the restart reads what etcd really holds.
type etcdStore struct {
	endpoints []string
	prefix    string
}

func openEtcdStore(u catalogurl.URL, _ config) (store, error) {
	return &etcdStore{endpoints: u.Endpoints, prefix: u.Prefix}, nil
}

func (e *etcdStore) open(context.Context) (persistence.Catalog, error) {
	return etcdcatalog.Open(clientv3.Config{Endpoints: e.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		etcdcatalog.WithPrefix(e.prefix))
}

func (e *etcdStore) describe() string {
	return fmt.Sprintf("etcd at %s, prefix %q", strings.Join(e.endpoints, ","), e.prefix)
}

func (e *etcdStore) close() error { return nil }
