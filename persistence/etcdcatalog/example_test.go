package etcdcatalog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// A node owns a pchannel, recovers its checkpoint and saves under its term
// until ownership ends. (An embedded etcd stands in for your cluster.)
func ExampleCatalog_Own() {
	endpoints, stopEtcd := standInEtcd() // your cluster's endpoints
	defer stopEtcd()

	cat, err := etcdcatalog.Open(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}, etcdcatalog.WithPrefix("lowwater"))
	if err != nil {
		panic(err)
	}
	defer cat.Close()
	// 25 s or more: Open takes 12 s to drop a member that answers
	// nothing, and the lease may have only two thirds of its TTL left
	// then (see Catalog.Own).
	// How long to wait for etcd; the session outlives it.
	grant, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	session, err := cat.NewSession(grant, 30)
	cancel()
	if err != nil {
		panic(err)
	}
	defer func() {
		// Revokes the lease: whatever the session owns is free at once.
		stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = cat.CloseSession(stop, session)
	}()

	ctx := context.Background()
	const pchannel = "by-dev-rootcoord-dml_0"
	owned, err := cat.Own(ctx, pchannel, session) // waits for the previous owner
	if err != nil {
		panic(err)
	}
	defer owned.Close()
	start, err := owned.Load(ctx, pchannel) // where the previous owner stopped
	if err != nil {
		panic(err)
	}
	fmt.Println("consuming from:", wal.String(start))

	attempt, cancel := context.WithTimeout(ctx, 5*time.Second) // one attempt, one deadline
	err = owned.Save(attempt, pchannel, wal.KafkaID(42))
	cancel()
	switch {
	case errors.Is(err, persistence.ErrFenced):
		fmt.Println("another node owns it now: stop consuming it")
	case err != nil:
		fmt.Println("not saved, retry later with the latest checkpoint:", err)
	default:
		fmt.Println("saved: kafka:42")
	}
	select {
	case <-owned.Done():
		fmt.Println("ownership lost:", owned.Err())
	default:
		fmt.Println("still the owner")
	}
	// Output:
	// consuming from: <none>
	// saved: kafka:42
	// still the owner
}

// standInEtcd starts an embedded etcd, with its data in a directory of its
// own, to stand in for the reader's cluster in the examples; stop closes
// it and removes the directory.
func standInEtcd() (endpoints []string, stop func()) {
	dir, err := os.MkdirTemp("", "lowwater-example-")
	if err != nil {
		panic(err)
	}
	endpoints, stopEtcd, err := etcdtest.Embed(dir)
	if err != nil {
		os.RemoveAll(dir)
		panic(err)
	}
	return endpoints, func() {
		stopEtcd()
		os.RemoveAll(dir)
	}
}
