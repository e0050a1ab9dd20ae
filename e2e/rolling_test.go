package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mcpswarm/mcpswarm/internal/testdns"
	adminv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/admin/v1"
)

// headlessName is the --join dns: name the rollout's DNS server answers,
// as a StatefulSet's headless Service would.
const headlessName = "mcpswarm-headless.rolling.test"

// pod is one StatefulSet pod on loopback: a stable name, ports and data
// dir across restarts, like mcpswarm-N with its volume claim.
type pod struct {
	name                    string
	http, grpc, gossip      int
	dataDir                 string
	cmd                     *exec.Cmd
	log                     *syncBuffer
	exited                  chan struct{}
	waitErr                 error
	restarts                int
	drainOut                string
	drainTook, exitTook, up time.Duration
	// drained is what the pod's drain answered; promotedMetric its
	// mcpswarm_swarm_handoffs_total{how="promoted"} right after.
	drained        *adminv1.DrainResponse
	promotedMetric float64
}

func (p *pod) baseURL() string { return fmt.Sprintf("http://127.0.0.1:%d", p.http) }

// rollout is a three-pod StatefulSet, its DNS and a Service-like balancer.
type rollout struct {
	t    *testing.T
	bins []string // the binary of each generation: bins[0] first, bins[1] after the roll
	dns  *testdns.Server
	pods []*pod
	lb   *balancer
}

func newRollout(t *testing.T) *rollout {
	t.Helper()
	bin := buildNode(t)
	// The "new version" is the same tree built again: the test cannot
	// build an earlier commit offline, so both generations speak today's
	// protocol (mixed versions are covered by cluster's capability tests).
	next := filepath.Join(t.TempDir(), "mcpswarm-next")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", next, "./cmd/node")
	cmd.Dir = repoRoot(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the next generation: %v\n%s", err, b)
	}
	dns, err := testdns.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dns.Close() })
	r := &rollout{t: t, bins: []string{bin, next}, dns: dns}
	root := t.TempDir()
	for i := range 3 {
		r.pods = append(r.pods, &pod{
			name: fmt.Sprintf("mcpswarm-%d", i), http: stablePort(t), grpc: stablePort(t), gossip: stablePort(t),
			dataDir: filepath.Join(root, fmt.Sprintf("data-%d", i)),
		})
	}
	r.lb = newBalancer(t)
	t.Cleanup(func() {
		for _, p := range r.pods {
			r.kill(p)
			if t.Failed() {
				t.Logf("log tail of %s:\n%s", p.name, tail(p.log.String(), 40))
			}
		}
	})
	return r
}

// publish sets the headless name's records to the pods that run.
func (r *rollout) publish() {
	var ts []testdns.Target
	for _, p := range r.pods {
		if p.cmd != nil {
			ts = append(ts, testdns.Target{Host: "127.0.0.1", Port: p.gossip})
		}
	}
	r.dns.Set(headlessName, ts...)
}

// start runs p with generation gen's binary, joins it through DNS, waits
// until /readyz passes and puts it into the balancer's rotation.
func (r *rollout) start(p *pod, gen int) {
	r.t.Helper()
	began := time.Now()
	p.log, p.exited = &syncBuffer{}, make(chan struct{})
	p.cmd = exec.Command(r.bins[gen], "serve", "--dev", "--name", p.name,
		"--http", fmt.Sprintf("127.0.0.1:%d", p.http),
		"--grpc", fmt.Sprintf("127.0.0.1:%d", p.grpc),
		"--gossip", fmt.Sprintf("127.0.0.1:%d", p.gossip),
		"--join", "dns:"+headlessName, "--dns-server", r.dns.Addr(),
		"--data-dir", p.dataDir, "--log-format", "text", "--log-level", "warn",
		"--shutdown-timeout", "20s")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		r.t.Fatalf("starting %s: %v", p.name, err)
	}
	exited := p.exited
	cmd := p.cmd
	go func() { p.waitErr = cmd.Wait(); close(exited) }()
	r.publish()
	if err := awaitReady(r.t.Context(), p, 30*time.Second); err != nil {
		r.t.Fatalf("%s never became ready: %v\nlog:\n%s", p.name, err, tail(p.log.String(), 30))
	}
	p.up = time.Since(began)
	r.t.Logf("%s %s ready", time.Now().Format("15:04:05.000"), p.name)
	r.lb.add(p.baseURL())
}

