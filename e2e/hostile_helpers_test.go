package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nodeAddrs are the ports of a node started by startNodeAt.
type nodeAddrs struct {
	HTTP, GRPC, Gossip string
}

func newNodeAddrs(t *testing.T) nodeAddrs {
	t.Helper()
	return nodeAddrs{
		HTTP:   fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
		GRPC:   fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
		Gossip: fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
	}
}

// startNodeAt starts `bin serve --dev` on the given addresses, named name,
// under a file-descriptor limit when nofile > 0 (through sh's ulimit, which
// exec keeps), and waits until it is healthy. Cleanup is startNode's.
func startNodeAt(t *testing.T, bin, name string, a nodeAddrs, nofile int, extra ...string) *runningNode {
	t.Helper()
	return startNodeWith(t, bin, name, a, nofile, append([]string{"--dev"}, extra...)...)
}

// startPolicyNode starts a node without --dev, under an allow-all policy
// with no tokens: --dev exempts loopback clients from the per-source
// bounds, which the tests of those bounds need applied.
func startPolicyNode(t *testing.T, bin, name string, extra ...string) *runningNode {
	t.Helper()
	policy := filepath.Join(t.TempDir(), "open.yaml")
	if err := os.WriteFile(policy, []byte("name: open\ntools:\n  - allow: true\nreads:\n  - allow: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startNodeWith(t, bin, name, newNodeAddrs(t), 0, append([]string{"--policy", policy}, extra...)...)
}

func startNodeWith(t *testing.T, bin, name string, a nodeAddrs, nofile int, extra ...string) *runningNode {
	t.Helper()
	args := append([]string{"serve", "--name", name,
		"--http", a.HTTP, "--grpc", a.GRPC, "--gossip", a.Gossip,
		"--data-dir", t.TempDir(), "--log-format", "text",
	}, extra...)
	n := &runningNode{BaseURL: "http://" + a.HTTP, Log: &syncBuffer{}, exited: make(chan struct{})}
	if nofile > 0 {
		// "$0" is bin: exec replaces the shell, so the pid we signal is the node's.
		n.cmd = exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile), bin}, args...)...)
	} else {
		n.cmd = exec.Command(bin, args...)
	}
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

// closedWithin reports whether the server closes c within d (a read
// returning EOF or a reset), discarding whatever it sends first.
func closedWithin(c net.Conn, d time.Duration) (bool, error) {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, nil
	}
	return true, err
}

// metricValue sums the samples of a metric family on the node's /metrics
// whose line starts with prefix (a name, optionally with labels).
func metricValue(t *testing.T, n *runningNode, prefix string) float64 {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(n.BaseURL + "/metrics")
	if err != nil {
		t.Fatalf("scraping /metrics: %v", err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
