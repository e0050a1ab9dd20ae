package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/poll"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp/task"
	"github.com/mcpswarm/mcpswarm/mcp/task/tasktest"
	"github.com/mcpswarm/mcpswarm/session"
)

// taskTool is a test tool with the given execution.taskSupport.
func taskTool(name string, support mcp.TaskSupport) mcp.Tool {
	t := mcp.NewTool(name)
	if support != "" {
		t.Execution = &mcp.ToolExecution{TaskSupport: support}
	}
	return t
}

// taskFront is a front authenticating alice and carol by token, with tools
// that block until cancelled (t_slow, optional), answer at once (t_quick,
// required; t_sync, optional; t_plain, forbidden), ask their client
// (t_ask, optional) or panic (t_panic, required); mut then changes the
// config.
func taskFront(t *testing.T, mut ...func(*Config)) *testEnv {
	t.Helper()
	return newEnv(t, func(c *Config, _ *session.Registry) {
		c.Guard = tokenGuard(t)
		defer func() {
			for _, f := range mut {
				f(c)
			}
		}()
		c.Extend = func(e *Extension) {
			quick := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("quick"), nil
			}
			e.AddTool(taskTool("t_slow", mcp.TaskSupportOptional), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				<-ctx.Done()
				return nil, context.Cause(ctx)
			})
			e.AddTool(taskTool("t_quick", mcp.TaskSupportRequired), quick)
			e.AddTool(taskTool("t_sync", mcp.TaskSupportOptional), quick)
			e.AddTool(taskTool("t_plain", ""), quick)
			e.AddTool(taskTool("t_panic", mcp.TaskSupportRequired), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				panic("kaboom")
			})
			e.AddTool(taskTool("t_ask", mcp.TaskSupportOptional), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				c, _ := ClientFrom(ctx)
				res, err := c.Elicit(ctx, mcp.ElicitationParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}})
				if err != nil {
					return nil, err
				}
				return mcp.NewToolResultText(fmt.Sprint("hello ", res.Content.(map[string]any)["name"])), nil
			})
		}
	})
}

var taskIDs atomic.Int64

// taskCall posts a 2026-07-28 request as token's principal; declare
// adds the tasks extension to its _meta clientCapabilities, name is the
// Mcp-Name header ("" for none). It returns the HTTP status and the
// decoded answer.
func (e *testEnv) taskCall(t *testing.T, token, method string, params map[string]any, declare bool, name string) (int, map[string]any) {
	t.Helper()
	caps := map[string]any{}
	if declare {
		caps["extensions"] = map[string]any{task.ExtensionName: map[string]any{}}
	}
	p := map[string]any{"_meta": map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728, mcp.MetaKeyClientCapabilities: caps}}
	for k, v := range params {
		p[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": taskIDs.Add(1), "method": method, "params": p})
	h := modernHeaders(method)
	h["Authorization"] = "Bearer " + token
	if name != "" {
		h["Mcp-Name"] = name
	}
	status, raw := e.rawPost(t, string(body), h)
	if i := strings.Index(raw, "data: "); i >= 0 && strings.HasPrefix(strings.TrimSpace(raw), "event:") {
		raw = strings.TrimSpace(strings.SplitN(raw[i+6:], "\n", 2)[0])
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("%s: not JSON: %q", method, raw)
	}
	return status, out
}

// startTask calls tool as a 2026-07-28 client declaring tasks and returns
// the CreateTaskResult.
func (e *testEnv) startTask(t *testing.T, token, tool string) map[string]any {
	t.Helper()
	status, out := e.taskCall(t, token, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}}, true, tool)
	res, _ := out["result"].(map[string]any)
	if status != http.StatusOK || res["resultType"] != "task" || res["taskId"] == "" {
		t.Fatalf("tools/call %s: HTTP %d %v, want a CreateTaskResult", tool, status, out)
	}
	if _, wrapped := res["task"]; wrapped {
		t.Fatalf("the CreateTaskResult has a task wrapper: %v", res)
	}
	return res
}

