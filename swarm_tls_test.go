package mcpswarm_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/mcpswarm/mcpswarm"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// writeTLS makes a CA and one certificate for 127.0.0.1 (every test node
// shares it) and writes them as PEM files into dir.
func writeTLS(t *testing.T, dir string) mcpswarm.TLSFiles {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcpswarm test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	nodeKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	nodeTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	nodeDER, err := x509.CreateCertificate(rand.Reader, nodeTmpl, ca, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(nodeKey)
	files := mcpswarm.TLSFiles{Cert: filepath.Join(dir, "node.pem"), Key: filepath.Join(dir, "node.key"), CA: filepath.Join(dir, "ca.pem")}
	for path, block := range map[string]*pem.Block{
		files.Cert: {Type: "CERTIFICATE", Bytes: nodeDER},
		files.Key:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
		files.CA:   {Type: "CERTIFICATE", Bytes: caDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// With --tls-*, peers replicate and forward over mutual TLS, and the admin
// API answers a client that verifies the node's certificate.
func TestTLSClusterReplicatesAndForwards(t *testing.T) {
	e := newSwarmEnv(t)
	// Sockets: the certificates name the loopback address, and the test
	// is of TLS on the listener the operator runs.
	e.sockets = true
	e.tls = writeTLS(t, t.TempDir())
	nodes := e.cluster(2)
	alice1 := connect(t, nodes[0], connOpts{token: aliceToken})
	if res := alice1.call("swarm_start", map[string]any{"app": "counter", "id": "tl"}); res.IsError {
		t.Fatal(textOf(res))
	}
	alice2 := connect(t, nodes[1], connOpts{token: aliceToken})
	eventually(t, 5*time.Second, "node2 lists tl over TLS replication", func() bool { return alice2.tools()["tl.inc.click"] })
	if res := alice2.call("tl.inc.click", nil); res.IsError {
		t.Fatalf("forwarded call over TLS: %s", textOf(res))
	}

	tc, err := mcpswarm.ClientTLS(e.tls.CA, e.tls.Cert, e.tls.Key)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := mcpswarm.LoadClusterKey(e.keyFile)
	cc, err := grpc.NewClient(nodes[0].GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(tc)),
		grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key), Secure: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if m, err := adminv1.NewAdminServiceClient(cc).ListMembers(ctx, &adminv1.ListMembersRequest{}); err != nil || len(m.GetMembers()) != 2 {
		t.Fatalf("admin over TLS: %v %v", m, err)
	}
	// A client that verifies the node but presents no certificate ends in
	// the handshake, even holding the admin token (issue #13: the server
	// used to accept it and buffer its messages).
	noCert := &tls.Config{RootCAs: tc.RootCAs, MinVersion: tls.VersionTLS13}
	anon := adminv1.NewAdminServiceClient(dial(t, nodes[0], grpc.WithTransportCredentials(credentials.NewTLS(noCert)),
		grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key), Secure: true})))
	if _, err := anon.ListMembers(ctx, &adminv1.ListMembersRequest{}); err == nil {
		t.Fatal("a TLS client without a certificate reached the admin API")
	}
	if _, err := mcpswarm.ClientTLS(e.tls.CA, "", ""); err == nil {
		t.Error("ClientTLS without a client certificate returned a config a TLS node would refuse")
	}
	// A plaintext client cannot even complete a call.
	plain := adminv1.NewAdminServiceClient(dial(t, nodes[0], grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)})))
	if _, err := plain.ListMembers(ctx, &adminv1.ListMembersRequest{}); err == nil {
		t.Fatal("a plaintext client reached a TLS listener")
	}
}
