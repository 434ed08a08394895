// Package tlscert serves a listener's TLS certificate from PEM files and
// swaps it while the listener runs. Certificates are renewed on a
// schedule of their own (ACME, an internal CA): a daemon that must be
// restarted to take a new one drops its clients' long polls for nothing.
// Reading a pair and installing it are separate steps, so a reload can
// check every part of a new config before it changes anything.
//
// A listener wrapped with Listener speaks only TLS. A plain HTTP request
// reaching it is answered by net/http with "400 Bad Request: Client sent
// an HTTP request to an HTTPS server" and closed: nothing is served in
// the clear, not even an error body with detail.
//
// Any listener of the daemon takes the same files (config.TLS) and the
// same Cert: the TCP API listener today, any later HTTP listener the
// same way.
package tlscert

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// MinVersion is the oldest protocol a listener accepts: TLS 1.2, which
// every client library of the last decade speaks.
const MinVersion = tls.VersionTLS12

// Cert is a certificate a listener presents, replaced atomically.
type Cert struct {
	cur atomic.Pointer[tls.Certificate]
}

// Read loads and checks a certificate (chain) and its private key from
// PEM files: the key must match the certificate, and the certificate
// must be valid now.
func Read(certFile, keyFile string) (*tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading %s and %s: %w", certFile, keyFile, err)
	}
	leaf := pair.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%s: %w", certFile, err)
		}
		pair.Leaf = leaf
	}
	now := time.Now()
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("%s expired at %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("%s is not valid before %s", certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return &pair, nil
}

// Load reads a pair and returns a Cert presenting it.
func Load(certFile, keyFile string) (*Cert, error) {
	pair, err := Read(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c := &Cert{}
	c.Set(pair)
	return c, nil
}

// Set installs pair: handshakes from now on present it; connections
// already open keep theirs.
func (c *Cert) Set(pair *tls.Certificate) { c.cur.Store(pair) }

// Leaf is the certificate presented now.
func (c *Cert) Leaf() *x509.Certificate { return c.cur.Load().Leaf }

// GetCertificate is tls.Config.GetCertificate.
func (c *Cert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	pair := c.cur.Load()
	if pair == nil {
		return nil, errors.New("tlscert: no certificate installed")
	}
	return pair, nil
}

// ServerConfig is the TLS config of a listener presenting c. It offers
// HTTP/1.1 only: the API's long polls and streams need nothing more.
func (c *Cert) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: MinVersion, GetCertificate: c.GetCertificate, NextProtos: []string{"http/1.1"}}
}

// Listener wraps ln so that every connection it accepts is TLS with c.
func (c *Cert) Listener(ln net.Listener) net.Listener {
	return tls.NewListener(ln, c.ServerConfig())
}

// ClientConfig is the TLS config of a client that trusts the CA
// certificates in the PEM file caFile ("" : the system's roots).
func ClientConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: MinVersion}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
