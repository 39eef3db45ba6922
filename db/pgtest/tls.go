package pgtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSServer is a throwaway cluster that listens on 127.0.0.1 with TLS
// on, its certificate signed by a CA of its own (CA, a PEM file): what a
// team's server looks like from a machine, where the Unix socket of
// Database is not.
type TLSServer struct {
	*Server
	Port int
	CA   string
}

// StartTLS starts a TLS cluster for one test; the test's cleanup stops it.
func StartTLS(t testing.TB) *TLSServer {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatalf("PostgreSQL: %v (install Debian's postgresql package: apt-get install -y postgresql)", err)
	}
	t.Cleanup(s.stop)
	if err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop"); err != nil {
		t.Fatalf("PostgreSQL: stop: %v", err)
	}
	ca, err := writeCerts(s)
	if err != nil {
		t.Fatalf("PostgreSQL: certificates: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ts := &TLSServer{Server: s, Port: port, CA: ca}
	if err := ts.startTCP(true); err != nil {
		t.Fatalf("PostgreSQL: start with TLS: %v", err)
	}
	return ts
}

func (s *TLSServer) startTCP(tls bool) error {
	opts := fmt.Sprintf("-k %s -c listen_addresses=127.0.0.1 -c port=%d -c fsync=off -c full_page_writes=off -c synchronous_commit=off", s.dir, s.Port)
	if tls {
		opts += fmt.Sprintf(" -c ssl=on -c ssl_cert_file=%s -c ssl_key_file=%s", filepath.Join(s.dir, "server.crt"), filepath.Join(s.dir, "server.key"))
	}
	return s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-w", "-o", opts, "start")
}

// RestartWithoutTLS restarts the cluster on the same port with TLS off:
// a server a DSN that requires TLS must refuse.
func (s *TLSServer) RestartWithoutTLS(t testing.TB) {
	t.Helper()
	if err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop"); err != nil {
		t.Fatalf("PostgreSQL: stop: %v", err)
	}
	if err := s.startTCP(false); err != nil {
		t.Fatalf("PostgreSQL: start without TLS: %v", err)
	}
}

// DSN names a database of the TLS cluster over its Unix socket (on the
// cluster's port).
func (s *TLSServer) DSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", s.dir, s.Port, db)
}

// TCPDSN names a database of the TLS cluster over TCP, with sslmode and
// any further keywords.
func (s *TLSServer) TCPDSN(db, sslmode, more string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=%s %s", s.Port, db, sslmode, more)
}

// OtherCA writes a CA the cluster's certificate is not signed by, for a
// test of a client that must refuse it.
func OtherCA(t testing.TB) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, caTemplate(), caTemplate(), &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func caTemplate() *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bindery test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
}

// writeCerts makes a CA and a certificate for 127.0.0.1 signed by it, in
// the cluster's folder, the key readable by the server's user only (the
// server refuses a key others can read).
func writeCerts(s *Server) (string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	ca := caTemplate()
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644},
		{"server.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644},
		{"server.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600},
	}
	for _, f := range files {
		p := filepath.Join(s.dir, f.name)
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return "", err
		}
		if s.uid >= 0 {
			if err := os.Chown(p, s.uid, s.gid); err != nil {
				return "", err
			}
		}
	}
	return filepath.Join(s.dir, "ca.pem"), nil
}
