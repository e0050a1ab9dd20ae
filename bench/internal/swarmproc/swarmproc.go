// Package swarmproc starts a swarm of real `mcpswarm serve` processes for
// the bench programs (idle, realscale): a fresh cluster key, a policy with
// one principal, N nodes on loopback ports each joining the first, and
// reads what their /metrics say.
package swarmproc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/procnode"
	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
)

// Spec says what swarm to start.
type Spec struct {
	Bin    string // the mcpswarm binary
	Dir    string // for the key, the policy and the nodes' data directories
	Prefix string // node names are Prefix01, Prefix02, …
	N      int
	// Token is the one principal's bearer token; its subject is Prefix.
	Token string
	// LogDir, when set, receives each node's output as NAME.log instead
	// of memory.
	LogDir string
	// GossipHost is the address the nodes' gossip binds; "" is 127.0.0.1
	// (the loopback timers), an address of this machine off loopback gets
	// the LAN timers (see procnode.StartGossipOn).
	GossipHost string
	// Ask are tool patterns (policy match.tools) whose calls ask the user
	// first.
	Ask []string
	// Limits are policy limits (limits.NAME: value) besides
	// sessions_per_principal, which is 0 (none).
	Limits map[string]int
	// Args are extra serve flags for every node.
	Args []string
	// ProfileFirst makes node 1 serve --debug-addr (pprof); DebugAll,
	// every node.
	ProfileFirst, DebugAll bool
}

// Cluster is the nodes a Spec started, node 1 first (the others join it).
type Cluster struct {
	Nodes []*procnode.Node
	// Took is each node's time from its exec until it was ready.
	Took []time.Duration

	spec             Spec
	keyFile, polFile string
}

// Start writes a cluster key and a one-principal policy into s.Dir and
// starts s.N nodes, one at a time, each ready before the next starts. On
// an error it stops those it started.
func Start(ctx context.Context, s Spec) (*Cluster, error) {
	key, err := exec.CommandContext(ctx, s.Bin, "keygen").Output()
	if err != nil {
		return nil, fmt.Errorf("mcpswarm keygen: %w", err)
	}
	c := &Cluster{spec: s, keyFile: filepath.Join(s.Dir, "cluster.key"), polFile: filepath.Join(s.Dir, "policy.yaml")}
	if s.GossipHost == "" {
		c.spec.GossipHost = "127.0.0.1"
	}
	if err := os.WriteFile(c.keyFile, key, 0o600); err != nil {
		return nil, fmt.Errorf("writing the cluster key: %w", err)
	}
	sum := sha256.Sum256([]byte(s.Token))
	var ask strings.Builder
	for _, a := range s.Ask {
		fmt.Fprintf(&ask, "  - match: {tools: [%q]}\n    ask: \"{principal} wants to run {tool}\"\n", a)
	}
	limits := "  sessions_per_principal: 0\n"
	for _, name := range slices.Sorted(maps.Keys(s.Limits)) {
		limits += fmt.Sprintf("  %s: %d\n", name, s.Limits[name])
	}
	pol := fmt.Sprintf("# Written by a bench program: one principal.\nname: %s\ntokens:\n  - sha256: %q\n    subject: %s\n"+
		"tools:\n%s  - allow: true\nreads:\n  - allow: true\nlimits:\n%s", s.Prefix, hex.EncodeToString(sum[:]), s.Prefix, ask.String(), limits)
	if err := os.WriteFile(c.polFile, []byte(pol), 0o600); err != nil {
		return nil, fmt.Errorf("writing the policy: %w", err)
	}
	for range s.N {
		if _, err := c.Add(ctx); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// KeyFile is the cluster key's file.
func (c *Cluster) KeyFile() string { return c.keyFile }

// Add starts one more node, joining node 1 (unless it is node 1), and
// waits until it is ready (/readyz: joined and caught up).
func (c *Cluster) Add(ctx context.Context) (*procnode.Node, error) {
	s := c.spec
	i := len(c.Nodes)
	name := fmt.Sprintf("%s%02d", s.Prefix, i+1)
	args := append([]string{"--data-dir", filepath.Join(s.Dir, name), "--cluster-key-file", c.keyFile, "--policy", c.polFile,
		"--log-format", "text", "--log-level", "warn"}, s.Args...)
	join, debug := "", ""
	if i > 0 {
		join = c.Nodes[0].Gossip
	}
	if (i == 0 && s.ProfileFirst) || s.DebugAll {
		var err error
		if debug, err = procnode.FreeAddr(); err != nil {
			return nil, err
		}
		args = append(args, "--debug-addr", debug)
	}
	began := time.Now()
	nd, err := procnode.StartGossipOn(ctx, s.GossipHost, s.Bin, name, join, s.LogDir, args...)
	if err != nil {
		return nil, err
	}
	nd.Debug = debug
	c.Nodes = append(c.Nodes, nd)
	c.Took = append(c.Took, time.Since(began))
	return nd, nil
}

// Stop stops the nodes in parallel, last started first; nodes already
// gone are skipped.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for i := len(c.Nodes) - 1; i >= 0; i-- {
		wg.Go(c.Nodes[i].Stop)
	}
	wg.Wait()
}

// Live is the nodes still running.
func (c *Cluster) Live() []*procnode.Node {
	var out []*procnode.Node
	for _, n := range c.Nodes {
		if n.Alive() {
			out = append(out, n)
		}
	}
	return out
}

// AwaitMembers waits up to d until every live node's metrics list every
// other live node alive.
func (c *Cluster) AwaitMembers(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: 5 * time.Second}
	live := c.Live()
	for _, n := range live {
		for {
			m, err := Metrics(ctx, hc, n)
			alive := m[`mcpswarm_cluster_members{state="alive"}`]
			if err == nil && alive >= float64(len(live)-1) {
				break
			}
			if err := procwait.Sleep(ctx, 100*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for %s to list %d members alive (last: %v): %w", n.Name, len(live)-1, alive, err)
			}
		}
	}
	return nil
}

// Metrics reads a node's /metrics: every sample by its name and labels as
// written (`name{label="value"}`), histograms' buckets included.
func Metrics(ctx context.Context, hc *http.Client, n *procnode.Node) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.BaseURL+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("building the metrics request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading %s/metrics: %w", n.BaseURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s/metrics: %w", n.BaseURL, err)
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// OffLoopback is an IPv4 address of this machine off loopback: gossip
// bound there (Spec.GossipHost) runs the LAN timers while its packets never
// leave the machine.
func OffLoopback() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("listing this machine's addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && !ip.IP.IsLoopback() && ip.IP.To4() != nil {
			return ip.IP.String(), nil
		}
	}
	return "", fmt.Errorf("this machine has no IPv4 address off loopback for the LAN timers")
}
