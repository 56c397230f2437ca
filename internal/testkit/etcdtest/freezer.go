package etcdtest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Freezer is a TCP proxy in front of an etcd that can be made to stop
// passing bytes: from Freeze on, it holds every connection open, takes new
// ones and moves nothing, as an etcd stopped with SIGSTOP, a frozen host or
// a partition that drops packets does; or slow to connect (Delay); or
// closing what it takes for a while (Refuse). Its connections are closed
// by t.Cleanup.
type Freezer struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // time.Duration
	// refuseUntil is when Refuse's refusals end, in Unix nanoseconds.
	refuseUntil atomic.Int64
	// moved counts the bytes passed, both ways (Moved).
	moved  atomic.Int64
	frozen chan struct{}
	closed chan struct{}
	once   sync.Once // Freeze
	shut   sync.Once // close

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// NewFreezer starts a Freezer on 127.0.0.1 passing connections to target
// (host:port).
func NewFreezer(t testing.TB, target string) *Freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("freezer: %v", err)
	}
	f := &Freezer{ln: ln, target: target, frozen: make(chan struct{}), closed: make(chan struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

// Addr is the Freezer's host:port.
func (f *Freezer) Addr() string { return f.ln.Addr().String() }

// Target is the host:port the Freezer passes connections to.
func (f *Freezer) Target() string { return f.target }

// Endpoint is the Freezer's client URL.
func (f *Freezer) Endpoint() string { return "http://" + f.Addr() }

// Moved is how many bytes the Freezer has passed, both ways: a client
// alone on it that moved some has a connection there that its balancer
// picks.
func (f *Freezer) Moved() int64 { return f.moved.Load() }

// Freeze stops every byte, for good.
func (f *Freezer) Freeze() { f.once.Do(func() { close(f.frozen) }) }

// Delay holds each connection taken from now on for d before it is passed
// on, as a TLS handshake on a loaded host or a distant member makes a
// client wait for etcd's first bytes.
func (f *Freezer) Delay(d time.Duration) { f.delay.Store(int64(d)) }

// Refuse closes each connection taken in the next d at once, as a member
// restarting behind its address does (a proxy, a load balancer or a
// container port that is up before etcd is): a client retries on its
// backoff until d has passed.
func (f *Freezer) Refuse(d time.Duration) { f.refuseUntil.Store(time.Now().Add(d).UnixNano()) }

func (f *Freezer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if time.Now().UnixNano() < f.refuseUntil.Load() {
			_ = c.Close()
			continue
		}
		if !f.track(c) {
			return
		}
		select {
		case <-f.frozen:
			continue // held open, never answered
		default:
		}
		f.wg.Add(1)
		go f.connect(c, time.Duration(f.delay.Load()))
	}
}

// connect passes c on to the target after delay.
func (f *Freezer) connect(c net.Conn, delay time.Duration) {
	defer f.wg.Done()
	select {
	case <-time.After(delay):
	case <-f.closed:
		return
	}
	u, err := net.Dial("tcp", f.target)
	if err != nil || !f.track(u) {
		_ = c.Close()
		return
	}
	f.wg.Add(2)
	go f.pipe(u, c)
	go f.pipe(c, u)
}

// track keeps c for close, or closes it if the Freezer is closed.
func (f *Freezer) track(c net.Conn) bool {
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

// pipe copies from src to dst until src ends, or the freeze, after which it
// holds what it read and passes nothing more.
func (f *Freezer) pipe(dst io.Writer, src io.Reader) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-f.frozen:
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			f.moved.Add(int64(n))
		}
		if err != nil {
			return
		}
	}
}

func (f *Freezer) close() {
	f.shut.Do(func() {
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
