package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/procnode"
)

// token is the one principal's bearer token in the generated policy.
const token = "idle-bench-token"

// node is one `mcpswarm serve` process the run started.
type node = procnode.Node

// cluster is the nodes the run started, node 1 first (the others join it).
type cluster struct{ nodes []*node }

// startCluster writes a cluster key and a one-principal policy into dir and
// starts k.n nodes on fresh loopback ports, one at a time.
func startCluster(ctx context.Context, k knobs, dir string) (*cluster, error) {
	key, err := exec.CommandContext(ctx, k.bin, "keygen").Output()
	if err != nil {
		return nil, fmt.Errorf("mcpswarm keygen: %w", err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return nil, fmt.Errorf("writing the cluster key: %w", err)
	}
	sum := sha256.Sum256([]byte(token))
	pol := fmt.Sprintf("# Written by bench/idle: one principal.\nname: idle\ntokens:\n  - sha256: %q\n    subject: idle\n"+
		"tools:\n  - allow: true\nreads:\n  - allow: true\nlimits:\n  sessions_per_principal: 0\n", hex.EncodeToString(sum[:]))
	polFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(polFile, []byte(pol), 0o600); err != nil {
		return nil, fmt.Errorf("writing the policy: %w", err)
	}
	c := &cluster{}
	for i := range k.n {
		name := fmt.Sprintf("idle%02d", i+1)
		args := []string{"--data-dir", filepath.Join(dir, name), "--cluster-key-file", keyFile, "--policy", polFile,
			"--log-format", "text", "--log-level", "warn"}
		join, debug := "", ""
		if i > 0 {
			join = c.nodes[0].Gossip
		}
		if i == 0 && k.profile != "" {
			if debug, err = procnode.FreeAddr(); err != nil {
				c.stop()
				return nil, err
			}
			args = append(args, "--debug-addr", debug)
		}
		nd, err := procnode.Start(ctx, k.bin, name, join, k.logDir, args...)
		if err != nil {
			c.stop()
			return nil, err
		}
		nd.Debug = debug
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

// stop stops the nodes in parallel, last started first.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for i := len(c.nodes) - 1; i >= 0; i-- {
		wg.Go(c.nodes[i].Stop)
	}
	wg.Wait()
}

// awaitMembers waits until every node's metrics list every other node alive.
func (c *cluster) awaitMembers(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, n := range c.nodes {
		for {
			alive, err := aliveMembers(ctx, hc, n)
			if err == nil && alive >= float64(len(c.nodes)-1) {
				break
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for %s to list %d members alive (last: %v, %v): %w", n.Name, len(c.nodes)-1, alive, err, ctx.Err())
			}
		}
	}
	return nil
}

// aliveMembers reads mcpswarm_cluster_members{state="alive"} from /metrics.
func aliveMembers(ctx context.Context, hc *http.Client, n *node) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.BaseURL+"/metrics", nil)
	if err != nil {
		return 0, fmt.Errorf("building the metrics request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading %s/metrics: %w", n.BaseURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fmt.Errorf("reading %s/metrics: %w", n.BaseURL, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, `mcpswarm_cluster_members{state="alive"} `); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("%s/metrics has no alive member count", n.BaseURL)
}
