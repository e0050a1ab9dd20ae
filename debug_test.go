package mcpswarm_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
)

// --debug-addr serves heap profiles on its own loopback listener, is off by
// default, and refuses a network address (the profiles show session data
// and the endpoint has no authentication).
func TestDebugAddrServesProfilesOnLoopbackOnly(t *testing.T) {
	dir := t.TempDir()
	policy := testPolicy(t, dir)
	cfg := mcpswarm.DefaultConfig()
	cfg.Name = "dbg"
	cfg.HTTPAddr, cfg.GRPCAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.PolicyFile = policy
	cfg.ShutdownTimeout = 5 * time.Second

	for _, addr := range []string{"0.0.0.0:6060", "192.0.2.1:6060", ":6060"} {
		bad := cfg
		bad.DebugAddr = addr
		_, err := mcpswarm.NewNode(bad)
		var fe *mcpswarm.FieldError
		if !errors.As(err, &fe) || fe.Flag != "debug-addr" || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("--debug-addr %s: got %v, want a --debug-addr error naming loopback", addr, err)
		}
	}

	off, err := mcpswarm.NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a := off.DebugAddr(); a != "" {
		t.Errorf("without --debug-addr the node listens on %s", a)
	}
	if err := off.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	cfg.DebugAddr = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data2")
	n, err := mcpswarm.NewNode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Stop(context.Background()) })
	resp, err := http.Get("http://" + n.DebugAddr() + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /debug/pprof/heap: %s", resp.Status)
	}
	// The MCP listener does not serve the profiles.
	r2, err := http.Get("http://" + n.HTTPAddr() + "/debug/pprof/heap")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode == http.StatusOK {
		t.Error("the MCP listener serves /debug/pprof/heap")
	}
}
