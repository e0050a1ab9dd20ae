package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/testenv"
)

// chromiumPath finds Debian's chromium (or $CHROMIUM), or skips the test
// with the command that installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Skip(t, "chromium is not installed: run `apt-get update && apt-get install -y chromium` (`make test` does when run as root where apt-get exists) to enable the browser tests")
	return ""
}

// browser is a running e2e/ui/driver.mjs: headless Chromium driven by
// playwright-core over JSON lines.
type browser struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	mu    sync.Mutex
	next  int
	wait  map[int]chan driverReply
	done  chan struct{}
	stder *syncBuffer
}

type driverReply struct {
	ID    int             `json:"id"`
	OK    bool            `json:"ok"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// startBrowser launches the driver, or skips when Node.js, playwright-core
// or chromium is missing. The driver and Chromium run in their own process
// group, killed in Cleanup.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	return startDriver(t, filepath.Join("ui", "driver.mjs"))
}

// startDriver launches script (relative to e2e/), a driver that speaks
// driver.mjs's protocol, as startBrowser does.
func startDriver(t *testing.T, script string) *browser {
	t.Helper()
	chrome := chromiumPath(t)
	node, dir := nodeJS(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		testenv.Skip(t, "playwright-core is missing: run `npm ci --prefix e2e`")
	}
	b := &browser{t: t, wait: map[int]chan driverReply{}, done: make(chan struct{}), stder: &syncBuffer{}}
	b.cmd = exec.Command(node, filepath.Join(dir, script))
	b.cmd.Dir = dir
	b.cmd.Env = append(os.Environ(), "CHROMIUM="+chrome)
	b.cmd.Stderr = b.stder
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var err error
	if b.in, err = b.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("starting the browser driver: %v", err)
	}
	ready := make(chan driverReply, 1)
	b.wait[0] = ready
	go b.read(out)
	t.Cleanup(func() {
		_ = b.in.Close()
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
		}
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		_ = b.cmd.Wait()
		if t.Failed() {
			t.Logf("browser driver stderr:\n%s", tail(b.stder.String(), 40))
		}
	})
	select {
	case r := <-ready:
		if !r.OK {
			t.Fatalf("browser driver: %s", r.Error)
		}
	case <-b.done:
		t.Fatalf("browser driver exited before it was ready:\n%s", b.stder)
	case <-time.After(60 * time.Second):
		t.Fatalf("browser driver not ready after 60 s:\n%s", b.stder)
	}
	return b
}

func (b *browser) read(out io.Reader) {
	defer close(b.done)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r driverReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		b.mu.Lock()
		ch := b.wait[r.ID]
		delete(b.wait, r.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// pending is a request in flight; result waits for it.
type pending struct {
	b  *browser
	op string
	ch chan driverReply
}

// start sends a request without waiting for its answer.
func (b *browser) start(op string, args map[string]any) pending {
	b.t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan driverReply, 1)
	b.wait[id] = ch
	b.mu.Unlock()
	req := map[string]any{"id": id, "op": op}
	for k, v := range args {
		req[k] = v
	}
	line, _ := json.Marshal(req)
	if _, err := b.in.Write(append(line, '\n')); err != nil {
		b.t.Fatalf("browser %s: %v", op, err)
	}
	return pending{b, op, ch}
}

// result waits for the answer and decodes its value into v (may be nil).
func (p pending) result(v any) error {
	select {
	case r := <-p.ch:
		if !r.OK {
			return fmt.Errorf("browser %s: %s", p.op, r.Error)
		}
		if v != nil {
			return json.Unmarshal(r.Value, v)
		}
		return nil
	case <-p.b.done:
		return fmt.Errorf("browser %s: the driver exited:\n%s", p.op, tail(p.b.stder.String(), 20))
	case <-time.After(90 * time.Second):
		return fmt.Errorf("browser %s: no answer in 90 s", p.op)
	}
}

// do runs a request and fails the test on error.
func (b *browser) do(op string, args map[string]any) json.RawMessage {
	b.t.Helper()
	var v json.RawMessage
	if err := b.start(op, args).result(&v); err != nil {
		b.t.Fatal(err)
	}
	return v
}

// waitJS waits until js is truthy in page and returns when it was first
// seen true (wall clock).
func (b *browser) waitJS(page, js string, timeout time.Duration) time.Time {
	b.t.Helper()
	var ms int64
	if err := b.start("wait", map[string]any{"page": page, "js": js, "timeout": timeout.Milliseconds()}).result(&ms); err != nil {
		b.t.Fatalf("waiting for %s on page %s: %v", js, page, err)
	}
	return time.UnixMilli(ms)
}

func (b *browser) evalBool(page, js string) bool {
	b.t.Helper()
	var v bool
	if err := json.Unmarshal(b.do("eval", map[string]any{"page": page, "js": js}), &v); err != nil {
		b.t.Fatalf("eval %s: %v", js, err)
	}
	return v
}

// swarmProc is one real mcpswarm process of a cluster, restartable with
// its data directory.
type swarmProc struct {
	t        *testing.T
	bin      string
	name     string
	args     []string
	BaseURL  string
	Log      *syncBuffer
	cmd      *exec.Cmd
	exited   chan struct{}
	GossipAt string
	GRPCAt   string
}

// startSwarmProc starts node name with the cluster key and policy, joining
// join when given; it waits for /healthz. Cleanup kills what is left.
func startSwarmProc(t *testing.T, bin, name, dataDir, keyFile, policy string, join string) *swarmProc {
	t.Helper()
	p := &swarmProc{t: t, bin: bin, name: name, Log: &syncBuffer{}}
	httpAddr := fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	p.GossipAt = fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	p.GRPCAt = fmt.Sprintf("127.0.0.1:%d", stablePort(t))
	p.BaseURL = "http://" + httpAddr
	p.args = []string{"serve", "--name", name, "--http", httpAddr,
		"--grpc", p.GRPCAt, "--gossip", p.GossipAt,
		"--data-dir", dataDir, "--cluster-key-file", keyFile, "--policy", policy,
		"--dead-grace", "60s", "--log-format", "text",
		// One copy per session: the page tests watch a killed node's
		// sessions go and come back with it (failover to a standby has
		// its own tests, swarm_standby_test.go).
		"--session-replicas", "0"}
	if join != "" {
		p.args = append(p.args, "--join", join)
	}
	p.run()
	return p
}

func (p *swarmProc) run() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.Log, p.Log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.exited = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("starting %s: %v", p.name, err)
	}
	cmd, exited := p.cmd, p.exited
	go func() { _ = cmd.Wait(); close(exited) }()
	p.t.Cleanup(func() {
		select {
		case <-exited:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	rn := &runningNode{BaseURL: p.BaseURL, exited: exited}
	if err := rn.awaitHealthy(p.t.Context(), 30*time.Second); err != nil {
		p.t.Fatalf("%s never became healthy: %v\nlog:\n%s", p.name, err, tail(p.Log.String(), 30))
	}
}

// kill ends the process as a crash would (SIGKILL: no leave, no drain).
func (p *swarmProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// restart starts the process again with the same flags and data dir.
func (p *swarmProc) restart() { p.run() }

func sha256Hex(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