// awaitReady polls /readyz until it answers 200.
func awaitReady(ctx context.Context, p *pod, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		if resp, err := hc.Get(p.baseURL() + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("the process exited: %w", p.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// roll does what the StatefulSet controller and the kubelet do to one pod:
// take it out of the Service's endpoints, run the preStop drain, SIGTERM,
// wait for the exit (the grace period bounds it), then start the next
// generation with the same name and volume and wait for readiness.
func (r *rollout) roll(p *pod) {
	r.t.Helper()
	r.lb.remove(p.baseURL())
	r.t.Logf("%s %s out of rotation, draining", time.Now().Format("15:04:05.000"), p.name)
	began := time.Now()
	var stderr strings.Builder
	drain := exec.Command(r.bins[0], "drain", "--dev", "--json", "--addr", fmt.Sprintf("127.0.0.1:%d", p.grpc), "--timeout", "15s")
	drain.Stderr = &stderr
	out, err := drain.Output()
	p.drainTook = time.Since(began)
	if err != nil {
		r.t.Fatalf("preStop drain of %s: %v: %s%s", p.name, err, out, stderr.String())
	}
	p.drained = &adminv1.DrainResponse{}
	if err := protojson.Unmarshal(out, p.drained); err != nil {
		r.t.Fatalf("drain of %s answered %q: %v", p.name, out, err)
	}
	d := p.drained
	p.drainOut = fmt.Sprintf("%d moved, %d by promotion, %d kept here, %d lost", d.GetSessionsMoved(), d.GetSessionsPromoted(), d.GetSessionsKept(), d.GetSessionsStopped())
	if d.GetSessionsKept() != 0 || d.GetSessionsStopped() != 0 {
		r.t.Errorf("drain of %s: %s", p.name, p.drainOut)
	}
	// The pod's own count of its handoffs, scraped before it exits (a
	// runningNode naming only the pod's address is all metricValue needs).
	p.promotedMetric = metricValue(r.t, &runningNode{BaseURL: p.baseURL()}, `mcpswarm_swarm_handoffs_total{how="promoted"}`)
	began = time.Now()
	r.t.Logf("%s %s drained, SIGTERM", time.Now().Format("15:04:05.000"), p.name)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(45 * time.Second): // terminationGracePeriodSeconds
		r.t.Fatalf("%s outlived the grace period after SIGTERM", p.name)
	}
	p.exitTook = time.Since(began)
	if p.waitErr != nil {
		r.t.Errorf("%s exited with %v after SIGTERM", p.name, p.waitErr)
	}
	p.cmd = nil
	r.publish()
	p.restarts++
	r.start(p, 1)
}

// crash kills p with SIGKILL (no preStop, no drain), as a node failure
// would, and brings it back with the same volume.
func (r *rollout) crash(p *pod) {
	r.t.Helper()
	r.kill(p)
	r.lb.remove(p.baseURL()) // the readiness probe fails; until then requests failed
	r.publish()
	p.restarts++
	r.start(p, 1)
}

func (r *rollout) kill(p *pod) {
	if p.cmd == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	p.cmd = nil
}

// balancer is a non-sticky round-robin HTTP proxy over the pods in
// rotation, like a Service in front of the StatefulSet: each request may
// go to another pod.
type balancer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	pool []string
	next atomic.Uint64
}

func newBalancer(t *testing.T) *balancer {
	b := &balancer{}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			target, _ := url.Parse(pr.In.Context().Value(backendKey{}).(string))
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, "balancer: "+err.Error(), http.StatusBadGateway)
		},
	}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b.mu.Lock()
		pool := b.pool
		b.mu.Unlock()
		if len(pool) == 0 {
			http.Error(w, "balancer: no ready endpoints", http.StatusServiceUnavailable)
			return
		}
		backend := pool[int(b.next.Add(1))%len(pool)]
		proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), backendKey{}, backend)))
	}))
	t.Cleanup(b.srv.Close)
	return b
}

