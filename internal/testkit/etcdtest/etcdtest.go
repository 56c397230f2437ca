// Package etcdtest runs real etcd servers inside a test process, with
// go.etcd.io/etcd/server/v3/embed: one member with Start or StartServer, a
// cluster with StartCluster. Every member listens on 127.0.0.1, keeps its data
// in t.TempDir() and logs nothing (set LOWWATER_ETCD_LOG=1 to log to stderr).
// Servers are closed, and their goroutines waited for, by t.Cleanup.
package etcdtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// readyTimeout bounds the wait for a member (or a cluster) to serve clients.
const readyTimeout = 30 * time.Second

// Server is one embedded etcd member.
type Server struct {
	t    testing.TB
	name string
	dir  string
	// clientURL is fixed at the first start, so that a restarted member is
	// found where its clients left it; peerURL is fixed before it.
	clientURL url.URL
	peerURL   url.URL
	// cluster and token are the bootstrap configuration, used at the first
	// start only (a restart reads the membership from dir).
	cluster string
	token   string
	// tls, if set, is how the member serves its clients (StartTLS).
	tls *transport.TLSInfo

	mu sync.Mutex
	e  *embed.Etcd // nil while stopped
}

// Start starts a single-member etcd and returns its client endpoints.
func Start(t testing.TB) []string {
	t.Helper()
	return StartServer(t).Endpoints()
}

// StartServer starts a single-member etcd on a free client port (see
// freePorts); Stop and Restart keep it, so that clients reconnect on their
// own.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return startSolo(t, nil)
}

// startSolo starts a single-member etcd, serving its clients over TLS if
// tls is set.
func startSolo(t testing.TB, tls *transport.TLSInfo) *Server {
	t.Helper()
	scheme := "http"
	if tls != nil {
		scheme = "https"
	}
	ports, err := freePorts(1)
	if err != nil {
		t.Fatalf("etcdtest: a free port: %v", err)
	}
	s := &Server{
		t:         t,
		name:      "solo",
		dir:       t.TempDir(),
		clientURL: url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))},
		peerURL:   url.URL{Scheme: "http", Host: "127.0.0.1:0"},
		token:     uniqueToken(),
		tls:       tls,
	}
	s.cluster = s.name + "=" + s.peerURL.String()
	e, err := s.start(true)
	if err != nil {
		t.Fatalf("etcdtest: start: %v", err)
	}
	s.setRunning(e)
	t.Cleanup(s.Stop)
	return s
}

// Embed starts a single-member etcd with its data in dir, for code that has
// no testing.TB, such as a runnable example. stop closes it and waits for
// its goroutines.
func Embed(dir string) (endpoints []string, stop func(), err error) {
	s := &Server{
		name:      "solo",
		dir:       dir,
		clientURL: url.URL{Scheme: "http", Host: "127.0.0.1:0"},
		peerURL:   url.URL{Scheme: "http", Host: "127.0.0.1:0"},
		token:     uniqueToken(),
	}
	s.cluster = s.name + "=" + s.peerURL.String()
	e, err := s.start(true)
	if err != nil {
		return nil, nil, fmt.Errorf("etcdtest: start: %w", err)
	}
	s.setRunning(e)
	return s.Endpoints(), s.Stop, nil
}

// Endpoints returns the member's client URL.
func (s *Server) Endpoints() []string { return []string{s.clientURL.String()} }

// Name returns the member's name.
func (s *Server) Name() string { return s.name }

// Etcd returns the running member, or nil while it is stopped.
func (s *Server) Etcd() *embed.Etcd {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e
}

// IsLeader reports whether the member runs and is the raft leader.
func (s *Server) IsLeader() bool {
	e := s.Etcd()
	return e != nil && e.Server.Leader() == e.Server.MemberID()
}

// Stop closes the member gracefully (a leader hands its leadership over
// first) and waits for its goroutines. The data stays for Restart. Stopping a
// stopped member does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Kill stops the member the way a crash would, as far as the cluster can
// tell: raft stops at once, with no leadership transfer, then the listeners
// close. The data stays for Restart.
func (s *Server) Kill() {
	s.mu.Lock()
	e := s.e
	s.e = nil
	s.mu.Unlock()
	if e != nil {
		e.Server.HardStop()
		e.Close()
	}
}