// getTask is tasks/get as token's principal, Mcp-Name set.
func (e *testEnv) getTask(t *testing.T, token, id string) map[string]any {
	t.Helper()
	status, out := e.taskCall(t, token, "tasks/get", map[string]any{"taskId": id}, true, id)
	res, _ := out["result"].(map[string]any)
	if status != http.StatusOK || res == nil {
		t.Fatalf("tasks/get: HTTP %d %v", status, out)
	}
	return res
}

func awaitStatus(t *testing.T, e *testEnv, token, id, want string) map[string]any {
	t.Helper()
	var res map[string]any
	poll.Until(t, 10*time.Second, "task "+id+" is "+want, func() error {
		if res = e.getTask(t, token, id); res["status"] != want {
			return fmt.Errorf("it is %v", res["status"])
		}
		return nil
	})
	return res
}

func TestAModernTaskIsCreatedPolledAndCancelled(t *testing.T) {
	e := taskFront(t)
	created := e.startTask(t, "alice-token", "t_slow")
	id := created["taskId"].(string)
	if created["status"] != "working" || created["ttlMs"] == nil || created["createdAt"] == nil {
		t.Fatalf("CreateTaskResult %v", created)
	}
	if got := e.getTask(t, "alice-token", id); got["status"] != "working" || got["resultType"] != "complete" || got["result"] != nil {
		t.Fatalf("tasks/get of a working task: %v", got)
	}
	for range 2 { // a terminal task's cancel is the same ack
		status, out := e.taskCall(t, "alice-token", "tasks/cancel", map[string]any{"taskId": id}, true, id)
		res, _ := out["result"].(map[string]any)
		delete(res, "_meta") // the server's identity, on every 2026-07-28 result
		if b, _ := json.Marshal(res); status != http.StatusOK || string(b) != `{"resultType":"complete"}` {
			t.Fatalf("tasks/cancel: HTTP %d %s, want an empty ack", status, b)
		}
	}
	if got := e.getTask(t, "alice-token", id); got["status"] != "cancelled" {
		t.Fatalf("after tasks/cancel: %v", got["status"])
	}
}

func TestWithinTheGraceARequiredToolIsATaskAndAnOptionalOneAnswers(t *testing.T) {
	e := taskFront(t)
	created := e.startTask(t, "alice-token", "t_quick")
	if created["status"] != "completed" {
		t.Fatalf("a required tool that answered within the grace: %v, want a task created completed", created)
	}
	got := e.getTask(t, "alice-token", created["taskId"].(string))
	if res, _ := got["result"].(map[string]any); res == nil || !strings.Contains(fmt.Sprint(res["content"]), "quick") {
		t.Fatalf("tasks/get inlines %v", got)
	}
	_, out := e.taskCall(t, "alice-token", "tools/call", map[string]any{"name": "t_sync"}, true, "t_sync")
	if res, _ := out["result"].(map[string]any); res["resultType"] != "complete" || res["taskId"] != nil {
		t.Fatalf("an optional tool that answered within the grace: %v, want its result", out)
	}
	_, out = e.taskCall(t, "alice-token", "tools/call", map[string]any{"name": "t_plain", "task": map[string]any{"ttl": 1000}}, true, "t_plain")
	if res, _ := out["result"].(map[string]any); res["resultType"] != "complete" {
		t.Fatalf("a v1 task param promoted a forbidden tool: %v", out)
	}
	panicked := e.startTask(t, "alice-token", "t_panic")
	got = awaitStatus(t, e, "alice-token", panicked["taskId"].(string), "failed")
	if errObj, _ := got["error"].(map[string]any); errObj == nil || !strings.Contains(fmt.Sprint(errObj["message"]), "kaboom") || got["result"] != nil {
		t.Fatalf("a panicking handler's task: %v", got)
	}
}

