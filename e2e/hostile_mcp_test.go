package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawMCP speaks Streamable HTTP with hand-written JSON-RPC, so a test can
// send what no SDK would.
type rawMCP struct {
	t       *testing.T
	url     string
	session string
	nextID  int
}

// rpcReply is one JSON-RPC answer, with the HTTP status it came with.
type rpcReply struct {
	Status int
	Result json.RawMessage
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
}

// post sends one request (or a notification when method has no id) and
// returns its answer, read from a JSON body or an SSE stream.
func (c *rawMCP) post(method string, params any, notify bool) rpcReply {
	c.t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	if !notify {
		c.nextID++
		msg["id"] = c.nextID
	}
	body, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && method == "initialize" {
		c.session = sid
	}
	out := rpcReply{Status: resp.StatusCode}
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id":`) {
				raw = []byte(d)
			}
		}
	}
	if len(raw) > 0 && !notify {
		if err := json.Unmarshal(raw, &out); err != nil {
			c.t.Fatalf("%s answered %d %q: %v", method, resp.StatusCode, truncate(string(raw), 200), err)
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func initParams(clientInfo any) map[string]any {
	return map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": clientInfo}
}

// connectRaw initializes a connection.
func connectRaw(t *testing.T, n *runningNode) *rawMCP {
	t.Helper()
	c := &rawMCP{t: t, url: n.MCPURL()}
	if r := c.post("initialize", initParams(map[string]any{"name": "hostile", "version": "1"}), false); r.Error != nil || c.session == "" {
		t.Fatalf("initialize: %d %+v", r.Status, r.Error)
	}
	c.post("notifications/initialized", nil, true)
	return c
}

// callTool calls a tool and returns its text and whether it is an error.
func (c *rawMCP) callTool(name string, args map[string]any) (string, bool) {
	c.t.Helper()
	r := c.post("tools/call", map[string]any{"name": name, "arguments": args}, false)
	if r.Error != nil {
		return r.Error.Message, true
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		c.t.Fatalf("tools/call %s: %v", name, err)
	}
	var b strings.Builder
	for _, x := range res.Content {
		b.WriteString(x.Text)
	}
	return b.String(), res.IsError
}

// Issue #13: `initialize` stored whatever clientInfo and capabilities a
// client sent (~1 MiB each) on every node for 7 days. Oversized facts are
// now refused with an error naming the limit, and nothing is stored.
func TestHostileInitializeWithHugeClientInfoIsRefused(t *testing.T) {
	n := startNode(t, buildNode(t))
	base := heapInuse(t, n)
	c := &rawMCP{t: t, url: n.MCPURL()}
	huge := map[string]any{"name": "hostile", "version": "1", "title": strings.Repeat("x", 1<<20)}
	for i := range 20 {
		r := c.post("initialize", initParams(huge), false)
		if r.Error == nil || !strings.Contains(r.Error.Message, "limits.client_facts_bytes") {
			t.Fatalf("initialize %d with 1 MiB clientInfo: status %d, error %+v; want a refusal naming limits.client_facts_bytes", i, r.Status, r.Error)
		}
		if c.session != "" {
			t.Fatalf("a refused initialize minted session %q", c.session)
		}
	}
	growth := heapInuse(t, n) - base
	t.Logf("20 initializes of 1 MiB refused; node heap in use grew %d MiB", growth/mib)
	// Loose: the refused bodies are garbage the GC may not have swept yet.
	if growth > 48*mib {
		t.Errorf("node heap grew %d MiB after refusing every oversized initialize; want < 48 MiB", growth/mib)
	}
	// A normal client still connects.
	connectRaw(t, n)
}

// Initializes are rate-limited per principal (here: per client IP, the
// policy authenticating nobody), default 120 a minute. Under --dev,
// loopback clients are exempt: every local client is 127.0.0.1 there.
func TestHostileInitializeFloodIsRateLimited(t *testing.T) {
	bin := buildNode(t)
	dev := startNode(t, bin)
	for i := range 200 {
		c := &rawMCP{t: t, url: dev.MCPURL()}
		if r := c.post("initialize", initParams(map[string]any{"name": "dev", "version": "1"}), false); r.Error != nil || r.Status != http.StatusOK {
			t.Fatalf("--dev initialize %d from loopback: status %d, error %+v; want loopback exempt", i, r.Status, r.Error)
		}
	}
	n := startPolicyNode(t, bin, "initflood")
	start := time.Now()
	ok, limited := 0, 0
	var lastErr string
	for range 200 {
		c := &rawMCP{t: t, url: n.MCPURL()}
		r := c.post("initialize", initParams(map[string]any{"name": "flood", "version": "1"}), false)
		switch {
		case r.Error == nil && r.Status == http.StatusOK:
			ok++
		case r.Status == http.StatusTooManyRequests:
			limited++
			lastErr = r.Error.Message
		default:
			t.Fatalf("initialize: status %d, error %+v", r.Status, r.Error)
		}
	}
	elapsed := time.Since(start)
	t.Logf("200 initializes in %s: %d accepted, %d refused (%q)", elapsed.Round(time.Millisecond), ok, limited, lastErr)
	// A burst of 120, refilled at 2 a second while the loop ran.
	if allowed := 120 + int(2*elapsed.Seconds()) + 1; ok > allowed {
		t.Errorf("%d initializes accepted in %s; want at most %d", ok, elapsed, allowed)
	}
	if limited == 0 || !strings.Contains(lastErr, "limits.initializes_per_minute") {
		t.Errorf("no refusal naming limits.initializes_per_minute (last: %q)", lastErr)
	}
}

// Issue #13: typing 4 MB into a todo draft (and adding it, 25 times) grew
// a node to 3.45 GiB. The text is now refused with an error naming the
// limit, through the real binary, and the node's heap does not grow.
func TestHostileTodoHugeTextIsRefused(t *testing.T) {
	n := startNode(t, buildNode(t))
	c := connectRaw(t, n)
	if text, isErr := c.callTool("swarm_start", map[string]any{"app": "todo", "id": "big"}); isErr {
		t.Fatalf("swarm_start: %s", text)
	}
	base := heapInuse(t, n)
	big := strings.Repeat("x", 4_000_000)
	for i := range 5 {
		text, isErr := c.callTool("big.new.type_into", map[string]any{"text": big})
		if !isErr || !strings.Contains(text, "widget-text-bytes") {
			t.Fatalf("type_into %d of 4 MB: error=%v %q; want a refusal naming widget-text-bytes", i, isErr, truncate(text, 200))
		}
		c.callTool("big.add.click", nil) // refused too: the draft is empty
	}
	growth := heapInuse(t, n) - base
	t.Logf("5 × 4 MB typed into a todo draft, refused; node heap in use grew %d MiB", growth/mib)
	// Loose: the refused 4 MB bodies are garbage the GC may not have swept.
	if growth > 96*mib {
		t.Errorf("node heap grew %d MiB; want < 96 MiB", growth/mib)
	}
	if text, isErr := c.callTool("big.new.type_into", map[string]any{"text": "fine"}); isErr {
		t.Errorf("a normal type_into after the refusals: %s", text)
	}
}