// Restart starts a stopped member again on its data and its URLs.
func (s *Server) Restart() {
	s.t.Helper()
	if s.Etcd() != nil {
		s.t.Fatalf("etcdtest: restart %s: still running", s.name)
	}
	s.restart(false, "restart")
}

// restart starts the member on its URLs again, fresh (a new cluster) or
// not. The ports were ours a moment ago; if another process took one in
// between, there is nothing to do but try a few times and report it.
func (s *Server) restart(fresh bool, what string) {
	var e *embed.Etcd
	var err error
	for range 3 {
		if e, err = s.start(fresh); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		s.t.Fatalf("etcdtest: %s %s: %v", what, s.name, err)
	}
	s.setRunning(e)
}

func (s *Server) setRunning(e *embed.Etcd) {
	s.mu.Lock()
	s.e = e
	s.mu.Unlock()
}

// start starts the member and waits until it serves; when wait is false it
// returns once the listeners are bound (a cluster member waits for quorum).
func (s *Server) start(wait bool) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = s.name
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = s.cluster
	cfg.InitialClusterToken = s.token
	cfg.EnableGRPCGateway = false
	if s.tls != nil {
		cfg.ClientTLSInfo = *s.tls
	}
	if os.Getenv("LOWWATER_ETCD_LOG") == "" {
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	} else {
		cfg.LogLevel = "info"
		cfg.LogOutputs = []string{"stderr"}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	// Fix the OS-chosen client port, so that a restart comes back on it and
	// clients reconnect by themselves. A single member's peer URL stays as
	// configured: it is part of the member's identity, and no peer dials it.
	if s.clientURL.Port() == "0" {
		s.clientURL.Host = e.Clients[0].Addr().String()
	}
	if !wait {
		return e, nil
	}
	if err := waitReady(e); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func waitReady(e *embed.Etcd) error {
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return fmt.Errorf("member failed: %w", err)
	case <-timer.C:
		return fmt.Errorf("member not ready after %v", readyTimeout)
	}
}

// Cluster is a set of embedded etcd members forming one cluster.
type Cluster struct {
	Members []*Server
}

// StartCluster starts an n-member cluster and waits until every member
// serves clients. Peer ports cannot be chosen by the OS here (each member
// must know the others' before it starts), so free ports are reserved and
// released just before the start; on a clash with another process the whole
// cluster is started again on new ports.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: cluster of %d members", n)
	}
	var lastErr error
	for range 5 {
		c, err := startCluster(t, n)
		if err == nil {
			t.Cleanup(c.Stop)
			return c
		}
		lastErr = err
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	t.Fatalf("etcdtest: start cluster: %v", lastErr)
	return nil
}

func startCluster(t testing.TB, n int) (*Cluster, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	token := uniqueToken()
	c := &Cluster{Members: make([]*Server, n)}
	initial := make([]string, n)
	for i := range n {
		s := &Server{
			t:         t,
			name:      "m" + strconv.Itoa(i),
			dir:       t.TempDir(),
			clientURL: url.URL{Scheme: "http", Host: "127.0.0.1:0"},
			peerURL:   url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))},
			token:     token,
		}
		c.Members[i] = s
		initial[i] = s.name + "=" + s.peerURL.String()
	}
	for _, s := range c.Members {
		s.cluster = strings.Join(initial, ",")
		e, err := s.start(false)
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("member %s: %w", s.name, err)
		}
		s.setRunning(e)
	}
	for _, s := range c.Members {
		if err := waitReady(s.Etcd()); err != nil {
			c.Stop()
			return nil, fmt.Errorf("member %s: %w", s.name, err)
		}
	}
	return c, nil
}

// Endpoints returns the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, 0, len(c.Members))
	for _, s := range c.Members {
		eps = append(eps, s.Endpoints()...)
	}
	return eps
}

// Leader returns the index of the running member that is leader, or -1 when
// none is.
func (c *Cluster) Leader() int {
	for i, s := range c.Members {
		if s.IsLeader() {
			return i
		}
	}
	return -1
}

