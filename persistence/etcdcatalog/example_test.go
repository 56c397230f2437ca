package etcdcatalog_test

import (
	"context"
	"errors"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// A node owns a pchannel, recovers its checkpoint and saves under its term
// until ownership ends. (Compiled, not run: it needs an etcd cluster.)
func ExampleCatalog_Own() {
	cat, err := etcdcatalog.Open(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
	}, etcdcatalog.WithPrefix("lowwater"))
	if err != nil {
		log.Fatal(err)
	}
	defer cat.Close()
	// 20 s or more: Open takes 12 s to drop a member that answers
	// nothing, and the lease may have only two thirds of its TTL left
	// then (see Catalog.Own).
	session, err := concurrency.NewSession(cat.Client(), concurrency.WithTTL(20))
	if err != nil {
		log.Fatal(err)
	}
	defer session.Close()

	ctx := context.Background()
	owned, err := cat.Own(ctx, "by-dev-rootcoord-dml_0", session) // waits for the previous owner
	if err != nil {
		log.Fatal(err)
	}
	defer owned.Close()
	start, err := owned.Load(ctx, "by-dev-rootcoord-dml_0") // where the previous owner stopped
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("term %d, consuming from %s", owned.Term(), wal.String(start))

	attempt, cancel := context.WithTimeout(ctx, 5*time.Second) // one attempt, one deadline
	err = owned.Save(attempt, "by-dev-rootcoord-dml_0", wal.KafkaID(42))
	cancel()
	switch {
	case errors.Is(err, persistence.ErrFenced):
		// Another node owns the pchannel now: stop consuming it.
	case err != nil:
		// Retry later with the latest checkpoint.
	}
	select {
	case <-owned.Done():
		log.Printf("ownership lost: %v", owned.Err())
	default:
	}
}
