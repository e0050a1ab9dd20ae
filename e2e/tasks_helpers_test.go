package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// bobToken is bob's bearer token in deploy/local-policy.yaml (alice's is
// aliceToken).
const bobToken = "bob-local-token"

// tasksExtension is the 2026-07-28 tasks extension's capability key.
const tasksExtension = "io.modelcontextprotocol/tasks"

// Wire eras a taskClient speaks.
const (
	eraLegacy = mcp.ProtocolVersion20251125 // experimental tasks, SEP-1686
	eraModern = mcp.ProtocolVersion20260728 // the tasks extension, SEP-2663
)

// newTaskCluster starts three `serve --conformance` nodes (the suite's
// task fixtures: slow_compute, confirm_delete, ...) with a fresh cluster
// key and deploy/local-policy.yaml, so alice and bob are two principals;
// node2 is the seed, so node1 can be killed and the others stay joined.
func newTaskCluster(t *testing.T) []*member {
	t.Helper()
	bin, _, args := replicaNodeArgs(t)
	var ms []*member
	for i := range 3 {
		m := newMember(t, bin, fmt.Sprintf("node%d", i+1), append(args, "--conformance")...)
		m.prod = true
		ms = append(ms, m)
	}
	ms[1].start()
	ms[0].start(ms[1].Gossip)
	ms[2].start(ms[1].Gossip)
	for _, m := range ms {
		if _, err := m.await(30*time.Second, m.seesAlive("node1", "node2", "node3")); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// taskClient speaks MCP over Streamable HTTP with hand-written JSON-RPC to
// one node as one principal, so a test sees every field and every error
// object as the server sent it. In eraModern each request carries its own
// _meta (protocol version, client capabilities) and the routing headers;
// in eraLegacy it is one initialized session.
type taskClient struct {
	t       *testing.T
	node    *member
	token   string
	era     string
	caps    map[string]any // eraModern: the clientCapabilities of every request
	session string         // eraLegacy
	nextID  int
	http    *http.Client
}

// rpcAnswer is one JSON-RPC response as the server sent it.
type rpcAnswer struct {
	Status int
	Result json.RawMessage
	// Error is the whole JSON-RPC error object (code, message, data).
	Error json.RawMessage
}

// code is the JSON-RPC error code, 0 for a result.
func (a rpcAnswer) code() int {
	var e struct {
		Code int `json:"code"`
	}
	_ = json.Unmarshal(a.Error, &e)
	return e.Code
}

func (a rpcAnswer) String() string {
	if a.Error != nil {
		return fmt.Sprintf("HTTP %d error %s", a.Status, a.Error)
	}
	return fmt.Sprintf("HTTP %d result %s", a.Status, truncate(string(a.Result), 400))
}

// modernClient is a 2026-07-28 client of node acting with token; it
// declares the tasks extension and elicitation on every request.
func modernClient(t *testing.T, node *member, token string) *taskClient {
	return &taskClient{t: t, node: node, token: token, era: eraModern,
		caps: map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{tasksExtension: map[string]any{}}},
		http: &http.Client{Timeout: 30 * time.Second}}
}

// legacyClient is a 2025-11-25 session with node acting with token.
func legacyClient(t *testing.T, node *member, token string) *taskClient {
	t.Helper()
	c := &taskClient{t: t, node: node, token: token, era: eraLegacy, http: &http.Client{Timeout: 30 * time.Second}}
	a := c.do("initialize", map[string]any{"protocolVersion": eraLegacy,
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "tasks-e2e", "version": "1"}})
	if a.Error != nil || c.session == "" {
		t.Fatalf("initialize on %s: %v (session %q)", node.Name, a, c.session)
	}
	c.notify("notifications/initialized")
	return c
}

// do sends one request and returns its answer; a transport failure fails
// the test.
func (c *taskClient) do(method string, params map[string]any) rpcAnswer {
	c.t.Helper()
	a, err := c.try(method, params)
	if err != nil {
		c.t.Fatalf("%s on %s: %v", method, c.node.Name, err)
	}
	return a
}

// routingName is the Mcp-Name a 2026-07-28 request carries: the tool's
// name, or the task's id on the task methods.
func routingName(method string, params map[string]any) string {
	switch method {
	case "tools/call", "prompts/get":
		s, _ := params["name"].(string)
		return s
	case "resources/read":
		s, _ := params["uri"].(string)
		return s
	case "tasks/get", "tasks/update", "tasks/cancel":
		s, _ := params["taskId"].(string)
		return s
	}
	return ""
}

// try is do returning a transport failure.
func (c *taskClient) try(method string, params map[string]any) (rpcAnswer, error) {
	return c.send(method, params, nil)
}

