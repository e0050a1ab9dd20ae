package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
)

// token is the one principal's bearer token in the generated policy.
const token = "idle-bench-token"

// node is one `mcpswarm serve` process the run started.
type node struct {
	name    string
	baseURL string // http://127.0.0.1:PORT
	gossip  string
	debug   string // --debug-addr, or "" when the node is not profiled
	cmd     *exec.Cmd
	log     *syncBuffer
	exited  chan struct{}
	waitErr error
}

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
			join = c.nodes[0].gossip
		}
		if i == 0 && k.profile != "" {
			if debug, err = freeAddr(); err != nil {
				c.stop()
				return nil, err
			}
			args = append(args, "--debug-addr", debug)
		}
		nd, err := startNode(ctx, k.bin, name, join, k.logDir, args...)
		if err != nil {
			c.stop()
			return nil, err
		}
		nd.debug = debug
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

// stop stops the nodes in parallel, last started first.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for i := len(c.nodes) - 1; i >= 0; i-- {
		wg.Go(c.nodes[i].stop)
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
			alive, err := n.aliveMembers(ctx, hc)
			if err == nil && alive >= float64(len(c.nodes)-1) {
				break
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return fmt.Errorf("waiting for %s to list %d members alive (last: %v, %v): %w", n.name, len(c.nodes)-1, alive, err, ctx.Err())
			}
		}
	}
	return nil
}

// aliveMembers reads mcpswarm_cluster_members{state="alive"} from /metrics.
func (n *node) aliveMembers(ctx context.Context, hc *http.Client) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.baseURL+"/metrics", nil)
	if err != nil {
		return 0, fmt.Errorf("building the metrics request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading %s/metrics: %w", n.baseURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fmt.Errorf("reading %s/metrics: %w", n.baseURL, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, `mcpswarm_cluster_members{state="alive"} `); ok {
			return strconv.ParseFloat(strings.TrimSpace(rest), 64)
		}
	}
	return 0, fmt.Errorf("%s/metrics has no alive member count", n.baseURL)
}

// startNode starts one node on fresh loopback ports, in its own process
// group, and waits for /readyz.
func startNode(ctx context.Context, bin, name, join, logDir string, extra ...string) (*node, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	args := []string{"serve", "--name", name, "--http", addrs[0], "--grpc", addrs[1], "--gossip", addrs[2]}
	if join != "" {
		args = append(args, "--join", join)
	}
	args = append(args, extra...)
	nd := &node{name: name, baseURL: "http://" + addrs[0], gossip: addrs[2], log: &syncBuffer{}, exited: make(chan struct{})}
	nd.cmd = exec.Command(bin, args...)
	var out io.Writer = nd.log
	if logDir != "" {
		f, err := os.Create(filepath.Join(logDir, name+".log"))
		if err != nil {
			return nil, fmt.Errorf("creating %s's log file: %w", name, err)
		}
		defer f.Close() // the child holds its own descriptor
		out = f
	}
	nd.cmd.Stdout, nd.cmd.Stderr = out, out
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := nd.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { nd.waitErr = nd.cmd.Wait(); close(nd.exited) }()
	err := procwait.AwaitOK(ctx, nd.baseURL+"/readyz", 60*time.Second, 20*time.Millisecond, nd.exited, func() error { return nd.waitErr })
	if err != nil {
		nd.stop()
		return nil, fmt.Errorf("%s never became ready: %w\nlog tail:\n%s", name, err, procwait.Tail(nd.log.String(), 20))
	}
	return nd, nil
}

func (n *node) pid() int { return n.cmd.Process.Pid }

// stop sends SIGTERM to the process group, and SIGKILL after 15 s.
func (n *node) stop() {
	select {
	case <-n.exited:
		return
	default:
	}
	_ = syscall.Kill(-n.pid(), syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-n.pid(), syscall.SIGKILL)
		<-n.exited
	}
}

// freeAddr asks the kernel for an unused loopback TCP port (the usual small
// race before the node binds it).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// syncBuffer keeps the last ~256 KiB of a node's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 256<<10 {
		b.buf.Next(b.buf.Len() - 128<<10)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
