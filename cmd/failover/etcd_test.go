package main

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A checkpoint key deleted by something other than the nodes is a finding
// of the check (exit 1), not a failure to check (exit 2): history says so
// with its own error.
func TestHistoryTellsADeletedKey(t *testing.T) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdtest.Start(t), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := t.Context()
	rec, err := persistence.EncodeRecord("p0", persistence.Record{Checkpoint: wal.KafkaID(7)})
	if err != nil {
		t.Fatal(err)
	}
	put, err := cli.Put(ctx, "k", string(rec))
	if err != nil {
		t.Fatal(err)
	}
	del, err := cli.Delete(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", string(rec)); err != nil {
		t.Fatal(err)
	}
	_, err = history(ctx, cli, "p0", "k", put.Header.Revision)
	deleted, ok := errors.AsType[*deletedError](err)
	if !ok || deleted.rev != del.Header.Revision {
		t.Fatalf("history = %v, want the key deleted at revision %d", err, del.Header.Revision)
	}
}