// send posts one request; headers, when given, replace the routing
// headers a 2026-07-28 request would carry.
func (c *taskClient) send(method string, params map[string]any, headers map[string]string) (rpcAnswer, error) {
	c.nextID++
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	if c.era == eraModern {
		meta, _ := p["_meta"].(map[string]any)
		m := map[string]any{mcp.MetaKeyProtocolVersion: eraModern, mcp.MetaKeyClientCapabilities: c.caps}
		for k, v := range meta {
			m[k] = v
		}
		p["_meta"] = m
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": p})
	if err != nil {
		return rpcAnswer{}, err
	}
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.node.BaseURL()+"/mcp", bytes.NewReader(body))
	if err != nil {
		return rpcAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	switch {
	case c.era == eraModern:
		req.Header.Set(mcp.HeaderProtocolVersion, eraModern)
		if headers == nil {
			headers = map[string]string{"Mcp-Method": method}
			if n := routingName(method, p); n != "" {
				headers["Mcp-Name"] = n
			}
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
	case c.session != "":
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set(mcp.HeaderProtocolVersion, eraLegacy)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return rpcAnswer{}, err
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && method == "initialize" {
		c.session = sid
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return rpcAnswer{}, fmt.Errorf("reading the answer: %w", err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The answer is the stream's event carrying our id; others are
		// notifications.
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		raw = nil
		for sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			var probe struct {
				ID json.RawMessage `json:"id"`
			}
			if ok && json.Unmarshal([]byte(d), &probe) == nil && string(probe.ID) == fmt.Sprint(c.nextID) {
				raw = []byte(d)
			}
		}
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &msg); err != nil {
		return rpcAnswer{}, fmt.Errorf("HTTP %d, not a JSON-RPC answer %q: %w", resp.StatusCode, truncate(string(raw), 300), err)
	}
	return rpcAnswer{Status: resp.StatusCode, Result: msg.Result, Error: msg.Error}, nil
}

// notify sends a notification (eraLegacy).
func (c *taskClient) notify(method string) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	req, _ := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.node.BaseURL()+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set(mcp.HeaderProtocolVersion, eraLegacy)
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s on %s: %v", method, c.node.Name, err)
	}
	_ = resp.Body.Close()
}

// result decodes a's result into v, failing the test on an error answer.
func (c *taskClient) result(what string, a rpcAnswer, v any) {
	c.t.Helper()
	if a.Error != nil || a.Result == nil {
		c.t.Fatalf("%s on %s: %v", what, c.node.Name, a)
	}
	if err := json.Unmarshal(a.Result, v); err != nil {
		c.t.Fatalf("%s on %s: decoding %s: %v", what, c.node.Name, a.Result, err)
	}
}

// wireTask is a task as either era shows it: the 2026-07-28 CreateTaskResult
// and DetailedTask (flat, ttlMs, result/error/inputRequests inlined) or the
// 2025-11-25 Task (ttl, pollInterval).
type wireTask struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          *int64                     `json:"ttlMs"`
	PollIntervalMs *int64                     `json:"pollIntervalMs"`
	TTL            *int64                     `json:"ttl"`
	Result         *mcp.CallToolResult        `json:"result"`
	Error          *taskError                 `json:"error"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
}

// taskError is the JSON-RPC error a failed task carries.
type taskError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// call calls tool with args; in eraLegacy it asks for a task (params.task)
// when ttl is positive.
func (c *taskClient) call(tool string, args map[string]any, ttl time.Duration) rpcAnswer {
	c.t.Helper()
	p := map[string]any{"name": tool, "arguments": args}
	if c.era == eraLegacy && ttl > 0 {
		p["task"] = map[string]any{"ttl": ttl.Milliseconds()}
	}
	return c.do("tools/call", p)
}

// startTask calls tool and returns the task it created.
func (c *taskClient) startTask(tool string, args map[string]any) wireTask {
	c.t.Helper()
	a := c.call(tool, args, 10*time.Minute)
	if c.era == eraLegacy {
		var created struct {
			Task wireTask `json:"task"`
		}
		c.result("tools/call "+tool, a, &created)
		if created.Task.TaskID == "" {
			c.t.Fatalf("tools/call %s on %s created no task: %v", tool, c.node.Name, a)
		}
		return created.Task
	}
	var created wireTask
	c.result("tools/call "+tool, a, &created)
	if created.ResultType != "task" || created.TaskID == "" {
		c.t.Fatalf("tools/call %s on %s created no task: %v", tool, c.node.Name, a)
	}
	return created
}

// get is tasks/get of id.
func (c *taskClient) get(id string) (wireTask, rpcAnswer) {
	c.t.Helper()
	a := c.do("tasks/get", map[string]any{"taskId": id})
	var w wireTask
	if a.Error == nil {
		c.result("tasks/get", a, &w)
	}
	return w, a
}

// mustGet is get failing the test on an error answer.
func (c *taskClient) mustGet(id string) wireTask {
	c.t.Helper()
	w, a := c.get(id)
	if a.Error != nil {
		c.t.Fatalf("tasks/get %s on %s: %v", id, c.node.Name, a)
	}
	if w.TaskID != id {
		c.t.Fatalf("tasks/get %s on %s answered task %q", id, c.node.Name, w.TaskID)
	}
	return w
}

// awaitTask polls id through the clients in turn (a different node each
// poll) until cond holds for an answer, and returns it; every answer must
// be the task, never an error.
func awaitTask(t *testing.T, d time.Duration, id, what string, cond func(wireTask) bool, clients ...*taskClient) wireTask {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var last wireTask
	for i := 0; ; i++ {
		c := clients[i%len(clients)]
		w := c.mustGet(id)
		if cond(w) {
			return w
		}
		last = w
		select {
		case <-ctx.Done():
			t.Fatalf("task %s: not %s within %v; last seen on %s: %+v", id, what, d, c.node.Name, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func statusIs(s string) func(wireTask) bool { return func(w wireTask) bool { return w.Status == s } }