func TestTasksNeedTheExtensionOnTheModernWire(t *testing.T) {
	e := taskFront(t)
	status, out := e.taskCall(t, "alice-token", "tools/call", map[string]any{"name": "t_sync"}, false, "t_sync")
	if res, _ := out["result"].(map[string]any); status != http.StatusOK || res["taskId"] != nil {
		t.Fatalf("an optional tool without the extension: HTTP %d %v, want its plain result", status, out)
	}
	for _, c := range []struct{ method, name string }{{"tools/call", "t_quick"}, {"tasks/get", "x"}, {"tasks/update", "x"}, {"tasks/cancel", "x"}} {
		params := map[string]any{"name": c.name, "taskId": c.name}
		status, out := e.taskCall(t, "alice-token", c.method, params, false, c.name)
		errObj, _ := out["error"].(map[string]any)
		data, _ := errObj["data"].(map[string]any)
		req, _ := data["requiredCapabilities"].(map[string]any)
		ext, _ := req["extensions"].(map[string]any)
		if status != http.StatusBadRequest || errObj["code"] != float64(mcp.MISSING_REQUIRED_CLIENT_CAPABILITY) || ext[task.ExtensionName] == nil {
			t.Errorf("%s without the extension: HTTP %d %v, want 400 -32021 naming it", c.method, status, out)
		}
	}
	for _, m := range []string{"tasks/result", "tasks/list"} {
		status, out := e.taskCall(t, "alice-token", m, map[string]any{"taskId": "x"}, true, "x")
		if errObj, _ := out["error"].(map[string]any); status != http.StatusNotFound || errObj["code"] != float64(codeMethodNotFound) {
			t.Errorf("%s on 2026-07-28: HTTP %d %v, want 404 -32601", m, status, out)
		}
	}
}

func TestMcpNameMustBeTheTaskID(t *testing.T) {
	e := taskFront(t)
	id := e.startTask(t, "alice-token", "t_slow")["taskId"].(string)
	for _, name := range []string{"", "another"} {
		for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			status, out := e.taskCall(t, "alice-token", m, map[string]any{"taskId": id, "inputResponses": map[string]any{}}, true, name)
			if errObj, _ := out["error"].(map[string]any); status != http.StatusBadRequest || errObj["code"] != float64(mcp.HEADER_MISMATCH) {
				t.Errorf("%s with Mcp-Name %q: HTTP %d %v, want 400 -32020", m, name, status, out)
			}
		}
	}
	if got := e.getTask(t, "alice-token", id); got["status"] != "working" {
		t.Fatalf("a refused cancel cancelled the task: %v", got["status"])
	}
}

func TestAnElicitInsideATaskIsAnsweredByTasksUpdate(t *testing.T) {
	e := taskFront(t)
	id := e.startTask(t, "alice-token", "t_ask")["taskId"].(string)
	got := awaitStatus(t, e, "alice-token", id, "input_required")
	reqs, _ := got["inputRequests"].(map[string]any)
	var key string
	for k, v := range reqs {
		if q, _ := v.(map[string]any); q["method"] == "elicitation/create" {
			key = k
		}
	}
	if len(reqs) != 1 || key == "" {
		t.Fatalf("inputRequests %v, want one elicitation", reqs)
	}
	responses := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": "ada"}}}
	status, out := e.taskCall(t, "alice-token", "tasks/update", map[string]any{"taskId": id, "inputResponses": responses}, true, id)
	res, _ := out["result"].(map[string]any)
	delete(res, "_meta")
	if b, _ := json.Marshal(res); status != http.StatusOK || string(b) != `{"resultType":"complete"}` {
		t.Fatalf("tasks/update: HTTP %d %s, want an ack", status, b)
	}
	got = awaitStatus(t, e, "alice-token", id, "completed")
	if !strings.Contains(fmt.Sprint(got["result"]), "hello ada") {
		t.Fatalf("completed with %v", got["result"])
	}
}

// legacyRequest sends a 2025-11-25 request on c's connection.
func legacyRequest(t *testing.T, c *client.Client, method string, params any) *transport.JSONRPCResponse {
	t.Helper()
	resp, err := c.GetTransport().SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
		ID: mcp.NewRequestId(taskIDs.Add(1)), Method: method, Params: params})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp
}

