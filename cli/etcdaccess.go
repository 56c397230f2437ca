package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

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
// certificate without its key or the other way round, and any of them for
// a catalog other than etcd, which would otherwise be ignored.
func (a etcdAccess) check(catalog string) error {
	if (a.certFile == "") != (a.keyFile == "") {
		return usagef("--etcd-cert and --etcd-key go together")
	}
	if !a.tls() && a.user == "" {
		return nil
	}
	if u, err := catalogurl.Parse(catalog); err == nil && u.Kind != catalogurl.Etcd {
		return usagef("--etcd-cacert, --etcd-cert, --etcd-key and --etcd-user are for an etcd catalog, not %s", u)
	}
	return nil
}

// apply sets cfg's TLS and credentials. A file that cannot be read or
// holds no certificate fails the command, naming it.
func (a etcdAccess) apply(cfg *clientv3.Config) error {
	if a.user != "" {
		cfg.Username, cfg.Password = a.user, a.password
	}
	if !a.tls() {
		return nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if a.caFile != "" {
		pem, err := os.ReadFile(a.caFile)
		if err != nil {
			return fmt.Errorf("--etcd-cacert: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--etcd-cacert: %s: %w", a.caFile, errNoCertificate)
		}
	}
	if a.certFile != "" {
		cert, err := tls.LoadX509KeyPair(a.certFile, a.keyFile)
		if err != nil {
			return fmt.Errorf("--etcd-cert, --etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	cfg.TLS = tc
	return nil
}

var errNoCertificate = errors.New("no PEM certificate in it")
