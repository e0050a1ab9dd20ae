package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// aliceToken is alice's bearer token in deploy/local-policy.yaml. A token
// principal (rather than the connection) lets a new connection after a
// restart reach the sessions the old one started.
const aliceToken = "alice-local-token"

// killRounds is how many times each mode's owner is killed; every round
// drives one session directly and one through another node.
const killRounds = 20

// The acceptance test: three real nodes, two counter sessions on
// node1, one incremented through node1 and one through node3 (each call
// forwarded to node1), one call at a time; node1 is killed with SIGKILL at
// a random moment and restarted on the same data dir. After each restart
// both counts hold every increment that was acknowledged (and at most the
// one that was in flight), under --durability process and sync.
func TestKill9LosesNoAcknowledgedIncrement(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real nodes 40 times")
	}
	bin := buildNode(t)
	for _, mode := range []string{"process", "sync"} {
		t.Run(mode, func(t *testing.T) { killAndCount(t, bin, mode) })
	}
}

func killAndCount(t *testing.T, bin, mode string) {
	c := newProcCluster(t, bin, mode)
	direct := dialMCP(t, c.nodes[0].BaseURL)
	for _, id := range []string{"direct", "fwd"} {
		if res, err := direct.call("swarm_start", map[string]any{"app": "counter", "id": id}); err != nil || res.IsError {
			t.Fatalf("swarm_start %s on node1: %v %s", id, err, textOf(res))
		}
	}
	_ = direct.Close()
	count := map[string]int{} // the count each session must hold at least
	var stats struct {
		acked, inflightApplied int
		lost                   int
	}
	began := time.Now()
	for round := range killRounds {
		// node3 reaches node1's (restarted) sessions a moment after node1 is up.
		entry, _ := c.awaitCallable(t, 2, "fwd")
		owner := dialMCP(t, c.nodes[0].BaseURL)
		type result struct {
			acked, tried int
		}
		results := make(chan struct {
			id string
			result
		}, 2)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for id, cl := range map[string]*mcpClient{"direct": owner, "fwd": entry} {
			wg.Go(func() {
				var r result
				defer func() {
					results <- struct {
						id string
						result
					}{id, r}
				}()
				for {
					select {
					case <-stop:
						return
					default:
					}
					r.tried++
					res, err := cl.call(id+".inc.click", nil)
					if err != nil || res.IsError {
						return // the owner is gone: anything after this is unacknowledged
					}
					r.acked++
				}
			})
		}
		time.Sleep(time.Duration(20+rand.IntN(300)) * time.Millisecond) // a random moment
		c.nodes[0].kill9(t)
		close(stop)
		wg.Wait()
		close(results)
		_ = owner.Close()
		_ = entry.Close()
		c.restart(t, 0)
		for r := range results {
			got := c.readCount(t, r.id)
			min, max := count[r.id]+r.acked, count[r.id]+r.tried
			if got < min {
				t.Fatalf("round %d, %s: count %d after the restart, but %d increments were acknowledged on top of %d: %d lost\nnode1 log:\n%s",
					round, r.id, got, r.acked, count[r.id], min-got, tail(c.nodes[0].Log.String(), 40))
			}
			if got > max {
				t.Fatalf("round %d, %s: count %d, more than the %d tried on top of %d", round, r.id, got, r.tried, count[r.id])
			}
			stats.acked += r.acked
			stats.inflightApplied += got - min
			count[r.id] = got
		}
	}
	t.Logf("%s: %d rounds, %d acknowledged increments, 0 lost, %d unacknowledged ones applied; %v",
		mode, killRounds, stats.acked, stats.inflightApplied, time.Since(began).Round(time.Millisecond))
}

// procCluster is three mcpswarm processes joined on loopback with the
// local policy and a fresh cluster key.
type procCluster struct {
	bin   string
	args  [][]string
	nodes []*runningNode
}

