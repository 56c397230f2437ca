package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
)

// etcdStore is an etcd cluster, reconnected by each phase as a restarted
// process would: the restart reads what etcd really holds.
type etcdStore struct {
	endpoints []string
	prefix    string
}

// openEtcdStore takes "host:port[,host:port]/prefix"; the prefix is
// optional and defaults to the library's.
func openEtcdStore(rest string, _ config) (store, error) {
	hosts, prefix, _ := strings.Cut(rest, "/")
	if hosts == "" {
		return nil, fmt.Errorf("--catalog etcd://host:port[,host:port]/prefix: no endpoint in %q", rest)
	}
	endpoints := strings.Split(hosts, ",")
	for _, ep := range endpoints {
		if err := checkHostPort("--catalog etcd://", ep); err != nil {
			return nil, err
		}
	}
	if prefix == "" {
		prefix = etcdcatalog.DefaultPrefix
	}
	return &etcdStore{endpoints: endpoints, prefix: prefix}, nil
}

func (e *etcdStore) open(context.Context) (persistence.Catalog, error) {
	return etcdcatalog.Open(clientv3.Config{Endpoints: e.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		etcdcatalog.WithPrefix(e.prefix))
}

func (e *etcdStore) describe() string {
	return fmt.Sprintf("etcd at %s, prefix %q", strings.Join(e.endpoints, ","), e.prefix)
}

func (e *etcdStore) close() error { return nil }