type backendKey struct{}

func (b *balancer) add(u string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pool = append(append([]string(nil), b.pool...), u)
}

func (b *balancer) remove(u string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keep []string
	for _, x := range b.pool {
		if x != u {
			keep = append(keep, x)
		}
	}
	b.pool = keep
}

// clicker is one MCP client driving its own counter session through the
// balancer every 20 ms.
type clicker struct {
	id    string
	c     *client.Client
	acked atomic.Int64
	calls atomic.Int64
	// maybe counts failures after which the click may still have applied.
	maybe atomic.Int64
}

// failures collects the failed calls of every clicker.
type failures struct {
	mu   sync.Mutex
	list []string
}

func (f *failures) add(s string) {
	f.mu.Lock()
	f.list = append(f.list, time.Now().Format("15:04:05.000")+" "+s)
	f.mu.Unlock()
}

func (f *failures) all() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.list...)
}

func newClicker(t *testing.T, lbURL, id string, spread int) *clicker {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(lbURL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "rolling-" + id, Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatalf("initialize through the balancer: %v", err)
	}
	k := &clicker{id: id, c: c}
	// Initialize takes two requests; spread the sessions over the pods.
	for range spread {
		if err := c.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Setup, not the measured run: a swarm_start answer is sometimes lost
	// in transport while twelve sessions start at once (mcp-go's
	// "unexpected nil response": the POST's SSE stream ends without the
	// answer; reported with issue 16, not fixed here). Try again, taking
	// "already exists" as the first try's success.
	for attempt := 0; ; attempt++ {
		res, err := k.call(t.Context(), "swarm_start", map[string]any{"app": "counter", "id": id})
		switch {
		case err == nil && !res.IsError:
			return k
		case err == nil && attempt > 0 && strings.Contains(textOf(res), "already exists"):
			return k
		case err != nil && attempt < 3:
			t.Logf("starting %s: %v; trying again", id, err)
			continue
		}
		t.Fatalf("starting %s: %v %s", id, err, textOf(res))
	}
}

func (k *clicker) call(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	return k.c.CallTool(ctx, req)
}

// warm clicks until six calls in a row succeed, so every pod has seen the
// session's tools before the measured run begins.
func (k *clicker) warm(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for streak := 0; streak < 6; {
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered six clicks in a row", k.id)
		}
		res, err := k.call(t.Context(), k.id+".inc.click", nil)
		if err == nil && !res.IsError {
			k.acked.Add(1)
			streak++
			continue
		}
		if err != nil || strings.Contains(textOf(res), "may still have applied") {
			k.maybe.Add(1)
		}
		streak = 0
		time.Sleep(20 * time.Millisecond)
	}
}

// run clicks every 20 ms until stop closes, counting acknowledged clicks
// and recording every failure.
func (k *clicker) run(stop <-chan struct{}, fails *failures) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		k.calls.Add(1)
		res, err := k.call(context.Background(), k.id+".inc.click", nil)
		switch {
		case err != nil:
			k.maybe.Add(1) // a transport failure may follow the update
			fails.add(k.id + ": " + err.Error())
		case res.IsError:
			if strings.Contains(textOf(res), "may still have applied") {
				k.maybe.Add(1)
			}
			fails.add(k.id + ": " + textOf(res))
		default:
			k.acked.Add(1)
		}
	}
}

// count reads the session's counter through the balancer.
func (k *clicker) count(t *testing.T) (int64, error) {
	res, err := k.call(t.Context(), "swarm_get_model", map[string]any{"id": k.id})
	if err != nil {
		return 0, err
	}
	if res.IsError {
		return 0, errors.New(textOf(res))
	}
	var m struct {
		Count int64 `json:"count"`
	}
	if err := json.Unmarshal([]byte(textOf(res)), &m); err != nil {
		return 0, fmt.Errorf("model %q: %w", textOf(res), err)
	}
	return m.Count, nil
}