func newProcCluster(t *testing.T, bin, mode string) *procCluster {
	t.Helper()
	dir := t.TempDir()
	key, err := exec.Command(bin, "keygen").Output()
	if err != nil {
		t.Fatalf("mcpswarm keygen: %v", err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(repoRoot(t), "deploy", "local-policy.yaml")
	c := &procCluster{bin: bin, nodes: make([]*runningNode, 3), args: make([][]string, 3)}
	gossip := make([]string, 3)
	for i := range 3 {
		gossip[i] = fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	}
	for i := range 3 {
		args := []string{"serve", "--name", fmt.Sprintf("node%d", i+1),
			"--http", fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
			"--grpc", fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
			"--gossip", gossip[i],
			"--data-dir", filepath.Join(dir, fmt.Sprintf("node%d", i+1)),
			"--cluster-key-file", keyFile, "--policy", policy,
			"--durability", mode, "--log-format", "text",
		}
		if i != 1 { // node2 is the seed; node1 rejoins through it after each kill
			args = append(args, "--join", gossip[1])
		}
		c.args[i] = args
	}
	for _, i := range []int{1, 0, 2} {
		c.restart(t, i)
	}
	return c
}

// restart starts node i (again), on its ports and data dir.
func (c *procCluster) restart(t *testing.T, i int) {
	t.Helper()
	args := c.args[i]
	var httpAddr string
	for k, a := range args {
		if a == "--http" {
			httpAddr = args[k+1]
		}
	}
	n := &runningNode{BaseURL: "http://" + httpAddr, Log: &syncBuffer{}, exited: make(chan struct{})}
	n.cmd = exec.Command(c.bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.Log, n.Log
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("starting node%d: %v", i+1, err)
	}
	go func() { n.waitErr = n.cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		select {
		case <-n.exited: // killed by the test
		default:
			n.stop(t) // the last incarnation still shuts down cleanly
		}
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL) // nothing it started outlives the test
	})
	if err := n.awaitHealthy(t.Context(), 30*time.Second); err != nil {
		t.Fatalf("node%d never became healthy: %v\nlog:\n%s", i+1, err, tail(n.Log.String(), 40))
	}
	c.nodes[i] = n
}

// kill9 kills the node's process group with SIGKILL and waits for it.
func (n *runningNode) kill9(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-n.exited
}

// awaitCallable returns a client on node i once a read of session id
// through it succeeds, and what it read. Right after the owner restarts,
// another node can answer "not running" for a moment (it has dropped the
// old incarnation's records and not yet received the new one's), so this
// polls.
func (c *procCluster) awaitCallable(t *testing.T, i int, id string) (*mcpClient, string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cl := dialMCP(t, c.nodes[i].BaseURL)
		res, err := cl.call("swarm_get_model", map[string]any{"id": id})
		if err == nil && !res.IsError {
			return cl, textOf(res)
		}
		_ = cl.Close()
		if time.Now().After(deadline) {
			t.Fatalf("session %s not callable through node%d after 60 s: %v %s", id, i+1, err, textOf(res))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var countRe = regexp.MustCompile(`"count":\s*(-?\d+)`)

// readCount reads session id's count: "direct" through its owner, "fwd"
// through node3, as the client that drove it would.
func (c *procCluster) readCount(t *testing.T, id string) int {
	t.Helper()
	i := 0
	if id == "fwd" {
		i = 2
	}
	cl, model := c.awaitCallable(t, i, id)
	_ = cl.Close()
	m := countRe.FindStringSubmatch(model)
	if m == nil {
		t.Fatalf("model of %s has no count: %s", id, model)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// mcpClient is an initialized mcp-go Streamable HTTP client acting for alice.
type mcpClient struct {
	*client.Client
}

func dialMCP(t *testing.T, base string) *mcpClient {
	t.Helper()
	c, err := tryDialMCP(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tryDialMCP is dialMCP returning its failure, for a caller that waits
// until a node serves connections.
func tryDialMCP(ctx context.Context, base string) (*mcpClient, error) {
	tr, err := transport.NewStreamableHTTP(base+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + aliceToken}),
		transport.WithHTTPTimeout(15*time.Second),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler))) // closing a client of a killed node fails, by design
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "durability-e2e", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialize on %s: %w", base, err)
	}
	return &mcpClient{c}, nil
}

func (c *mcpClient) call(name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err == nil && res == nil {
		err = errors.New("no result")
	}
	return res, err
}

func textOf(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
