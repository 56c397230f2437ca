// Package etcdaccess is how lowwater's commands (the lowwater tool and the
// demo) reach a secured etcd: over TLS, with a CA of its own and a client
// certificate, and as a user. Both take the same flags and environment
// variables, so that an operator sets them once. The password is read
// from the environment only, never a flag, so that it shows in no process
// list.
package etcdaccess

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lowwater/lowwater/internal/catalogurl"
)

// The environment variables that FromEnv reads.
const (
	EnvCACert   = "LOWWATER_ETCD_CACERT"
	EnvCert     = "LOWWATER_ETCD_CERT"
	EnvKey      = "LOWWATER_ETCD_KEY"
	EnvUser     = "LOWWATER_ETCD_USER"
	EnvPassword = "LOWWATER_ETCD_PASSWORD"
)

// flagNames are the flags that Register defines.
var flagNames = []string{"etcd-cacert", "etcd-cert", "etcd-key", "etcd-user"}

// Access is the TLS and the credentials of an etcd client. The zero value
// is a plain connection with no user.
type Access struct {
	CAFile, CertFile, KeyFile string
	User, Password            string
}

// FromEnv reads the environment variables through getenv (os.Getenv, or
// a test's own).
func FromEnv(getenv func(string) string) Access {
	return Access{
		CAFile:   getenv(EnvCACert),
		CertFile: getenv(EnvCert),
		KeyFile:  getenv(EnvKey),
		User:     getenv(EnvUser),
		Password: getenv(EnvPassword),
	}
}

// Register defines the flags on fs, each defaulting to what a holds
// already (from the environment, through FromEnv): a flag given wins.
func (a *Access) Register(fs *flag.FlagSet) {
	fs.StringVar(&a.CAFile, "etcd-cacert", a.CAFile, "verify etcd's certificate with the CA in `FILE` (PEM), not the system's; turns TLS on ($"+EnvCACert+")")
	fs.StringVar(&a.CertFile, "etcd-cert", a.CertFile, "client certificate in `FILE` (PEM); turns TLS on ($"+EnvCert+")")
	fs.StringVar(&a.KeyFile, "etcd-key", a.KeyFile, "its private key in `FILE` (PEM) ($"+EnvKey+")")
	fs.StringVar(&a.User, "etcd-user", a.User, "authenticate to etcd as `NAME`, with the password in $"+EnvPassword+" ($"+EnvUser+")")
}

// TLS reports whether the connection is to use TLS.
func (a Access) TLS() bool { return a.CAFile != "" || a.CertFile != "" || a.KeyFile != "" }

// Check refuses, for the catalog u, settings that cannot work: any of the
// flags Register defines, given (named in given, the flags on the command
// line) for a catalog other than etcd, where they would be ignored; and
// for etcd what Validate refuses. What the environment set is left be for
// another catalog: it may well be meant for another command.
func (a Access) Check(u catalogurl.URL, given map[string]bool) error {
	if u.Kind != catalogurl.Etcd {
		for _, f := range flagNames {
			if given[f] {
				return fmt.Errorf("--%s is for an etcd catalog, not %s", f, u)
			}
		}
		return nil
	}
	return a.Validate()
}

// Validate refuses settings that cannot work: a certificate without its
// key or the other way round, and a password with no user. The files are
// read only by Apply.
func (a Access) Validate() error {
	switch {
	case (a.CertFile == "") != (a.KeyFile == ""):
		return fmt.Errorf("--etcd-cert and --etcd-key ($%s, $%s) go together", EnvCert, EnvKey)
	case a.Password != "" && a.User == "":
		return fmt.Errorf("$%s is set, but no user: give --etcd-user (or $%s)", EnvPassword, EnvUser)
	case a.User != "" && a.Password == "":
		// etcd's client sends no credentials without a password, and
		// etcd then answers "user name is empty".
		return fmt.Errorf("--etcd-user %s needs its password in $%s", a.User, EnvPassword)
	}
	return nil
}

// Apply sets cfg's TLS and credentials. A file that cannot be read or
// holds no certificate is an error that names its flag.
func (a Access) Apply(cfg *clientv3.Config) error {
	if a.User != "" {
		cfg.Username, cfg.Password = a.User, a.Password
	}
	tc, err := a.tlsConfig()
	cfg.TLS = tc
	return err
}

