package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/persistence"
)

// startEtcd starts a single-member etcd on 127.0.0.1, on ports the OS
// chooses, with its data in dir, and returns it with its client URL.
func startEtcd(dir string) (*embed.Etcd, string, error) {
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg := embed.NewConfig()
	cfg.Name = "failover"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.Name + "=" + local.String()
	cfg.InitialClusterToken = "lowwater-failover-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	cfg.EnableGRPCGateway = false
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("start etcd: %w", err)
	}
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, "", fmt.Errorf("etcd failed: %w", err)
	case <-timer.C:
		e.Close()
		return nil, "", errors.New("etcd not ready after 30s")
	}
	return e, "http://" + e.Clients[0].Addr().String(), nil
}

func checkpointKey(prefix, pchannel string) string {
	return prefix + "/wal/" + pchannel + "/consume-checkpoint"
}

// write is one value stored at a checkpoint key.
type write struct {
	rev int64
	rec persistence.Record
}

// errCompacted says that etcd no longer holds the whole history.
var errCompacted = errors.New("history compacted away")

// deletedError says that the key was deleted: something else (an
// operator's tool, another program) removed a checkpoint the nodes wrote,
// which the check finds, rather than a failure to check.
type deletedError struct {
	key string
	rev int64
}

func (e *deletedError) Error() string { return fmt.Sprintf("%s deleted at revision %d", e.key, e.rev) }

// history returns every value written at key, pchannel's, from revision from on, up to
// the one stored now, read back through a watch.
func history(ctx context.Context, cli *clientv3.Client, pchannel, key string, from int64) ([]write, error) {
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision < from {
		return nil, nil
	}
	to := resp.Kvs[0].ModRevision
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []write
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(from)) {
		if wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted) {
			return nil, errCompacted
		}
		if err := wr.Err(); err != nil {
			return nil, err
		}
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.PUT {
				return nil, &deletedError{key: key, rev: ev.Kv.ModRevision}
			}
			rec, err := persistence.DecodeRecord(pchannel, ev.Kv.Value)
			if err != nil {
				return nil, fmt.Errorf("revision %d: %w", ev.Kv.ModRevision, err)
			}
			out = append(out, write{rev: ev.Kv.ModRevision, rec: rec})
			if ev.Kv.ModRevision >= to {
				return out, nil
			}
		}
	}
	return nil, fmt.Errorf("watch of %s ended early: %w", key, ctx.Err())
}