func TestALegacyTaskIsCreatedAndItsResultRead(t *testing.T) {
	e := taskFront(t)
	c, _ := e.connect(t, clientOpts{headers: bearer("alice-token")})
	resp := legacyRequest(t, c, "tools/call", map[string]any{"name": "t_quick", "task": map[string]any{"ttl": 60000}})
	var created mcp.CreateTaskResult
	if resp.Error != nil || json.Unmarshal(resp.Result, &created) != nil || created.Task.TaskId == "" {
		t.Fatalf("tools/call with params.task: %s %v", resp.Result, resp.Error)
	}
	if ttl := created.Task.TTL; ttl == nil || *ttl != 60000 {
		t.Fatalf("ttl %v, want the 60000 asked", ttl)
	}
	res := legacyRequest(t, c, "tasks/result", map[string]any{"taskId": created.Task.TaskId})
	if res.Error != nil || !strings.Contains(string(res.Result), "quick") || !strings.Contains(string(res.Result), mcp.RelatedTaskMetaKey) {
		t.Fatalf("tasks/result: %s %v", res.Result, res.Error)
	}
	if r := legacyRequest(t, c, "tasks/cancel", map[string]any{"taskId": created.Task.TaskId}); r.Error == nil || r.Error.Code != codeInvalidParams {
		t.Fatalf("tasks/cancel of a completed task: %s %v, want -32602", r.Result, r.Error)
	}
	list := legacyRequest(t, c, "tasks/list", map[string]any{})
	if !strings.Contains(string(list.Result), created.Task.TaskId) {
		t.Fatalf("tasks/list: %s", list.Result)
	}
	if r := legacyRequest(t, c, "tools/call", map[string]any{"name": "t_quick"}); r.Error == nil || r.Error.Code != codeMethodNotFound {
		t.Fatalf("a required tool without params.task: %v, want -32601", r.Error)
	}
	if r := legacyRequest(t, c, "tools/call", map[string]any{"name": "t_plain", "task": map[string]any{}}); r.Error == nil || r.Error.Code != codeMethodNotFound {
		t.Fatalf("a forbidden tool with params.task: %v, want -32601", r.Error)
	}
}

func TestTheCapabilitiesNameTasksPerEra(t *testing.T) {
	e := taskFront(t)
	status, out := e.taskCall(t, "alice-token", "server/discover", nil, false, "")
	caps, _ := out["result"].(map[string]any)["capabilities"].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	if status != http.StatusOK || ext[task.ExtensionName] == nil || caps["tasks"] != nil {
		t.Fatalf("2026-07-28 capabilities %v: want the extension and no tasks capability", caps)
	}
	c, _ := e.connect(t, clientOpts{headers: bearer("alice-token")})
	init := c.GetServerCapabilities()
	if init.Tasks == nil || init.Tasks.List == nil || init.Tasks.Cancel == nil || init.Tasks.Requests == nil || init.Extensions[task.ExtensionName] != nil {
		t.Fatalf("2025-11-25 capabilities %+v: want the tasks capability and no extension", init)
	}
}

// TestAnotherPrincipalsHandleAnswersAsAnUnknownOne: carol's task id given
// by alice gets, on every task method of both wires, exactly the answer a
// nonexistent id gets (status, code, message but for the id).
func TestAnotherPrincipalsHandleAnswersAsAnUnknownOne(t *testing.T) {
	e := taskFront(t)
	carols := e.startTask(t, "carol-token", "t_slow")["taskId"].(string)
	unknown := task.NewID()
	same := func(what string, a, b any, aID string) {
		t.Helper()
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if strings.ReplaceAll(string(ja), aID, "ID") != strings.ReplaceAll(string(jb), unknown, "ID") || !strings.Contains(string(ja), `"code":-32602`) {
			t.Errorf("%s: carol's handle answers %s, an unknown one %s", what, ja, jb)
		}
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		ask := func(id string) any {
			status, out := e.taskCall(t, "alice-token", m, map[string]any{"taskId": id, "inputResponses": map[string]any{}}, true, id)
			delete(out, "id")
			return []any{status, out}
		}
		same(m, ask(carols), ask(unknown), carols)
	}
	c, _ := e.connect(t, clientOpts{headers: bearer("alice-token")})
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/result"} {
		ask := func(id string) any { return legacyRequest(t, c, m, map[string]any{"taskId": id}).Error }
		same("2025-11-25 "+m, ask(carols), ask(unknown), carols)
	}
	if list := legacyRequest(t, c, "tasks/list", map[string]any{}); strings.Contains(string(list.Result), carols) {
		t.Errorf("alice's tasks/list shows carol's task: %s", list.Result)
	}
	if got := e.getTask(t, "carol-token", carols); got["status"] != "working" {
		t.Errorf("alice's requests changed carol's task: %v", got["status"])
	}
}