// tlsConfig is the TLS the settings ask for, nil for none.
func (a Access) tlsConfig() (*tls.Config, error) {
	if !a.TLS() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.CAFile != "" {
		pem, err := os.ReadFile(a.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		pool, err := certPool(pem)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %s: %w", a.CAFile, err)
		}
		tc.RootCAs = pool
	}
	if a.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert, --etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

var errNoCertificate = errors.New("no PEM certificate in it")

// certPool is the certificates of the PEM blocks in data. A certificate
// block that does not parse is its error, not "no certificate", which
// x509.CertPool.AppendCertsFromPEM says of both.
func certPool(data []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	found := false
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("its PEM certificate cannot be read: %w", err)
		}
		pool.AddCert(cert)
		found = true
	}
	if !found {
		return nil, errNoCertificate
	}
	return pool, nil
}

// ProbeTime bounds what Probe spends.
const ProbeTime = time.Second

// Probe says why the etcd at endpoint (host:port) may not have answered
// a command, or "" when it answers a request now and nothing shows. The client's own error after a timeout says only that the
// deadline passed, whether etcd is down, speaks TLS to a client that does
// not, refuses its certificate or its user, is stopped (SIGSTOP, a full
// disk), or has lost its quorum. Probe connects to it as the client
// would (diagnose) and, at the same time, asks it for a key (ask), all
// within ProbeTime.
func (a Access) Probe(endpoint string) string {
	type answer struct {
		answered bool
		refusal  error
	}
	asked := make(chan answer, 1)
	go func() {
		answered, refusal := a.ask(endpoint)
		asked <- answer{answered, refusal}
	}()
	why := a.diagnose(endpoint)
	ans := <-asked
	switch {
	case why != "":
		return why
	case !ans.answered:
		return silent(endpoint)
	case errors.Is(ans.refusal, rpctypes.ErrUserEmpty):
		return fmt.Sprintf("etcd at %s refuses the client: %v: give --etcd-user, and its password in $%s",
			endpoint, ans.refusal, EnvPassword)
	case ans.refusal != nil:
		return fmt.Sprintf("etcd at %s refuses the client: %v", endpoint, ans.refusal)
	}
	return ""
}

// ProbeAll probes every endpoint at once (Probe): the client tries each,
// and each may fail for a reason of its own. whys holds each endpoint's,
// "" for one that answers now.
func (a Access) ProbeAll(endpoints []string) (whys []string) {
	whys = make([]string, len(endpoints))
	var wg sync.WaitGroup
	for i, endpoint := range endpoints {
		wg.Go(func() { whys[i] = a.Probe(endpoint) })
	}
	wg.Wait()
	return whys
}

// Diagnose says why the etcd at endpoints may not have answered in time,
// which the client's own error does not (it says only that a deadline
// passed): what ProbeAll finds at each endpoint, joined by "; ", or ""
// when every one answers now.
func (a Access) Diagnose(endpoints []string) string {
	whys := slices.DeleteFunc(a.ProbeAll(endpoints), func(why string) bool { return why == "" })
	return strings.Join(whys, "; ")
}

// silent says that endpoint takes connections and answers nothing.
func silent(endpoint string) string {
	return fmt.Sprintf("%s takes connections but answers no request within %v: is etcd stopped, or without a quorum?",
		endpoint, ProbeTime)
}

