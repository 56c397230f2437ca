package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
)

// TLSFiles are the PEM files of a member that serves clients over TLS: the
// CA that signed its certificate, and a client certificate and key the CA
// signed too.
type TLSFiles struct {
	CA, Cert, Key string
}

// StartTLS starts a single-member etcd that serves clients over TLS only,
// with a certificate for 127.0.0.1 from a CA of its own, and that asks
// each client for a certificate from the same CA. It returns the client
// endpoints (https) and the files a client needs, in t.TempDir().
func StartTLS(t testing.TB) ([]string, TLSFiles) {
	t.Helper()
	dir := t.TempDir()
	files := TLSFiles{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}
	serverCert, serverKey := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	ca, caKey := newCertificate(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "etcdtest CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign,
	}, files.CA, "")
	newCertificate(t, ca, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "etcdtest server"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, serverCert, serverKey)
	newCertificate(t, ca, caKey, &x509.Certificate{
		Subject:  pkix.Name{CommonName: "etcdtest client"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, files.Cert, files.Key)

	s := startSolo(t, &transport.TLSInfo{CertFile: serverCert, KeyFile: serverKey, TrustedCAFile: files.CA,
		ClientCertAuth: true})
	return s.Endpoints(), files
}

// newCertificate makes a key and a certificate of tmpl, signed by parent
// (self-signed when nil), and writes them as PEM to certFile and, unless
// it is "", keyFile.
func newCertificate(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate,
	certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	if keyFile != "" {
		raw, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, keyFile, "EC PRIVATE KEY", raw)
	}
	return cert, key
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
