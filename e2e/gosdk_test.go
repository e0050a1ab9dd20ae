package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkToken is the bearer token the SDK clients present (askPolicy holds its
// SHA-256): a 2026-07-28 request has no connection to own sessions by, so
// outside --dev it needs a verified principal.
const sdkToken = "gosdk-e2e-token-not-for-production"

// askPolicy allows everything except the login form's submit button, whose
// calls need the user's approval (an Ask): the SDK's elicitation handler is
// asked, in each era the way that era does it.
const askPolicy = `name: e2e-ask
tokens:
  - sha256: "%x"
    subject: gosdk
tools:
  - match: {tools: ["*.submit.click"]}
    ask: "{principal} wants to run {tool}. Allow it?"
  - allow: true
reads:
  - allow: true
`

// twoNodes starts node A and node B (joined to A) with askPolicy, and waits
// until each sees the other alive.
func twoNodes(t *testing.T) (a, b *runningNode) {
	t.Helper()
	bin := buildNode(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, fmt.Appendf(nil, askPolicy, sha256.Sum256([]byte(sdkToken))), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := exec.CommandContext(t.Context(), bin, "keygen").Output()
	if err != nil {
		t.Fatalf("mcpswarm keygen: %v", err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--policy", policy, "--cluster-key-file", keyFile}
	a = startNodeArgs(t, bin, append(common, "--name", "gosdk-a")...)
	b = startNodeArgs(t, bin, append(common, "--name", "gosdk-b", "--join", a.Gossip)...)
	for _, n := range []*runningNode{a, b} {
		if err := awaitMembers(t.Context(), n, 2, 30*time.Second); err != nil {
			t.Fatalf("%s: %v\nlog:\n%s", n.BaseURL, err, tail(n.Log.String(), 30))
		}
	}
	return a, b
}

// awaitMembers polls /readyz until n reports want alive members.
func awaitMembers(ctx context.Context, n *runningNode, want int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		var body struct {
			Members []struct{ State string } `json:"members"`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.BaseURL+"/readyz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			alive := 0
			for _, m := range body.Members {
				if m.State == "alive" {
					alive++
				}
			}
			if alive >= want {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d alive members: %w", want, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// router sends a client's HTTP requests to node A until moved, then every
// request but the long-lived streams opened before (the GET stream, the
// legacy SSE stream, the tools subscription) to node B: a load balancer
// that moved the client between two nodes.
type router struct {
	a, b  *url.URL
	moved atomic.Bool
	next  http.RoundTripper // nil: http.DefaultTransport
}

func (r *router) RoundTrip(req *http.Request) (*http.Response, error) {
	target := r.a
	if r.moved.Load() && req.Method != http.MethodGet {
		target = r.b
	}
	out := req.Clone(req.Context())
	out.URL.Scheme, out.URL.Host, out.Host = target.Scheme, target.Host, target.Host
	out.Header.Set("Authorization", "Bearer "+sdkToken)
	if r.next != nil {
		return r.next.RoundTrip(out)
	}
	return http.DefaultTransport.RoundTrip(out)
}

// sdkClient is one official Go SDK client and what it received.
type sdkClient struct {
	cs      *gosdk.ClientSession
	toolsCh chan struct{}
	updates chan string // resources/updated URIs
	elicit  atomic.Value
	asked   atomic.Int32
}

type elicitFn func(context.Context, *gosdk.ElicitRequest) (*gosdk.ElicitResult, error)

func connectSDK(t *testing.T, base string, rt http.RoundTripper, version string, sse bool) *sdkClient {
	t.Helper()
	c := &sdkClient{toolsCh: make(chan struct{}, 64), updates: make(chan string, 64)}
	c.elicit.Store(elicitFn(func(context.Context, *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
		return &gosdk.ElicitResult{Action: "decline"}, nil
	}))
	client := gosdk.NewClient(&gosdk.Implementation{Name: "mcpswarm-gosdk-e2e", Version: "1.0.0"}, &gosdk.ClientOptions{
		ElicitationHandler: func(ctx context.Context, req *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
			c.asked.Add(1)
			return c.elicit.Load().(elicitFn)(ctx, req)
		},
		ToolListChangedHandler: func(context.Context, *gosdk.ToolListChangedRequest) {
			select {
			case c.toolsCh <- struct{}{}:
			default:
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, req *gosdk.ResourceUpdatedNotificationRequest) {
			select {
			case c.updates <- req.Params.URI:
			default:
			}
		},
	})
	hc := &http.Client{Transport: rt}
	var tr gosdk.Transport = &gosdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, MaxRetries: -1}
	if sse {
		tr = &gosdk.SSEClientTransport{Endpoint: base + "/sse", HTTPClient: hc}
	}
	var opts *gosdk.ClientSessionOptions
	if version != "" {
		opts = &gosdk.ClientSessionOptions{ProtocolVersion: version}
	}
	// The legacy SSE transport ties its stream to Connect's context: give
	// it the test's, not a timeout that ends when Connect returns.
	cs, err := client.Connect(t.Context(), tr, opts)
	if err != nil {
		t.Fatalf("connecting the Go SDK to %s (sse=%v, version %q): %v", base, sse, version, err)
	}
	c.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return c
}

func (c *sdkClient) call(t *testing.T, name string, args map[string]any) *gosdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &gosdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

func resultText(r *gosdk.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*gosdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (c *sdkClient) toolNames(t *testing.T) map[string]*gosdk.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out := map[string]*gosdk.Tool{}
	for tool, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		out[tool.Name] = tool
	}
	return out
}

// await waits for a signal on ch, failing after d.
func await[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %s", what, d)
		var zero T
		return zero
	}
}

func drain[T any](ch <-chan T) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestGoSDKInterop drives the login demo with the official Go SDK client
// (github.com/modelcontextprotocol/go-sdk), at its default settings and
// pinned to 2025-11-25, over Streamable HTTP and legacy SSE, against one node
// and across two (started on A; driven, subscribed and updated through B).
func TestGoSDKInterop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	a, b := twoNodes(t)
	ua, _ := url.Parse(a.BaseURL)
	ub, _ := url.Parse(b.BaseURL)
	i := 0
	for _, version := range []string{"", "2025-11-25"} {
		for _, sse := range []bool{false, true} {
			for _, cross := range []bool{false, true} {
				i++
				name := fmt.Sprintf("version=%s/sse=%v/cross=%v", map[string]string{"": "default"}[version]+version, sse, cross)
				id := fmt.Sprintf("g%d", i)
				t.Run(name, func(t *testing.T) {
					rt := &router{a: ua, b: ua}
					if cross {
						rt.b = ub
					}
					want := "2025-11-25"
					if version == "" && !sse {
						want = "2026-07-28" // /sse advertises only the session-based revisions
					}
					driveLogin(t, a, rt, version, sse, want, id)
				})
			}
		}
	}
}

func driveLogin(t *testing.T, a *runningNode, rt *router, version string, sse bool, wantVersion, id string) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node A log tail:\n%s", tail(a.Log.String(), 25))
		}
	})
	c := connectSDK(t, a.BaseURL, rt, version, sse)
	if got := c.cs.InitializeResult().ProtocolVersion; got != wantVersion {
		t.Fatalf("negotiated %s, want %s", got, wantVersion)
	}
	tools := c.toolNames(t)
	for _, n := range []string{"swarm_apps", "swarm_start", "swarm_list", "swarm_stop"} {
		if tools[n] == nil {
			t.Fatalf("tools/list lacks %s", n)
		}
	}
	drain(c.toolsCh)
	if r := c.call(t, "swarm_start", map[string]any{"app": "login", "id": id}); r.IsError {
		t.Fatalf("swarm_start: %s", resultText(r))
	}
	await(t, c.toolsCh, 15*time.Second, "notifications/tools/list_changed after swarm_start")

	// From here on, a cross-node client's requests land on node B.
	rt.moved.Store(true)
	// Node B learns of the session by replication: list until it has.
	want := []string{id + ".username.type_into", id + ".password.type_into", id + ".submit.click"}
	deadline := time.Now().Add(15 * time.Second)
	for {
		tools = c.toolNames(t)
		missing := ""
		for _, n := range want {
			if tools[n] == nil {
				missing = n
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools/list still lacks %s after 15 s", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The Ask tool is listed, marked as needing approval.
	if mark, _ := tools[id+".submit.click"].Meta["mcpswarm/requiresApproval"].(string); !strings.Contains(mark, id+".submit.click") {
		t.Errorf("%s.submit.click is not marked as needing approval: _meta %v", id, tools[id+".submit.click"].Meta)
	}

	// Before this client's first subscription lands on B: B records a
	// subscription in the connection's replicated record, and a record B
	// writes before A's (from initialize) arrived lacks the capabilities;
	// the click below waits until B has A's.
	if !sse {
		declineUntilAsked(t, c, id)
	}

	uri := "swarm://session/" + id + "/widgets"
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := c.cs.Subscribe(ctx, &gosdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatalf("subscribing to %s: %v", uri, err)
	}
	// A subscription made on B reaches the node holding the stream by
	// replication: type (clearing first) until an update arrives.
	drain(c.updates)
	subscribed := time.Now()
	for deadline := subscribed.Add(15 * time.Second); ; {
		c.call(t, id+".username.clear", nil)
		c.call(t, id+".username.type_into", map[string]any{"text": "demo"})
		if updated(c.updates, uri, time.Second) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notifications/resources/updated for %s within 15 s of subscribing", uri)
		}
	}
	t.Logf("first update %v after subscribing", time.Since(subscribed).Round(time.Millisecond))
	c.call(t, id+".password.type_into", map[string]any{"text": "hunter2"})

	if sse {
		// mcp-go's legacy SSE session carries no server-initiated requests,
		// so an Ask cannot be put to the user there: the call is refused
		// with the machine-readable authorization_required denial.
		r := c.call(t, id+".submit.click", nil)
		if sc, _ := r.StructuredContent.(map[string]any); !r.IsError || sc["error"] != "authorization_required" {
			t.Fatalf("approval-gated click over /sse: isError=%v %s", r.IsError, resultText(r))
		}
		if strings.Contains(readModel(t, c, id), `"user":"demo"`) {
			t.Fatal("the refused click signed in")
		}
		stopAndClose(t, c, id, uri)
		return
	}

	// Cancel a call while the server waits for the user, and keep working.
	// A legacy client cancels with notifications/cancelled; the Go SDK
	// closes its whole client when that notification is refused.
	cctx, ccancel := context.WithCancel(t.Context())
	defer ccancel()
	callDone := make(chan struct{})
	c.elicit.Store(elicitFn(func(ctx context.Context, _ *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
		ccancel()
		// The user never answers while the call is in flight; once it has
		// ended, the (now stale) question is dismissed.
		select {
		case <-callDone:
		case <-ctx.Done():
		}
		return &gosdk.ElicitResult{Action: "cancel"}, nil
	}))
	// The SDK either gives up at once (an error) or, having sent
	// notifications/cancelled, returns the server's answer to it: the
	// denial of a cancelled approval. Either way the click must not run.
	r, err := c.cs.CallTool(cctx, &gosdk.CallToolParams{Name: id + ".submit.click", Arguments: map[string]any{}})
	close(callDone)
	if err == nil && (!r.IsError || !strings.Contains(resultText(r), "cancel")) {
		t.Fatalf("the cancelled call answered isError=%v %s", r.IsError, resultText(r))
	}
	if strings.Contains(readModel(t, c, id), `"user":"demo"`) {
		t.Fatal("the cancelled click signed in")
	}
	if r := c.call(t, "swarm_list", nil); r.IsError || !strings.Contains(resultText(r), id) {
		t.Fatalf("after the cancelled call, swarm_list: %s", resultText(r))
	}

	// Accepted: it runs.
	var mu sync.Mutex
	var prompt string
	c.elicit.Store(elicitFn(func(_ context.Context, req *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
		mu.Lock()
		prompt = req.Params.Message
		mu.Unlock()
		return &gosdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
	}))
	if r := c.call(t, id+".submit.click", nil); r.IsError {
		t.Fatalf("approved click: %s", resultText(r))
	}
	mu.Lock()
	if !strings.Contains(prompt, id+".submit.click") {
		t.Errorf("approval prompt %q does not name the tool", prompt)
	}
	mu.Unlock()
	if m := readModel(t, c, id); !strings.Contains(m, `"user":"demo"`) {
		t.Fatalf("model/status after the approved click: %s", m)
	}

	stopAndClose(t, c, id, uri)
}

// declineUntilAsked clicks with a declining user until the question is put.
// A legacy connection that initialized on A is known to B by replication
// (its capabilities say whether it can be asked): until then B refuses the
// Ask as authorization_required, so that answer is retried.
func declineUntilAsked(t *testing.T, c *sdkClient, id string) {
	t.Helper()
	c.elicit.Store(elicitFn(func(context.Context, *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
		return &gosdk.ElicitResult{Action: "decline"}, nil
	}))
	moved := time.Now()
	for deadline := moved.Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		before := c.asked.Load()
		r := c.call(t, id+".submit.click", nil)
		if !r.IsError {
			t.Fatalf("declined click ran: %s", resultText(r))
		}
		if c.asked.Load() != before {
			if !strings.Contains(resultText(r), "declined") {
				t.Fatalf("declined click: %s", resultText(r))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the click was never put to the user within 15 s: %s", resultText(r))
		}
	}
	t.Logf("first approval question %v after the first attempt", time.Since(moved).Round(time.Millisecond))
	if strings.Contains(readModel(t, c, id), `"user":"demo"`) {
		t.Fatal("the declined click signed in")
	}
}

// stopAndClose unsubscribes, stops the session, waits until it is gone, and
// closes the client (a DELETE for a session-based connection).
func stopAndClose(t *testing.T, c *sdkClient, id, uri string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := c.cs.Unsubscribe(ctx, &gosdk.UnsubscribeParams{URI: uri}); err != nil {
		t.Fatalf("unsubscribing: %v", err)
	}
	drain(c.toolsCh)
	if r := c.call(t, "swarm_stop", map[string]any{"id": id}); r.IsError {
		t.Fatalf("swarm_stop: %s", resultText(r))
	}
	await(t, c.toolsCh, 15*time.Second, "notifications/tools/list_changed after swarm_stop")
	// The stop is replicated, not instant: list until it shows.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := c.call(t, "swarm_list", nil)
		if !strings.Contains(resultText(r), `"`+id+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("swarm_list still shows %s 15 s after swarm_stop: %s", id, resultText(r))
		}
	}
	// Close sends DELETE for a session-based connection; the id is then refused.
	closing := time.Now()
	defer func() { t.Logf("Close took %v", time.Since(closing).Round(time.Millisecond)) }()
	if err := c.cs.Close(); err != nil && !errors.Is(err, gosdk.ErrConnectionClosed) {
		t.Errorf("closing: %v", err)
	}
}

// updated reports whether a resources/updated for uri arrives within d.
func updated(ch <-chan string, uri string, d time.Duration) bool {
	timeout := time.After(d)
	for {
		select {
		case got := <-ch:
			if got == uri {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

func readModel(t *testing.T, c *sdkClient, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := c.cs.ReadResource(ctx, &gosdk.ReadResourceParams{URI: "swarm://session/" + id + "/model/status"})
	if err != nil {
		t.Fatalf("reading model/status: %v", err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("model/status: %d contents", len(res.Contents))
	}
	return strings.ReplaceAll(res.Contents[0].Text, " ", "")
}
