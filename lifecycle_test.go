package mcpswarm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpswarm/mcpswarm"
)

// A start that fails late (the boot gate refuses a network node without a
// policy, after the MCP front and the swarm view were built) stops every
// component it started: nothing it started keeps running.
func TestFailedStartLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	key, err := mcpswarm.GenerateClusterKey()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := mcpswarm.DefaultConfig()
	cfg.Name = "nopolicy"
	cfg.HTTPAddr, cfg.GRPCAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.ClusterKeyFile = keyFile
	cfg.ShutdownTimeout = 5 * time.Second
	n, err := mcpswarm.NewNode(cfg)
	if err != nil {
		t.Fatalf("new node: %v", err)
	}
	err = n.Start(context.Background())
	if err == nil {
		_ = n.Stop(context.Background())
		t.Fatal("a network node without a policy started")
	}
	if !strings.Contains(err.Error(), "starting mcp") {
		t.Fatalf("start failed in another step than the MCP front's boot gate: %v", err)
	}
}
