package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mcpswarm/mcpswarm/bench/internal/procnode"
)

// node is one `mcpswarm serve` process the run started.
type node = procnode.Node

// cluster is the three nodes and the files they share.
type cluster struct {
	nodes  []*node
	tokens []string // one bearer token per client, in client order
}

// startCluster writes a cluster key and a policy with one token per client
// into dir, and starts n nodes on fresh loopback ports, each joining the
// first. The per-source HTTP connection cap is lifted (0): every client of
// the soak is 127.0.0.1, as behind a proxy, and the docs say to raise it
// there.
// sessionReplicas is every node's --session-replicas, spelled out although
// 1 is the default: the soak measures a cluster whose every session has a
// standby on another node, each write answered after that standby's
// acknowledgement (durability replica, the default with a standby).
const sessionReplicas = 1

func startCluster(ctx context.Context, bin, dir, logDir string, n, clients int, profile bool) (*cluster, error) {
	key, err := exec.CommandContext(ctx, bin, "keygen").Output()
	if err != nil {
		return nil, fmt.Errorf("mcpswarm keygen: %w", err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		return nil, fmt.Errorf("writing the cluster key: %w", err)
	}
	c := &cluster{}
	var pol strings.Builder
	pol.WriteString("# Written by bench/soak: one principal per soak client.\nname: soak\ntokens:\n")
	for i := range clients {
		tok := fmt.Sprintf("soak-token-%04d", i)
		sum := sha256.Sum256([]byte(tok))
		fmt.Fprintf(&pol, "  - sha256: %q\n    subject: soak%04d\n", hex.EncodeToString(sum[:]), i)
		c.tokens = append(c.tokens, tok)
	}
	pol.WriteString("tools:\n  - allow: true\nreads:\n  - allow: true\n")
	polFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(polFile, []byte(pol.String()), 0o600); err != nil {
		return nil, fmt.Errorf("writing the policy: %w", err)
	}
	for i := range n {
		name := fmt.Sprintf("soak%d", i+1)
		join := ""
		if i > 0 {
			join = c.nodes[0].Gossip
		}
		args := []string{"--data-dir", filepath.Join(dir, name), "--cluster-key-file", keyFile, "--policy", polFile,
			"--http-conns-per-source", "0", "--log-format", "text", "--log-level", "warn",
			"--session-replicas", strconv.Itoa(sessionReplicas)}
		debug := ""
		if profile {
			if debug, err = procnode.FreeAddr(); err != nil {
				c.stop()
				return nil, err
			}
			args = append(args, "--debug-addr", debug)
		}
		nd, err := procnode.Start(ctx, bin, name, join, logDir, args...)
		if err != nil {
			c.stop()
			return nil, err
		}
		nd.Debug = debug
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

func (c *cluster) stop() {
	for i := len(c.nodes) - 1; i >= 0; i-- {
		c.nodes[i].Stop()
	}
}

// rss reads the process's resident set size from /proc: in all, and its
// anonymous (heap, stacks) and file-backed (code, the bbolt mmap) parts.
func rss(n *node) (total, anon, file int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.PID()))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("reading %s's RSS: %w", n.Name, err)
	}
	if total, err = statusKB(b, "VmRSS"); err != nil {
		return 0, 0, 0, err
	}
	if anon, err = statusKB(b, "RssAnon"); err != nil {
		return 0, 0, 0, err
	}
	if file, err = statusKB(b, "RssFile"); err != nil {
		return 0, 0, 0, err
	}
	return total, anon, file, nil
}

// goroutines reads go_goroutines and go_memstats_heap_inuse_bytes from the
// node's /metrics.
func goroutines(ctx context.Context, hc *http.Client, n *node) (gor, heap int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.BaseURL+"/metrics", nil)
	if err != nil {
		return 0, 0, fmt.Errorf("building the metrics request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s/metrics: %w", n.BaseURL, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(nil, resp.Body, 8<<20)); err != nil {
		return 0, 0, fmt.Errorf("reading %s/metrics: %w", n.BaseURL, err)
	}
	if gor, err = parseGauge(buf.Bytes(), "go_goroutines"); err != nil {
		return 0, 0, err
	}
	if heap, err = parseGauge(buf.Bytes(), "go_memstats_heap_inuse_bytes"); err != nil {
		return 0, 0, err
	}
	return gor, heap, nil
}

// parseGauge returns the value of an unlabelled metric in the Prometheus
// text format.
func parseGauge(b []byte, name string) (int64, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", name, err)
		}
		return int64(v), nil
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// statusKB returns a "key: N kB" field of /proc/PID/status.
func statusKB(b []byte, key string) (int64, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, key+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: odd %s line %q", key, line)
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("/proc status: no %s line", key)
}