// diagnose says why the etcd at endpoint may not answer, found by
// connecting to it as the client would, or "" if nothing shows.
func (a Access) diagnose(endpoint string) string {
	deadline := time.Now().Add(ProbeTime)
	conn, err := net.DialTimeout("tcp", endpoint, ProbeTime)
	if err != nil {
		return fmt.Sprintf("cannot connect to %s: %v", endpoint, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	tc, err := a.tlsConfig()
	if err != nil {
		return err.Error()
	}
	host, _, _ := net.SplitHostPort(endpoint)
	if tc == nil {
		// Only to learn whether it speaks TLS: nothing is sent over it.
		probe := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: host})
		err := probe.Handshake()
		var answer tls.RecordHeaderError
		switch {
		case err == nil:
			return fmt.Sprintf("%s speaks TLS: give --etcd-cacert (and --etcd-cert, --etcd-key if it asks clients for a certificate)", endpoint)
		case errors.As(err, &answer) && string(answer.RecordHeader[:]) == "HTTP/":
			// An HTTP/1 server answers the hello with an error page,
			// where etcd, which speaks gRPC (HTTP/2), says nothing; the
			// client then waits for an answer that never comes.
			return fmt.Sprintf("%s answers HTTP/1, not etcd's gRPC: is it another server, or etcd's peer or metrics URL?", endpoint)
		}
		return ""
	}
	tc = tc.Clone()
	tc.ServerName = host
	tc.NextProtos = []string{"h2"}
	c := tls.Client(conn, tc)
	if err := c.Handshake(); err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return silent(endpoint) // stopped: it takes connections, and says nothing
		case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
			return fmt.Sprintf("%s ended the TLS handshake unanswered: does it speak TLS? (a plain etcd needs no "+
				"--etcd-cacert, --etcd-cert nor --etcd-key)", endpoint)
		}
		return fmt.Sprintf("TLS with %s failed: %v", endpoint, err)
	}
	// TLS 1.3 tells a refused client certificate after the handshake, on
	// the first read.
	_ = c.SetReadDeadline(time.Now().Add(min(200*time.Millisecond, time.Until(deadline))))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return fmt.Sprintf("TLS with %s failed: %v", endpoint, err)
		}
	}
	return ""
}

// ask reports whether the etcd at endpoint answers a request within
// ProbeTime: a linearizable read of one key, as etcdctl's endpoint health
// asks, so that an etcd with no leader does not answer. It asks with the
// settings' TLS and no user: authenticating one costs etcd a password
// hash, long enough on a busy machine to take an etcd that answers for
// one that does not, and a wrong password shows once the command has the
// time to be told. A refusal is an answer; it is returned if it is one of
// the settings' (no user, to an etcd that wants one).
func (a Access) ask(endpoint string) (answered bool, refusal error) {
	scheme := "http://"
	if a.TLS() {
		scheme = "https://"
	}
	cfg := clientv3.Config{Endpoints: []string{scheme + endpoint}, DialTimeout: ProbeTime, Logger: zap.NewNop()}
	if err := (Access{CAFile: a.CAFile, CertFile: a.CertFile, KeyFile: a.KeyFile}).Apply(&cfg); err != nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ProbeTime)
	defer cancel()
	cfg.Context = ctx
	c, err := clientv3.New(cfg)
	if err == nil {
		defer c.Close()
		_, err = c.Get(ctx, "health")
	}
	switch {
	case err == nil || errors.Is(err, rpctypes.ErrPermissionDenied):
		return true, nil
	case errors.Is(err, rpctypes.ErrUserEmpty) && a.User != "":
		return true, nil // asked with no user, where the command gives one
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return false, nil
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false, nil
	}
	return true, err
}

// AnyListens fails at once when every endpoint (host:port) refuses a
// connection or names a host that does not exist: etcd's client would
// retry them until its deadline, and only then could Probe say why. A
// timeout or any other answer is left to the client.
func AnyListens(ctx context.Context, endpoints []string) error {
	var d net.Dialer
	reasons := make([]string, 0, len(endpoints))
	for _, e := range endpoints {
		dialCtx, cancel := context.WithTimeout(ctx, ProbeTime)
		conn, err := d.DialContext(dialCtx, "tcp", e)
		cancel()
		var dnsErr *net.DNSError
		var addrErr *net.AddrError
		switch {
		case err == nil:
			_ = conn.Close()
			return nil
		case errors.Is(err, syscall.ECONNREFUSED):
			reasons = append(reasons, e+" (connection refused)")
		case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
			reasons = append(reasons, e+" (no such host)")
		case errors.As(err, &addrErr):
			reasons = append(reasons, e+" ("+addrErr.Err+")")
		default:
			return nil
		}
	}
	return fmt.Errorf("nothing listens at %s: is etcd up, and at that address?", strings.Join(reasons, ", "))
}