func TestTaskStatusIsPushedToItsPrincipal(t *testing.T) {
	e := taskFront(t)
	alice, an := e.connect(t, clientOpts{modern: true, headers: bearer("alice-token")})
	carol, cn := e.connect(t, clientOpts{modern: true, headers: bearer("carol-token")})
	const ack = "notifications/subscriptions/acknowledged"
	for _, c := range []*client.Client{alice, carol} {
		stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ToolsListChanged: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	an.waitFor(t, ack, 1)
	cn.waitFor(t, ack, 1)
	id := e.startTask(t, "alice-token", "t_slow")["taskId"].(string)
	e.taskCall(t, "alice-token", "tasks/cancel", map[string]any{"taskId": id}, true, id)
	poll.Until(t, 10*time.Second, "alice's listen stream gets the cancelled push", func() error {
		if !pushed(an.all(task.NotificationStatus), id, "cancelled") {
			return fmt.Errorf("it got %v", an.all(task.NotificationStatus))
		}
		return nil
	})
	if n := cn.count(task.NotificationStatus); n != 0 {
		t.Fatalf("carol's listen stream got %d pushes of alice's task", n)
	}

	legacy, ln := e.connect(t, clientOpts{listen: true, headers: bearer("alice-token")})
	// The push goes to the GET stream, not on the call's own POST.
	poll.True(t, 10*time.Second, "the legacy client's GET stream is held", func() bool { return e.srv.HoldsStream(legacy.GetSessionId()) })
	resp := legacyRequest(t, legacy, "tools/call", map[string]any{"name": "t_quick", "task": map[string]any{}})
	var created mcp.CreateTaskResult
	if err := json.Unmarshal(resp.Result, &created); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the creating connection gets the completed push", func() error {
		if !pushed(ln.all(task.LegacyNotificationStatus), created.Task.TaskId, "completed") {
			return fmt.Errorf("it got %v", ln.all(task.LegacyNotificationStatus))
		}
		return nil
	})
}

// pushed reports whether ns hold a push of task id at status.
func pushed(ns []mcp.JSONRPCNotification, id, status string) bool {
	for _, n := range ns {
		if f := n.Params.AdditionalFields; f["taskId"] == id && f["status"] == status {
			return true
		}
	}
	return false
}

func TestTaskLimitsRefuseClearly(t *testing.T) {
	e := taskFront(t, func(c *Config) { c.Tasks = task.Limits{PerPrincipal: 1} })
	e.startTask(t, "alice-token", "t_slow")
	status, out := e.taskCall(t, "alice-token", "tools/call", map[string]any{"name": "t_slow"}, true, "t_slow")
	errObj, _ := out["error"].(map[string]any)
	if status != http.StatusBadRequest || errObj["code"] != float64(codeInvalidRequest) || !strings.Contains(fmt.Sprint(errObj["message"]), "--task-per-principal") {
		t.Fatalf("a task past the limit: HTTP %d %v", status, out)
	}
	e.startTask(t, "carol-token", "t_slow") // carol holds none
}

