package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcpswarm/mcpswarm"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// member is one mcpswarm process of a multi-node test. Its ports and data
// directory stay fixed across restarts, as a pod's do.
type member struct {
	t       *testing.T
	bin     string
	Name    string
	HTTP    string // 127.0.0.1:PORT
	GRPC    string
	Gossip  string
	DataDir string
	args    []string // extra flags
	// wrap, when set, is the command the node runs under (ip netns exec NS).
	wrap []string
	// prod, when set, runs without --dev: args must give a key and policy.
	prod bool

	Log    *syncBuffer
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// newMember reserves ports and a data directory for node name; extra flags
// are passed on every start.
func newMember(t *testing.T, bin, name string, extra ...string) *member {
	t.Helper()
	return &member{
		t: t, bin: bin, Name: name,
		HTTP:    fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
		GRPC:    fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
		Gossip:  fmt.Sprintf("127.0.0.1:%d", stablePort(t)),
		DataDir: t.TempDir(),
		args:    extra,
	}
}

// usedPorts are the ports stablePort has handed out in this test binary.
var usedPorts sync.Map

// stablePort returns a loopback port, free for TCP and UDP now, below the
// kernel's ephemeral range (32768 and up on Linux). A port the kernel picked
// for us would be free only until it hands the same number to some
// process's outgoing connection, which with 150 processes gossiping happens
// within a test run; ports below the range are only ever taken by a bind.
func stablePort(t *testing.T) int {
	t.Helper()
	for range 1000 {
		p := 20000 + rand.IntN(12000)
		if _, taken := usedPorts.LoadOrStore(p, true); taken {
			continue
		}
		tl, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ul, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		_ = tl.Close()
		if err != nil {
			continue
		}
		_ = ul.Close()
		return p
	}
	t.Fatal("no free loopback port below 32000")
	return 0
}

// BaseURL is the node's HTTP root.
func (m *member) BaseURL() string { return "http://" + m.HTTP }

// start launches the process joining join (gossip addresses) and returns
// once it has started, without waiting for anything. The process runs in
// its own process group, which cleanup kills whatever the test did.
func (m *member) start(join ...string) {
	m.t.Helper()
	args := []string{"serve", "--name", m.Name,
		"--http", m.HTTP, "--grpc", m.GRPC, "--gossip", m.Gossip,
		"--data-dir", m.DataDir, "--log-format", "json", "--log-level", "debug",
		"--shutdown-timeout", "5s",
	}
	if len(join) > 0 {
		args = append(args, "--join", strings.Join(join, ","))
	}
	if !m.prod {
		args = append(args, "--dev")
	}
	args = append(args, m.args...)
	if m.Log == nil {
		m.Log = &syncBuffer{}
	}
	fmt.Fprintf(m.Log, "=== start %s\n", strings.Join(args, " "))
	argv := append(append(slices.Clone(m.wrap), m.bin), args...)
	m.cmd = exec.Command(argv[0], argv[1:]...)
	m.cmd.Stdout, m.cmd.Stderr = m.Log, m.Log
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m.exited = make(chan struct{})
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("starting %s: %v", m.Name, err)
	}
	cmd, exited := m.cmd, m.exited
	go func() { m.err = cmd.Wait(); close(exited) }()
	m.t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if m.t.Failed() {
			m.t.Logf("log of %s:\n%s", m.Name, tail(m.Log.String(), 40))
		}
	})
}

// running reports whether the process has not exited.
func (m *member) running() bool {
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits; it fails the test on a non-zero exit.
func (m *member) stop() {
	m.t.Helper()
	if !m.running() {
		return
	}
	// The client may hold connections it dialled and never used: the
	// server counts them as new, and its shutdown waits up to 5 s for them.
	httpClient.CloseIdleConnections()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.exited
		m.t.Fatalf("%s ignored SIGTERM for 20 s", m.Name)
	}
	if m.err != nil {
		m.t.Fatalf("%s exited with %v after SIGTERM\n%s", m.Name, m.err, tail(m.Log.String(), 30))
	}
}

