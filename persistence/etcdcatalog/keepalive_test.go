package etcdcatalog_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// A member that keeps its connections open and answers nothing is dropped
// by Open's keep-alive: a call there fails once the pings go unanswered,
// not at its deadline.
func TestFrozenMemberIsDropped(t *testing.T) {
	eps := etcdtest.Start(t)
	f := newFreezer(t, strings.TrimPrefix(eps[0], "http://"))
	c := openCatalog(t, []string{f.endpoint()}, nil)
	require.NoError(t, c.Save(ctxT(t), "p", wal.KafkaID(1)))

	f.freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := c.Save(ctx, "p", wal.KafkaID(2))
	took := time.Since(start)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the call waited out its deadline: the frozen connection was never dropped")
	require.Less(t, took, etcdcatalog.DefaultKeepAliveTime+etcdcatalog.DefaultKeepAliveTimeout+3*time.Second)
	t.Logf("a save on a frozen member failed after %v: %v", took, err)
}

// freezer forwards TCP connections to target until freeze; from then on it
// moves no byte and closes no connection, as a frozen host or a partition
// that drops packets does.
type freezer struct {
	ln     net.Listener
	target string
	frozen chan struct{}
	closed chan struct{}
	once   sync.Once

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &freezer{ln: ln, target: target, frozen: make(chan struct{}), closed: make(chan struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *freezer) endpoint() string { return "http://" + f.ln.Addr().String() }

func (f *freezer) freeze() { close(f.frozen) }

func (f *freezer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			return
		}
		select {
		case <-f.frozen:
			continue // held open, never answered
		default:
		}
		u, err := net.Dial("tcp", f.target)
		if err != nil || !f.track(u) {
			_ = c.Close()
			continue
		}
		f.wg.Add(2)
		go f.pipe(u, c)
		go f.pipe(c, u)
	}
}

// track keeps c for close, or closes it if the freezer is closed.
func (f *freezer) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.closed:
		_ = c.Close()
		return false
	default:
	}
	f.conns = append(f.conns, c)
	return true
}

func (f *freezer) pipe(dst io.Writer, src io.Reader) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		select {
		case <-f.frozen:
			<-f.closed // hold the connection, move nothing
			return
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (f *freezer) close() {
	f.once.Do(func() {
		f.mu.Lock()
		close(f.closed)
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.mu.Unlock()
		_ = f.ln.Close()
	})
	f.wg.Wait()
}
