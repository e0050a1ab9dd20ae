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

// node is one `mcpswarm serve` process the soak started.
type node struct {
	name    string
	baseURL string // http://127.0.0.1:PORT
	gossip  string
	debug   string // the --debug-addr (pprof) address, or "" when not profiled
	cmd     *exec.Cmd
	log     *syncBuffer
	exited  chan struct{}
	waitErr error
}

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
			join = c.nodes[0].gossip
		}
		args := []string{"--data-dir", filepath.Join(dir, name), "--cluster-key-file", keyFile, "--policy", polFile,
			"--http-conns-per-source", "0", "--log-format", "text", "--log-level", "warn"}
		debug := ""
		if profile {
			if debug, err = freeAddr(); err != nil {
				c.stop()
				return nil, err
			}
			args = append(args, "--debug-addr", debug)
		}
		nd, err := startNode(ctx, bin, name, join, logDir, args...)
		if err != nil {
			c.stop()
			return nil, err
		}
		nd.debug = debug
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

func (c *cluster) stop() {
	for i := len(c.nodes) - 1; i >= 0; i-- {
		c.nodes[i].stop()
	}
}

// startNode starts one node on fresh loopback ports, in its own process
// group, and waits for /readyz. With a logDir its whole output goes to
// logDir/NAME.log instead of memory (e.g. for a goroutine dump after kill -QUIT).
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
	if err := nd.awaitHealthy(ctx, 60*time.Second); err != nil {
		nd.stop()
		return nil, fmt.Errorf("%s never became healthy: %w\nlog tail:\n%s", name, err, procwait.Tail(nd.log.String(), 20))
	}
	return nd, nil
}

func (n *node) pid() int { return n.cmd.Process.Pid }

func (n *node) awaitHealthy(ctx context.Context, d time.Duration) error {
	return procwait.AwaitOK(ctx, n.baseURL+"/readyz", d, 20*time.Millisecond, n.exited, func() error { return n.waitErr })
}

// alive reports whether the process is still running.
func (n *node) alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, and SIGKILL after 15 s.
func (n *node) stop() {
	if !n.alive() {
		return
	}
	_ = syscall.Kill(-n.pid(), syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-n.pid(), syscall.SIGKILL)
		<-n.exited
	}
}

// rss reads the process's resident set size from /proc: in all, and its
// anonymous (heap, stacks) and file-backed (code, the bbolt mmap) parts.
func (n *node) rss() (total, anon, file int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.pid()))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("reading %s's RSS: %w", n.name, err)
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
func (n *node) goroutines(ctx context.Context, hc *http.Client) (gor, heap int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.baseURL+"/metrics", nil)
	if err != nil {
		return 0, 0, fmt.Errorf("building the metrics request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, fmt.Errorf("reading %s/metrics: %w", n.baseURL, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(nil, resp.Body, 8<<20)); err != nil {
		return 0, 0, fmt.Errorf("reading %s/metrics: %w", n.baseURL, err)
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

// syncBuffer keeps the last ~1 MiB of a node's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		b.buf.Next(b.buf.Len() - 512<<10)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