// Isolate cuts member i off from the other members, in both directions, as
// a partition between the hosts does, while its clients still reach it: the
// raft messages between them are dropped (etcd's own CutPeer, with which its
// integration tests make partitions). The member is soon left without a
// leader (a leader steps down after an election timeout without a quorum's
// answer), and the others elect one of their own. Rejoin mends it. A
// member not running then is left out of either.
func (c *Cluster) Isolate(i int) { c.cut(i, (*etcdserver.EtcdServer).CutPeer) }

// Rejoin mends what Isolate cut.
func (c *Cluster) Rejoin(i int) { c.cut(i, (*etcdserver.EtcdServer).MendPeer) }

func (c *Cluster) cut(i int, do func(*etcdserver.EtcdServer, types.ID)) {
	one := c.Members[i].Etcd()
	if one == nil {
		c.Members[i].t.Fatalf("etcdtest: %s is not running", c.Members[i].name)
	}
	for j, m := range c.Members {
		other := m.Etcd()
		if j == i || other == nil {
			continue
		}
		do(one.Server, other.Server.MemberID())
		do(other.Server, one.Server.MemberID())
	}
}

// Stop stops every member.
func (c *Cluster) Stop() {
	for _, s := range c.Members {
		if s != nil {
			s.Stop()
		}
	}
}

// freePorts returns n distinct ports free on 127.0.0.1, below the range
// the OS takes the local ports of outgoing connections from, where it can
// tell (Linux): a member stopped and started again on its port found it
// taken, now and then, by a client connection of a test running beside.
// Where it cannot tell, the OS chooses, from that range.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	low := ephemeralLow()
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if low > minPort+1000 && tries < 1000 {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(minPort+rand.IntN(low-minPort)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				continue
			}
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// minPort is the lowest port freePorts picks: above the well-known ones
// and those services commonly take.
const minPort = 10000

// ephemeralLow returns the lowest local port the OS gives outgoing
// connections, 0 if unknown.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}

var tokenSeq struct {
	sync.Mutex
	n int
}

// uniqueToken keeps members of different clusters (in this process or in
// another test binary reusing a port) from talking to each other.
func uniqueToken() string {
	tokenSeq.Lock()
	defer tokenSeq.Unlock()
	tokenSeq.n++
	return fmt.Sprintf("lowwater-%d-%d-%d", os.Getpid(), time.Now().UnixNano(), tokenSeq.n)
}

// IgnorePeerConnections returns the goleak options a test binary that runs a
// Cluster needs, and only those. After members stop, the HTTP connections
// between them (rafthttp streams) outlive Etcd.Close for up to 5 s: the peer
// server's Shutdown gives up after 1 s on active streams, and etcd's
// timeoutConn re-arms the read deadline that net/http sets to abort a
// connection's background read, so each side ends only at
// rafthttp.ConnReadTimeout (measured here: all gone about 3 s after the last
// member stopped). lowwater itself uses no net/http; a single-member Server
// has no peer connections and needs none of these.
//
// One more is etcd's own hang: a member polls another's /version, and when
// the poll reaches a member whose server has stopped but whose peer
// listener is still open, etcd reads a closed backend. The first such
// request panics while holding the read transaction's lock (net/http
// recovers it); every later one blocks on that lock for good, and
// Etcd.Close gives up on it after 1 s. TestVersionPollAfterStopHangs pins
// this, so that the option goes once etcd mends it.
func IgnorePeerConnections() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction(VersionHandler),
		// client side of a peer stream, in the surviving member's transport
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		// server side of a peer stream, waiting for its read to time out
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).abortPendingRead"),
	}
}

// VersionHandler is the function of etcd's peer /version handler, which
// IgnorePeerConnections lets outlive a cluster.
const VersionHandler = "go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"

// WipeAndRestart stops the member, deletes its data and starts it again as a
// new single-member cluster on the same client URL, so that clients
// reconnect by themselves and find etcd gone back in time: empty, its
// revisions counting from 1 again, as after a lost data directory or a
// restore from an old snapshot.
func (s *Server) WipeAndRestart() {
	s.t.Helper()
	s.Stop()
	if err := os.RemoveAll(s.dir); err != nil {
		s.t.Fatalf("etcdtest: wipe %s: %v", s.name, err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		s.t.Fatalf("etcdtest: wipe %s: %v", s.name, err)
	}
	s.token = uniqueToken()
	s.restart(true, "restart wiped")
}