// retryable reports whether a failed call's answer is one of the
// documented retryable answers (docs/KUBERNETES.md, "What a client sees").
func retryable(s string) bool {
	if _, rest, ok := strings.Cut(s, " "); ok {
		s = rest // the timestamp
	}
	return strings.Contains(s, "; retry") || strings.Contains(s, "retry later")
}

type rolloutFigures struct {
	calls, acked, failed, maybe int64
	took                        time.Duration
}

// drive starts twelve clickers, runs steps while they click, stops them
// and returns the figures; it checks every session is owned by a running
// pod and drivable at the end.
func drive(t *testing.T, r *rollout, steps func()) ([]*clicker, rolloutFigures, []string) {
	t.Helper()
	var ks []*clicker
	for i := range 12 {
		ks = append(ks, newClicker(t, r.lb.srv.URL, fmt.Sprintf("roll%02d", i), i%3))
	}
	for _, k := range ks {
		k.warm(t)
	}
	fails := &failures{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, k := range ks {
		wg.Add(1)
		go func() { defer wg.Done(); k.run(stop, fails) }()
	}
	time.Sleep(500 * time.Millisecond)
	began := time.Now()
	steps()
	took := time.Since(began)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	var fig rolloutFigures
	fig.took = took
	for _, k := range ks {
		fig.calls += k.calls.Load()
		fig.acked += k.acked.Load()
		fig.maybe += k.maybe.Load()
	}
	all := fails.all()
	fig.failed = int64(len(all))

	// Every session is listed with a running owner and still drivable.
	running := map[string]bool{}
	for _, p := range r.pods {
		running[p.name] = p.cmd != nil
	}
	for _, k := range ks {
		res, err := k.call(t.Context(), "swarm_list", nil)
		if err != nil || res.IsError {
			t.Fatalf("swarm_list for %s: %v %s", k.id, err, textOf(res))
		}
		var list struct {
			Sessions []struct{ ID, Owner string } `json:"sessions"`
		}
		if err := json.Unmarshal([]byte(textOf(res)), &list); err != nil {
			t.Fatalf("swarm_list: %v", err)
		}
		owner := ""
		for _, s := range list.Sessions {
			if s.ID == k.id {
				owner = s.Owner
			}
		}
		if !running[owner] {
			t.Errorf("session %s is owned by %q, not a running pod (list %s)", k.id, owner, textOf(res))
		}
		if res, err := k.call(t.Context(), k.id+".inc.click", nil); err != nil || res.IsError {
			t.Errorf("session %s is not drivable after the rollout: %v %s", k.id, err, textOf(res))
		} else {
			k.acked.Add(1)
		}
	}
	return ks, fig, all
}

func (r *rollout) report(t *testing.T, fig rolloutFigures) {
	t.Helper()
	var lines []string
	for _, p := range r.pods {
		lines = append(lines, fmt.Sprintf("%s: drain %v (%s), exit after SIGTERM %v, restart to ready %v",
			p.name, p.drainTook.Round(time.Millisecond), p.drainOut, p.exitTook.Round(time.Millisecond), p.up.Round(time.Millisecond)))
	}
	sort.Strings(lines)
	t.Logf("rollout took %v; %d calls, %d acknowledged, %d failed (%.3f%%), %d may have applied\n%s",
		fig.took.Round(time.Millisecond), fig.calls, fig.acked, fig.failed, 100*float64(fig.failed)/float64(max(fig.calls, 1)), fig.maybe, strings.Join(lines, "\n"))
}

// A StatefulSet rollout on loopback while twelve clients keep clicking
// their sessions through a non-sticky balancer: each pod in turn leaves the
// Service, is drained by its preStop hook, gets SIGTERM and comes back with
// the next binary and the same name and volume. No session and no
// acknowledged click is lost, at most 0.1% of calls fail and each failure
// is a documented retryable answer, and every session ends owned by a
// running pod and drivable. Every session has a standby (the default R of
// 1), so each drain moves every session by promotion: its standby takes it
// over from the copy it holds (the drain's answer and the pod's
// mcpswarm_swarm_handoffs_total{how="promoted"} say so); the test logs each
// session's move time, from its detach to the new owner's answer.
func TestRollingRestartLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes and rolls them")
	}
	r := newRollout(t)
	for _, p := range r.pods {
		r.start(p, 0)
	}
	ks, fig, fails := drive(t, r, func() {
		for i := len(r.pods) - 1; i >= 0; i-- { // highest ordinal first
			r.roll(r.pods[i])
		}
	})
	r.report(t, fig)
	var moves []time.Duration
	for _, p := range r.pods {
		d := p.drained
		for _, m := range d.GetMoves() {
			moves = append(moves, m.GetTook().AsDuration())
			if !m.GetPromoted() {
				t.Errorf("the drain of %s copied %s to %s instead of promoting its standby", p.name, m.GetId(), m.GetNode())
			}
		}
		if got := p.promotedMetric; got != float64(d.GetSessionsPromoted()) {
			t.Errorf("%s counts %v handoffs by promotion in /metrics, its drain answered %d", p.name, got, d.GetSessionsPromoted())
		}
	}
	if len(moves) == 0 {
		t.Fatal("no drain moved a session")
	}
	slices.Sort(moves)
	t.Logf("%d session moves, each from its detach to its new owner's answer: p50 %v, max %v",
		len(moves), moves[len(moves)/2].Round(10*time.Microsecond), moves[len(moves)-1].Round(10*time.Microsecond))
	for _, k := range ks {
		n, err := k.count(t)
		if err != nil {
			t.Errorf("reading %s after the rollout: %v", k.id, err)
			continue
		}
		if acked := k.acked.Load(); n < acked || n > acked+k.maybe.Load() {
			t.Errorf("session %s counts %d, but %d clicks were acknowledged (%d more may have applied)", k.id, n, acked, k.maybe.Load())
		}
	}
	var transport int
	for _, f := range fails {
		switch {
		case strings.Contains(f, "transport error"):
			// Not an answer of the swarm: the client lost the POST's
			// stream (seen about once in ten runs, also before any pod
			// rolls; reported with issue 16). It counts against the 0.1%.
			transport++
			t.Logf("transport failure: %s", f)
		case !retryable(f):
			t.Errorf("a failed call's answer is not a documented retryable one: %s", f)
		default:
			t.Logf("retryable failure: %s", f)
		}
	}
	t.Logf("%d of %d failures were transport failures", transport, len(fails))
	if limit := fig.calls / 1000; fig.failed > limit {
		t.Errorf("%d of %d calls failed, above 0.1%% (%d)", fig.failed, fig.calls, limit)
	}
}

