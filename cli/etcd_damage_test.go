package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// onDamagedEtcd starts an etcd and returns the --catalog flag of the
// catalog under prefix "cli" on it, and a client to damage its keys with
// as a hand or another tool would.
func onDamagedEtcd(t *testing.T) (flag string, client *clientv3.Client) {
	t.Helper()
	eps := etcdtest.Start(t)
	client, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, client.Close()) })
	return "--catalog=etcd://" + strings.TrimPrefix(eps[0], "http://") + "/cli", client
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A record under the empty pchannel name, at cli/wal//consume-checkpoint,
// was in no command's sight: list and verify passed it over, and delete
// --quoted '""' was a bad command line. It is a name no node can use, as
// verify says of the others, and delete --quoted '""' removes it.
func TestEtcdRecordUnderTheEmptyName(t *testing.T) {
	catalog, client := onDamagedEtcd(t)
	out, code := run(t, catalog, "set", "good", "kafka:1")
	require.Equal(t, cli.ExitOK, code, out)
	raw, err := persistence.EncodeRecord("", persistence.Record{Checkpoint: wal.KafkaID(7)})
	require.NoError(t, err)
	const key = "cli/wal//consume-checkpoint"
	_, err = client.Put(ctxT(t), key, string(raw))
	require.NoError(t, err)

	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Equal(t, `BAD NAME  "": persistence: invalid argument: empty pchannel name
2 records, 1 unreadable
lowwater: 1 unreadable record
  BAD NAME: no node can use it: 'delete --quoted NAME',
    NAME quoted as shown here
`, out)
	out, code = run(t, catalog, "list")
	require.Equal(t, cli.ExitOK, code, out)
	lines := strings.Split(out, "\n")
	require.Equal(t, []string{"PCHANNEL  WAL    CHECKPOINT  TERM  VERSION", `""        kafka  BAD NAME    0     2`},
		lines[:2], out)
	require.Equal(t, "2 pchannels, 1 unreadable (run verify)", lines[3], out)
	out, code = run(t, catalog, "list", "--json")
	require.Equal(t, cli.ExitOK, code, out)
	var listed []struct{ PChannel, Quoted, Error string }
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed, 2)
	require.Equal(t, struct{ PChannel, Quoted, Error string }{"", `""`,
		"persistence: invalid argument: empty pchannel name"}, listed[0])
	out, code = run(t, catalog, "get", "--quoted", `""`)
	require.Equal(t, cli.ExitCorrupt, code, out)
	require.Contains(t, out, "pchannel    \"\"\nwal         kafka\ncheckpoint  BAD NAME: ")

	// Without --quoted the empty name is still a bad command line.
	out, code = run(t, catalog, "delete", "")
	require.Equal(t, cli.ExitUsage, code, out)
	out, code = run(t, catalog, "delete", "--quoted", `""`, "--dry-run")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, `"": would delete kafka:7`+"\n", out)
	out, code = run(t, catalog, "delete", "--quoted", `""`)
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, `"": deleted kafka:7`+"\n", out)
	left, err := client.Get(ctxT(t), "cli/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, left.Kvs, 1, "no owner key left either")
	require.Equal(t, "cli/wal/good/consume-checkpoint", string(left.Kvs[0].Key))
	out, code = run(t, catalog, "verify")
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, "1 record, 0 unreadable\n", out)
	out, code = run(t, catalog, "delete", "--quoted", `""`)
	require.Equal(t, cli.ExitOK, code, out)
	require.Equal(t, `"": nothing stored`+"\n", out)
}
