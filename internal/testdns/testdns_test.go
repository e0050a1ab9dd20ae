package testdns

import (
	"context"
	"net"
	"testing"
	"time"
)

// The records a test sets are what a Go resolver pointed at the server
// gets, and they change when the test changes them.
func TestResolverSeesChangingRecords(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, s.Addr())
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Set("swarm.test", Target{"127.0.0.1", 7001}, Target{"127.0.0.1", 7002})
	_, srvs, err := r.LookupSRV(ctx, "", "", "swarm.test")
	if err != nil || len(srvs) != 2 {
		t.Fatalf("SRV: %v, %v", srvs, err)
	}
	if hosts, err := r.LookupHost(ctx, srvs[0].Target); err != nil || len(hosts) != 1 || hosts[0] != "127.0.0.1" {
		t.Fatalf("the SRV target %s resolves to %v, %v", srvs[0].Target, hosts, err)
	}
	s.Set("swarm.test", Target{"127.0.0.1", 7003})
	if _, srvs, err = r.LookupSRV(ctx, "", "", "swarm.test"); err != nil || len(srvs) != 1 || srvs[0].Port != 7003 {
		t.Fatalf("SRV after the change: %v, %v", srvs, err)
	}
	s.Set("swarm.test")
	if _, _, err = r.LookupSRV(ctx, "", "", "swarm.test"); err == nil {
		t.Fatal("a name without records resolved")
	}
}
