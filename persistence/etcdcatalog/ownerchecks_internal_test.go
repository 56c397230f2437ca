package etcdcatalog

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A round of the owner reads has ownerRecheck in all, however many reads
// it holds: with every call slot held, each read of a round waited that
// long for one, and a round of four reads left the waits begun meanwhile
// unread for 8 s.
func TestARoundOfTheOwnerReadsWaitsNoLongerThanOneRecheck(t *testing.T) {
	o, err := buildOptions([]Option{WithMaxConcurrentCalls(1)})
	require.NoError(t, err)
	c := newCatalog(nil, false, o)
	defer c.endClosing()
	c.calls <- struct{}{} // every slot held, by a call that does not end

	k := &c.ownerChecks
	var waits []*ownerWait
	for i := range 4 * ownersPerRead {
		w := &ownerWait{key: fmt.Sprintf("/lowwater/wal/p%03d/owner", i), create: 1, gone: make(chan struct{})}
		k.waits[w] = struct{}{}
		waits = append(waits, w)
	}
	began := time.Now()
	c.readRound(waits)
	took := time.Since(began)
	require.GreaterOrEqual(t, took, ownerRecheck, "the round gave up before its time")
	require.Less(t, took, 2*ownerRecheck)
	for _, w := range waits {
		select {
		case <-w.gone:
			t.Fatalf("%s ended, though never read", w.key)
		default:
		}
	}
}
