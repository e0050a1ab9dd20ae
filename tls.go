package mcpswarm

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles names the PEM files that put the gRPC listener (peer and admin
// APIs) and the node's peer connections under mutual TLS. All three or none.
type TLSFiles struct {
	// Cert and Key are this node's certificate and private key. The
	// certificate must name the addresses peers dial (IP SANs in a pod).
	Cert, Key string
	// CA verifies the certificates peers present, as server and as client.
	CA string
}

// Enabled reports whether TLS is configured.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// configs loads the files into the server and client TLS configurations.
// Every client must present a certificate signed by the CA (peers and the
// admin CLI alike): a connection without one ends in the handshake, before
// gRPC reads a byte, and the admin token is checked on top.
func (f TLSFiles) configs() (server, client *tls.Config, err error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, nil, &FieldError{Flag: "tls-cert", Err: errors.New("TLS needs --tls-cert, --tls-key and --tls-ca together")}
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, nil, &FieldError{Flag: "tls-cert", Err: fmt.Errorf("loading key pair: %w", err)}
	}
	pool, err := loadCA(f.CA)
	if err != nil {
		return nil, nil, &FieldError{Flag: "tls-ca", Err: err}
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		MinVersion:   tls.VersionTLS13,
	}
	return server, client, nil
}

// loadCA reads a PEM bundle of CA certificates.
func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// ClientTLS returns the TLS configuration an admin client uses to reach a
// node whose gRPC listener runs TLS: it trusts the CA at caPath and
// presents the certificate at certPath (signed by that CA), which the node
// requires of every client.
func ClientTLS(caPath, certPath, keyPath string) (*tls.Config, error) {
	pool, err := loadCA(caPath)
	if err != nil {
		return nil, err
	}
	if certPath == "" || keyPath == "" {
		return nil, errors.New("a node running TLS requires a client certificate: give --tls-cert and --tls-key too")
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("loading client key pair: %w", err)
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, nil
}
