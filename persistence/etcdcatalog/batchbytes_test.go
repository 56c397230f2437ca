package etcdcatalog_test

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// fatWAL is a WAL whose IDs are fatIDLen bytes, as a vector of per-shard
// offsets may be: well within wal.MaxIDLen, one save fits any etcd, 64 of
// them in a transaction fit none at its defaults.
const (
	fatWAL   wal.Name = "test-fat"
	fatIDLen          = 40 << 10
)

type fatID uint64

func (fatID) WALName() wal.Name { return fatWAL }
func (a fatID) LT(o wal.MessageID) bool {
	b, ok := o.(fatID)
	return ok && a < b
}
func (a fatID) LTE(o wal.MessageID) bool {
	b, ok := o.(fatID)
	return ok && a <= b
}
func (a fatID) EQ(o wal.MessageID) bool {
	b, ok := o.(fatID)
	return ok && a == b
}
func (a fatID) Marshal() []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, fatIDLen), uint64(a))[:fatIDLen]
}
func (a fatID) String() string { return "fat:" + strconv.FormatUint(uint64(a), 10) }

var registerFat = sync.OnceValue(func() error {
	return wal.Register(fatWAL, wal.Codec[fatID]{
		Unmarshal: func(b []byte) (fatID, error) {
			if len(b) != fatIDLen {
				return 0, fmt.Errorf("%d bytes, not %d", len(b), fatIDLen)
			}
			return fatID(binary.BigEndian.Uint64(b)), nil
		},
		Parse: func(s string) (fatID, error) {
			n, err := strconv.ParseUint(s, 10, 64)
			return fatID(n), err
		},
	})
})

// Saves whose batch is too large for etcd, though each fits alone, are
// all stored, and still share transactions: the Batcher bounds a
// transaction's bytes, and one etcd or the client refuses as too large
// goes out again as smaller ones, the bound lowered. Every save in such a
// batch failed with the refusal; then each was saved on its own.
func TestBatcherSavesBatchesTooLargeForEtcd(t *testing.T) {
	require.NoError(t, registerFat())
	eps := etcdtest.Start(t)
	const n = 64 // 64 × 2 × 40 KiB: 5 MiB a batch of WithMaxBatch's default
	for _, c := range []struct {
		name string
		// sendLimit is the client's MaxCallSendMsgSize (0: its 2 MiB).
		sendLimit int
		opts      []etcdcatalog.BatchOption
	}{
		{name: "defaults"},
		{name: "refused by the client", opts: []etcdcatalog.BatchOption{etcdcatalog.WithMaxBatchBytes(64 << 20)}},
		{name: "refused by etcd's gRPC", sendLimit: 64 << 20, opts: []etcdcatalog.BatchOption{etcdcatalog.WithMaxBatchBytes(64 << 20)}},
		{name: "refused by etcd", sendLimit: 64 << 20, opts: []etcdcatalog.BatchOption{etcdcatalog.WithMaxBatchBytes(64 << 20), etcdcatalog.WithMaxBatch(22)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var counter rpcCounter
			cfg := clientConfig(eps, &counter)
			cfg.MaxCallSendMsgSize = c.sendLimit
			cat, err := etcdcatalog.Open(cfg, etcdcatalog.WithPrefix("fat-"+strconv.Itoa(len(c.name))))
			require.NoError(t, err)
			b, err := etcdcatalog.NewBatcher(cat, c.opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close() })
			name := func(i int) string { return fmt.Sprintf("p%02d", i) }
			for i := range n { // known keys: the next saves go in batches
				require.NoError(t, b.Save(ctxT(t), name(i), fatID(1)))
			}
			for round := fatID(2); round <= 3; round++ {
				counter.take()
				var wg sync.WaitGroup
				errs := make([]error, n)
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[i] = b.Save(ctxT(t), name(i), round)
					}()
				}
				wg.Wait()
				for i, err := range errs {
					require.NoError(t, err, "round %d, %s", round, name(i))
				}
				txns := counter.take()["Txn"]
				require.Less(t, txns, n/4, "round %d went in %d transactions for %d saves: not batched", round, txns, n)
			}
			all, err := b.LoadAll(ctxT(t))
			require.NoError(t, err)
			require.Len(t, all, n)
			for p, v := range all {
				require.Equal(t, fatID(3), v, p)
			}
		})
	}
}

// A save too large alone for the client fails in one transaction, with
// the client's refusal, and lowers no bound: it says nothing of how many
// saves fit together.
func TestBatcherSaveTooLargeAloneFailsOnce(t *testing.T) {
	require.NoError(t, registerFat())
	eps := etcdtest.Start(t)
	var counter rpcCounter
	cfg := clientConfig(eps, &counter)
	cfg.MaxCallSendMsgSize = 64 << 10 // a record fits, a transaction that compares one and puts another does not
	cat, err := etcdcatalog.Open(cfg, etcdcatalog.WithPrefix("fat-alone"))
	require.NoError(t, err)
	b, err := etcdcatalog.NewBatcher(cat)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	require.NoError(t, b.Save(ctxT(t), "p", fatID(1)))
	saves0, bytes0 := etcdcatalog.Bounds(b)
	counter.take()
	err = b.Save(ctxT(t), "p", fatID(2))
	require.ErrorContains(t, err, `etcdcatalog: save "p": `)
	require.ErrorContains(t, err, "larger than max")
	require.Equal(t, map[string]int{"Txn": 1}, counter.take())
	saves, bytes := etcdcatalog.Bounds(b)
	require.Equal(t, []int{saves0, bytes0}, []int{saves, bytes})
	got, err := b.Load(ctxT(t), "p")
	require.NoError(t, err)
	require.Equal(t, fatID(1), got)
}