// TestATaskIsAnsweredAndCancelledOnAnotherNode: two fronts over one task
// table (tasktest, standing in for the replicated one): a task started on
// n1 is read on n2, cancelled from n2, and the handler on n1 ends.
func TestATaskIsAnsweredAndCancelledOnAnotherNode(t *testing.T) {
	table := tasktest.NewTable()
	ended := make(chan error, 1)
	fronts := make([]*testEnv, 2)
	for i, node := range []string{"n1", "n2"} {
		fronts[i] = taskFront(t, func(c *Config) {
			c.Node, c.Cluster = node, &testCluster{tasks: table}
			ext := c.Extend
			c.Extend = func(e *Extension) {
				ext(e)
				e.AddTool(taskTool("t_wait", mcp.TaskSupportRequired), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					<-ctx.Done()
					ended <- context.Cause(ctx)
					return nil, context.Cause(ctx)
				})
			}
		})
	}
	n1, n2 := fronts[0], fronts[1]
	id := n1.startTask(t, "alice-token", "t_wait")["taskId"].(string)
	if got := n2.getTask(t, "alice-token", id); got["status"] != "working" {
		t.Fatalf("n2 reads %v", got)
	}
	if status, out := n2.taskCall(t, "alice-token", "tasks/cancel", map[string]any{"taskId": id}, true, id); status != http.StatusOK {
		t.Fatalf("tasks/cancel on n2: HTTP %d %v", status, out)
	}
	if c := <-ended; !errors.Is(c, task.ErrCancelled) {
		t.Fatalf("the handler on n1 ended with %v", c)
	}
	awaitStatus(t, n1, "alice-token", id, "cancelled")
	if r, _ := table.Raw(id); r.Node != "n1" {
		t.Fatalf("the task ran on %q", r.Node)
	}
}

// TestAPolicyMarkOverridesTheToolsOwnTaskSupport: a tools rule's task mark
// is what tools/list shows and what tools/call applies — a tool that
// declares nothing runs only as a task once marked required, and an
// optional one never becomes a task once marked forbidden.
func TestAPolicyMarkOverridesTheToolsOwnTaskSupport(t *testing.T) {
	sum := sha256.Sum256([]byte("alice-token"))
	p, err := authz.ParsePolicy("marks.yaml", []byte(fmt.Sprintf(`name: marks
tokens:
  - sha256: %q
    subject: alice
tools:
  - match: {tools: [t_plain]}
    allow: true
    task: required
  - match: {tools: [t_sync]}
    allow: true
    task: forbidden
  - allow: true
reads:
  - allow: true
`, hex.EncodeToString(sum[:]))))
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Guard()
	if err != nil {
		t.Fatal(err)
	}
	e := taskFront(t, func(c *Config) { c.Guard = g })

	_, out := e.taskCall(t, "alice-token", "tools/list", nil, true, "")
	res, _ := out["result"].(map[string]any)
	tools, _ := res["tools"].([]any)
	listed := map[string]any{}
	for _, tl := range tools {
		m := tl.(map[string]any)
		ex, _ := m["execution"].(map[string]any)
		listed[m["name"].(string)] = ex["taskSupport"]
	}
	if listed["t_plain"] != "required" || listed["t_sync"] != "forbidden" {
		t.Fatalf("tools/list shows t_plain %v and t_sync %v, want the policy's marks required and forbidden", listed["t_plain"], listed["t_sync"])
	}
	e.startTask(t, "alice-token", "t_plain")
	status, out := e.taskCall(t, "alice-token", "tools/call", map[string]any{"name": "t_plain"}, false, "t_plain")
	if errObj, _ := out["error"].(map[string]any); status != http.StatusBadRequest || errObj["code"] != float64(mcp.MISSING_REQUIRED_CLIENT_CAPABILITY) {
		t.Errorf("a tool the policy marks required, without the extension: HTTP %d %v, want 400 -32021", status, out)
	}
	status, out = e.taskCall(t, "alice-token", "tools/call", map[string]any{"name": "t_sync"}, true, "t_sync")
	if res, _ := out["result"].(map[string]any); status != http.StatusOK || res["taskId"] != nil || res["content"] == nil {
		t.Errorf("an optional tool the policy marks forbidden: HTTP %d %v, want its plain result", status, out)
	}
}
