package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/internal/catalogurl"
)

// etcdAccess is how the tool reaches a secured etcd: TLS, with a CA of its
// own and a client certificate, and a user. The password is read from the
// environment only, never a flag, so that it shows in no process list.
type etcdAccess struct {
	caFile, certFile, keyFile string
	user, password            string
}

func etcdAccessFromEnv(getenv func(string) string) etcdAccess {
	return etcdAccess{
		caFile:   getenv("LOWWATER_ETCD_CACERT"),
		certFile: getenv("LOWWATER_ETCD_CERT"),
		keyFile:  getenv("LOWWATER_ETCD_KEY"),
		user:     getenv("LOWWATER_ETCD_USER"),
		password: getenv("LOWWATER_ETCD_PASSWORD"),
	}
}

func (a etcdAccess) tls() bool { return a.caFile != "" || a.certFile != "" || a.keyFile != "" }

// check refuses, as a bad command line, settings that cannot work: a
// certificate without its key or the other way round, a password with no
// user, and any of the flags given for a catalog other than etcd, where
// they would be ignored. given names the flags on the command line; what
// the environment set is ignored for a catalog other than etcd, where it
// may well be meant for another command.
func (a etcdAccess) check(u catalogurl.URL, given map[string]bool) error {
	if u.Kind != catalogurl.Etcd {
		for _, f := range []string{"etcd-cacert", "etcd-cert", "etcd-key", "etcd-user"} {
			if given[f] {
				return usagef("--%s is for an etcd catalog, not %s", f, u)
			}
		}
		return nil
	}
	switch {
	case (a.certFile == "") != (a.keyFile == ""):
		return usagef("--etcd-cert and --etcd-key ($LOWWATER_ETCD_CERT, $LOWWATER_ETCD_KEY) go together")
	case a.password != "" && a.user == "":
		return usagef("$LOWWATER_ETCD_PASSWORD is set, but no user: give --etcd-user (or $LOWWATER_ETCD_USER)")
	}
	return nil
}

// apply sets cfg's TLS and credentials. A file that cannot be read or
// holds no certificate fails the command, naming it.
func (a etcdAccess) apply(cfg *clientv3.Config) error {
	if a.user != "" {
		cfg.Username, cfg.Password = a.user, a.password
	}
	tc, err := a.tlsConfig()
	cfg.TLS = tc
	return err
}

// tlsConfig is the TLS the flags ask for, nil for none.
func (a etcdAccess) tlsConfig() (*tls.Config, error) {
	if !a.tls() {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.caFile != "" {
		pem, err := os.ReadFile(a.caFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert: %s: %w", a.caFile, errNoCertificate)
		}
	}
	if a.certFile != "" {
		cert, err := tls.LoadX509KeyPair(a.certFile, a.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert, --etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// probeTime bounds what diagnose spends, past a command's --timeout.
const probeTime = time.Second

// diagnose says why the etcd at endpoint (host:port) may not answer,
// found by connecting to it as the client would, or "" if nothing shows:
// the client's own error after a timeout says only that the deadline
// passed, whether etcd is down, speaks TLS to a client that does not, or
// refuses its certificate.
func (a etcdAccess) diagnose(endpoint string) string {
	deadline := time.Now().Add(probeTime)
	conn, err := net.DialTimeout("tcp", endpoint, probeTime)
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
		if probe.Handshake() == nil {
			return fmt.Sprintf("%s speaks TLS: give --etcd-cacert (and --etcd-cert, --etcd-key if it asks clients for a certificate)", endpoint)
		}
		return ""
	}
	tc = tc.Clone()
	tc.ServerName = host
	tc.NextProtos = []string{"h2"}
	c := tls.Client(conn, tc)
	if err := c.Handshake(); err != nil {
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

var errNoCertificate = errors.New("no PEM certificate in it")