// The same rollout with the middle pod killed -9 instead of drained: its
// sessions come back when it restarts from its volume, and no acknowledged
// click is lost (answers are durable before they are sent). Requests the
// balancer sent to the dead pod before it left the rotation fail, and
// calls answer "owner unavailable" while it restarts; those are reported
// as figures, not asserted (see docs/KUBERNETES.md).
func TestRollingRestartWithACrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes and rolls them")
	}
	r := newRollout(t)
	for _, p := range r.pods {
		r.start(p, 0)
	}
	ks, fig, fails := drive(t, r, func() {
		r.roll(r.pods[2])
		r.crash(r.pods[1])
		r.roll(r.pods[0])
	})
	r.report(t, fig)
	var lost int64
	for _, k := range ks {
		n, err := k.count(t)
		if err != nil {
			t.Errorf("session %s did not come back after the crash: %v", k.id, err)
			continue
		}
		if acked := k.acked.Load(); n < acked {
			lost += acked - n
		}
	}
	var notRetryable int
	for _, f := range fails {
		if !retryable(f) {
			notRetryable++
		}
	}
	t.Logf("with a kill -9: %d acknowledged clicks lost, %d failed calls, %d of them not a retryable answer (e.g. the balancer's 502 before the dead pod left the rotation)", lost, len(fails), notRetryable)
	if lost > 0 {
		// Answers are durable before they are sent (--durability sync).
		t.Errorf("%d acknowledged clicks were lost with the kill -9", lost)
	}
	if len(fails) > 0 {
		t.Logf("first failures: %s", strings.Join(fails[:min(5, len(fails))], " | "))
	}
}