// kill ends the process as a crash would.
func (m *member) kill() {
	if !m.running() {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.exited
}

// readyz is what GET /readyz answers.
type readyz struct {
	Status  int
	Ready   bool `json:"ready"`
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
}

// alive lists the members this node sees alive, sorted.
func (r readyz) alive() []string {
	var out []string
	for _, m := range r.Members {
		if m.State == "alive" {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// readyz fetches /readyz; an error means no answer.
func (m *member) readyz(ctx context.Context) (readyz, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.BaseURL()+"/readyz", nil)
	if err != nil {
		return readyz{}, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return readyz{}, err
	}
	defer resp.Body.Close()
	var r readyz
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return readyz{}, fmt.Errorf("decoding /readyz of %s: %w", m.Name, err)
	}
	r.Status = resp.StatusCode
	return r, nil
}

// await polls cond every 10 ms until it returns nil, the process exits or
// d passes; it returns how long it took or the last reason.
func (m *member) await(d time.Duration, cond func(ctx context.Context) error) (time.Duration, error) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(m.t.Context(), d)
	defer cancel()
	var last error
	for {
		err := cond(ctx)
		if err == nil {
			return time.Since(began), nil
		}
		if ctx.Err() == nil || last == nil {
			last = err // not the check the deadline cut short
		}
		select {
		case <-m.exited:
			return time.Since(began), fmt.Errorf("%s exited (%v); last: %w", m.Name, m.err, last)
		case <-ctx.Done():
			return time.Since(began), fmt.Errorf("%s after %v: %w", m.Name, d, last)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// seesAlive is a condition: m's /readyz lists exactly names alive.
func (m *member) seesAlive(names ...string) func(ctx context.Context) error {
	want := slices.Clone(names)
	slices.Sort(want)
	return func(ctx context.Context) error {
		r, err := m.readyz(ctx)
		if err != nil {
			return err
		}
		if got := r.alive(); !slices.Equal(got, want) {
			return fmt.Errorf("sees alive %v, want %v", got, want)
		}
		return nil
	}
}

// isReady is a condition: m's /readyz answers 200.
func (m *member) isReady(ctx context.Context) error {
	r, err := m.readyz(ctx)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("/readyz answers %d", r.Status)
	}
	return nil
}

// ensureBinary builds the node once per test binary run when MCPSWARM_BIN
// is unset.
func ensureBinary(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("MCPSWARM_BIN"); b != "" {
		return b
	}
	return buildNode(t)
}

// mcpClient is an initialized Streamable HTTP client of one node; a token,
// when given, is sent as a bearer token.
func (m *member) mcpClient(t *testing.T, token ...string) *client.Client {
	t.Helper()
	var opts []transport.StreamableHTTPCOption
	if len(token) > 0 {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token[0]}))
	}
	tr, err := transport.NewStreamableHTTP(m.BaseURL()+"/mcp", opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("starting an MCP client of %s: %v", m.Name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "e2e-membership", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initializing on %s: %v", m.Name, err)
	}
	return c
}

// callTool calls name and returns the result's text; a transport error or
// a tool error is returned as an error.
func callTool(ctx context.Context, c *client.Client, name string, args map[string]any) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, x := range res.Content {
		if tc, ok := x.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return b.String(), fmt.Errorf("%s answered a tool error: %s", name, b.String())
	}
	return b.String(), nil
}

// admin returns an admin API client of m, with the development key unless
// key is given.
func (m *member) admin(t *testing.T, key []byte) adminv1.AdminServiceClient {
	t.Helper()
	if key == nil {
		key = mcpswarm.DevClusterKey()
	}
	conn, err := grpc.NewClient(m.GRPC,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(mcpswarm.AdminCredentials{Token: mcpswarm.AdminToken(key)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return adminv1.NewAdminServiceClient(conn)
}

// listsSession is a condition: the admin API of a lists session id.
func listsSession(a adminv1.AdminServiceClient, id string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		resp, err := a.ListSessions(ctx, &adminv1.ListSessionsRequest{})
		if err != nil {
			return err
		}
		for _, s := range resp.GetSessions() {
			if s.GetId() == id {
				return nil
			}
		}
		return fmt.Errorf("session %s not listed among %d", id, len(resp.GetSessions()))
	}
}

// checkLogKeys fails the test for a JSON log line of m that repeats a
// top-level key: log pipelines drop or mangle such lines.
func (m *member) checkLogKeys(t *testing.T) {
	t.Helper()
	for _, line := range strings.Split(m.Log.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		if _, err := dec.Token(); err != nil {
			t.Errorf("%s logged a line that is not JSON: %s", m.Name, line)
			continue
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Errorf("%s logged a line that is not JSON: %s", m.Name, line)
				break
			}
			k, _ := tok.(string)
			if seen[k] {
				t.Errorf("%s logged key %q twice: %s", m.Name, k, line)
				break
			}
			seen[k] = true
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				t.Errorf("%s logged a line that is not JSON: %s", m.Name, line)
				break
			}
		}
	}
}
