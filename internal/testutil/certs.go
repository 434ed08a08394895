package testutil

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
)

// Cert is a certificate made for a test: a CA and a server certificate it
// signed for 127.0.0.1 and localhost, as PEM files in a temporary
// directory.
type Cert struct {
	CAFile, CertFile, KeyFile string
	// Leaf is the server certificate.
	Leaf *x509.Certificate
}

// NewCert makes a CA and a server certificate (ECDSA P-256) named cn,
// valid from an hour ago for a day, in dir.
func NewCert(t testing.TB, dir, cn string) Cert {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := func() *big.Int {
		n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// issue signs tmpl with signer, as parent, and parses the result back.
	issue := func(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, der
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: cn + " test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	ca, caDER := issue(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	srvKey := key()
	srvTmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	leaf, srvDER := issue(srvTmpl, ca, &srvKey.PublicKey, caKey)
	keyDER, err := x509.MarshalPKCS8PrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	c := Cert{CAFile: filepath.Join(dir, cn+"-ca.pem"), CertFile: filepath.Join(dir, cn+".pem"), KeyFile: filepath.Join(dir, cn+"-key.pem"), Leaf: leaf}
	write := func(path, typ string, der []byte, mode os.FileMode) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(c.CAFile, "CERTIFICATE", caDER, 0o644)
	write(c.CertFile, "CERTIFICATE", srvDER, 0o644)
	write(c.KeyFile, "PRIVATE KEY", keyDER, 0o600)
	return c
}
