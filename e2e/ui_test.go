package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The test principals' tokens (the policy stores their SHA-256).
const (
	uiAliceToken = "ui-alice-token"
	uiBobToken   = "ui-bob-token"
)

// uiCluster is three real nodes sharing a key and a policy: node2 is the
// seed, node1 and node3 join it (so node1 can be killed and rejoin).
type uiCluster struct {
	n1, n2, n3   *swarmProc
	bin, keyFile string
}

func startUICluster(t *testing.T) uiCluster {
	t.Helper()
	bin := buildNode(t)
	dir := t.TempDir()
	key, err := runOut(bin, "keygen")
	if err != nil {
		t.Fatalf("keygen: %v", err)
	}
	keyFile := filepath.Join(dir, "cluster.key")
	policy := filepath.Join(dir, "policy.yaml")
	doc := fmt.Sprintf(`name: ui-test
tokens:
  - {sha256: %q, subject: alice}
  - {sha256: %q, subject: bob}
tools:
  - match: {tools: ["ask*.submit.click"]}
    ask: "{principal} wants to run {tool}"
  - allow: true
reads:
  - allow: true
`, sha256Hex(uiAliceToken), sha256Hex(uiBobToken))
	for f, b := range map[string]string{keyFile: key, policy: doc} {
		if err := os.WriteFile(f, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := uiCluster{bin: bin, keyFile: keyFile}
	c.n2 = startSwarmProc(t, bin, "node2", filepath.Join(dir, "node2"), keyFile, policy, "")
	c.n1 = startSwarmProc(t, bin, "node1", filepath.Join(dir, "node1"), keyFile, policy, c.n2.GossipAt)
	c.n3 = startSwarmProc(t, bin, "node3", filepath.Join(dir, "node3"), keyFile, policy, c.n2.GossipAt)
	return c
}

func runOut(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).Output()
	return string(out), err
}

// agent is an mcp-go client of one principal on one node, listening for
// server notifications.
type agent struct {
	t     *testing.T
	c     *client.Client
	notes chan mcp.JSONRPCNotification
}

func newAgent(t *testing.T, baseURL, token string) *agent {
	t.Helper()
	opts := []transport.StreamableHTTPCOption{transport.WithContinuousListening()}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	tr, err := transport.NewStreamableHTTP(baseURL+"/mcp", opts...)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, c: client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125)), notes: make(chan mcp.JSONRPCNotification, 1024)}
	a.c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case a.notes <- n:
		default:
		}
	})
	if err := a.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "ui-e2e-agent", Version: "1"}
	if _, err := a.c.Initialize(context.Background(), req); err != nil {
		t.Fatalf("initialize on %s: %v", baseURL, err)
	}
	return a
}

func (a *agent) call(name string, args map[string]any) string {
	t := a.t
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s answered an error: %s", name, b.String())
	}
	return b.String()
}

func (a *agent) read(uri string) string {
	a.t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := a.c.ReadResource(context.Background(), req)
	if err != nil {
		a.t.Fatalf("reading %s: %v", uri, err)
	}
	for _, c := range res.Contents {
		if tc, ok := c.(mcp.TextResourceContents); ok {
			return tc.Text
		}
	}
	return ""
}

// awaitNotes waits until a notification of every method in wants has
// arrived (for resources/updated, one naming uri), in any order.
func (a *agent) awaitNotes(t *testing.T, uri string, d time.Duration, wants ...string) {
	t.Helper()
	deadline := time.After(d)
	missing := map[string]bool{}
	for _, w := range wants {
		missing[w] = true
	}
	for len(missing) > 0 {
		select {
		case n := <-a.notes:
			if n.Method == mcp.MethodNotificationResourceUpdated && fmt.Sprint(n.Params.AdditionalFields["uri"]) != uri {
				continue
			}
			delete(missing, n.Method)
		case <-deadline:
			t.Fatalf("within %v the agent did not receive %v", d, missing)
		}
	}
}

func (a *agent) drain() {
	for {
		select {
		case <-a.notes:
		default:
			return
		}
	}
}

// login signs person in on baseURL through the login page.
func (b *browser) login(page, person, baseURL, token string) {
	b.t.Helper()
	b.do("open", map[string]any{"page": page, "person": person})
	b.do("goto", map[string]any{"page": page, "url": baseURL + "/ui/"})
	b.do("fill", map[string]any{"page": page, "selector": "#token", "text": token})
	var url string
	if err := b.start("submit", map[string]any{"page": page, "selector": "form button[type=submit]"}).result(&url); err != nil {
		b.t.Fatal(err)
	}
	if !strings.HasSuffix(url, "/ui/") {
		b.t.Fatalf("after login the browser is at %s, want the swarm page", url)
	}
}

func (b *browser) goTo(page, url string) int {
	b.t.Helper()
	var status int
	if err := json.Unmarshal(b.do("goto", map[string]any{"page": page, "url": url}), &status); err != nil {
		b.t.Fatal(err)
	}
	return status
}

// closePage closes a page and so its live stream: a browser holds at most
// six HTTP/1.1 connections per host, and each open UI page keeps one.
func (b *browser) closePage(page string) { b.t.Helper(); b.do("close", map[string]any{"page": page}) }

// shot saves a screenshot when MCPSWARM_UI_SCREENSHOTS names a directory
// (relative to the repository root).
func (b *browser) shot(page, name string) {
	dir := os.Getenv("MCPSWARM_UI_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(repoRoot(b.t), dir)
	}
	b.do("screenshot", map[string]any{"page": page, "path": filepath.Join(dir, name)})
}

// TestUIBrowser drives the web UI in headless Chromium against three real
// nodes: an agent on node1 drives a session while the page on node3 shows
// it live; the page drives a session the agent then reads; an Ask is put
// to the person; another principal sees nothing; hostile app text stays
// text; a killed node goes dead on the swarm page and comes back.
func TestUIBrowser(t *testing.T) {
	b := startBrowser(t)
	c := startUICluster(t)
	alice := newAgent(t, c.n1.BaseURL, uiAliceToken)
	const live = 5 * time.Second // generous under load; measured figures are logged

	// Phases run in order on one cluster and one browser, in the test's own
	// goroutine (the helpers fail the whole test).
	b.login("swarm", "alice", c.n3.BaseURL, uiAliceToken)
	b.waitJS("swarm", `document.querySelectorAll('#members tr[data-state="alive"]').length === 3`, 30*time.Second)

	phase(t, "agent drives, page on another node shows it", func() {
		alice.call("swarm_start", map[string]any{"app": "login", "id": "demo"})
		b.waitJS("swarm", `!!document.querySelector('[data-node="node1"] tr[data-session="demo"]')`, live)

		b.do("open", map[string]any{"page": "demo", "person": "alice"})
		if st := b.goTo("demo", c.n3.BaseURL+"/ui/sessions/demo"); st != http.StatusOK {
			t.Fatalf("session page: HTTP %d", st)
		}
		b.waitJS("demo", `!!document.querySelector('input[data-wid="username"]')`, live)
		var lat []time.Duration
		for _, step := range []struct {
			tool string
			args map[string]any
			js   string
		}{
			{"demo.username.type_into", map[string]any{"text": "demo"}, `document.querySelector('input[data-wid="username"]')?.value === "demo"`},
			{"demo.password.type_into", map[string]any{"text": "hunter2"}, `document.querySelectorAll('#log li[data-source="agent"]').length >= 2`},
			{"demo.submit.click", nil, `(document.querySelector('[data-wid="status"]')?.textContent || '').includes("Signed in as demo.")`},
		} {
			w := b.start("wait", map[string]any{"page": "demo", "js": step.js, "timeout": live.Milliseconds()})
			alice.call(step.tool, step.args)
			answered := time.Now()
			var ms int64
			if err := w.result(&ms); err != nil {
				t.Fatalf("after %s the page did not show the change: %v", step.tool, err)
			}
			lat = append(lat, max(0, time.UnixMilli(ms).Sub(answered)))
			if step.tool == "demo.password.type_into" {
				b.shot("demo", "session.png")
			}
		}
		t.Logf("page on node3 showed each change of the agent on node1 this long after the tool answered: %v", lat)
		if b.evalBool("demo", `document.documentElement.outerHTML.includes("hunter2") || [...document.querySelectorAll('input')].some(i => i.value.includes("hunter2"))`) {
			t.Fatal("the masked password reached the page")
		}
		b.waitJS("demo", `[...document.querySelectorAll('#log li[data-source="agent"] .principal')].every(e => e.textContent === "alice") && document.querySelectorAll('#log li[data-source="agent"]').length >= 3`, live)
		b.waitJS("demo", `!!document.querySelector('button[data-wid="logout"]')`, live)
		b.closePage("demo")
	})

	phase(t, "page drives, agent reads and is notified", func() {
		alice.call("swarm_start", map[string]any{"app": "login", "id": "drive"})
		sub := mcp.SubscribeRequest{}
		sub.Params.URI = "swarm://session/drive/model/status"
		if err := alice.c.Subscribe(context.Background(), sub); err != nil {
			t.Fatalf("subscribe: %v", err)
		}
		alice.drain()
		b.do("open", map[string]any{"page": "drive", "person": "alice"})
		b.goTo("drive", c.n3.BaseURL+"/ui/sessions/drive")
		b.waitJS("drive", `!!document.querySelector('input[data-wid="username"]:not([disabled])')`, live)
		b.do("type", map[string]any{"page": "drive", "selector": `input[data-wid="username"]`, "text": "demo"})
		b.do("fill", map[string]any{"page": "drive", "selector": `input[data-wid="password"]`, "text": "hunter2"})
		b.do("click", map[string]any{"page": "drive", "selector": `button[data-wid="submit"]`})
		b.waitJS("drive", `(document.querySelector('[data-wid="status"]')?.textContent || '').includes("Signed in as demo.")`, live)

		alice.awaitNotes(t, sub.Params.URI, 10*time.Second, mcp.MethodNotificationResourceUpdated, mcp.MethodNotificationToolsListChanged)
		var status struct {
			User   string `json:"user"`
			Status string `json:"status"`
		}
		if err := json.Unmarshal([]byte(alice.read(sub.Params.URI)), &status); err != nil || status.User != "demo" {
			t.Fatalf("the agent reads %+v (err %v), want user demo signed in by the page", status, err)
		}
		b.waitJS("drive", `document.querySelectorAll('#log li[data-source="page"]').length >= 3 && [...document.querySelectorAll('#log li[data-source="page"] .principal')].every(e => e.textContent === "alice")`, live)
		b.closePage("drive")
	})

	phase(t, "an Ask is put to the person in the page", func() {
		alice.call("swarm_start", map[string]any{"app": "login", "id": "askpg"})
		b.do("open", map[string]any{"page": "ask", "person": "alice"})
		b.goTo("ask", c.n3.BaseURL+"/ui/sessions/askpg")
		b.waitJS("ask", `!!document.querySelector('button[data-wid="submit"]')`, live)
		b.do("click", map[string]any{"page": "ask", "selector": `button[data-wid="submit"]`})
		b.waitJS("ask", `!document.getElementById('ask').hidden && document.getElementById('ask-text').textContent.includes("alice wants to run askpg.submit.click")`, live)
		if b.evalBool("ask", `(document.querySelector('[data-wid="status"]')?.textContent || '').includes("attempts")`) {
			t.Fatal("the call ran before the person approved it")
		}
		b.do("click", map[string]any{"page": "ask", "selector": "#ask-yes"})
		b.waitJS("ask", `(document.querySelector('[data-wid="status"]')?.textContent || '').includes("1 of 3 attempts")`, live)
		b.closePage("ask")
	})

	phase(t, "tables, trees and scrubbers render and take clicks", func() {
		for _, app := range [][2]string{{"table", "tbl"}, {"files", "fls"}, {"player", "ply"}} {
			alice.call("swarm_start", map[string]any{"app": app[0], "id": app[1]})
		}
		b.do("open", map[string]any{"page": "kinds", "person": "alice"})

		b.goTo("kinds", c.n3.BaseURL+"/ui/sessions/tbl")
		b.waitJS("kinds", `document.querySelectorAll('table[data-wid="elements"] tbody tr').length === 60 && document.querySelector('table[data-wid="elements"] tbody tr')?.dataset.key === "H"`, live)
		b.do("click", map[string]any{"page": "kinds", "selector": `table[data-wid="elements"] tr[data-key="Fe"]`})
		b.waitJS("kinds", `(document.querySelector('[data-wid="detail"]')?.textContent || '').includes("Iron (Fe)") && document.querySelector('tr[data-key="Fe"]')?.classList.contains('selected')`, live)
		b.do("click", map[string]any{"page": "kinds", "selector": `table[data-wid="elements"] th:nth-child(3) button`})
		b.waitJS("kinds", `document.querySelector('table[data-wid="elements"] tbody tr')?.dataset.key !== "H" && document.querySelector('table[data-wid="elements"] th:nth-child(3)').textContent.includes("▲")`, live)
		if model := alice.call("swarm_get_model", map[string]any{"id": "tbl"}); !strings.Contains(model, `"name"`) || !strings.Contains(model, `"Fe"`) {
			t.Fatalf("after the page sorted and selected, the agent reads %s", model)
		}

		b.goTo("kinds", c.n3.BaseURL+"/ui/sessions/fls")
		b.waitJS("kinds", `document.querySelectorAll('[data-wid="tree"] li').length > 0 && !!document.querySelector('[data-wid="tree"] li > button.link:not([disabled])')`, live)
		before := b.do("eval", map[string]any{"page": "kinds", "js": `document.querySelectorAll('[data-wid="tree"] li').length`})
		b.do("click", map[string]any{"page": "kinds", "selector": `[data-wid="tree"] li > button.link:first-child`})
		b.waitJS("kinds", `document.querySelectorAll('[data-wid="tree"] li').length !== `+string(before), live)

		b.goTo("kinds", c.n3.BaseURL+"/ui/sessions/ply")
		b.waitJS("kinds", `!!document.querySelector('[data-wid="scrubber"] input[type=range]') && document.querySelector('[data-wid="scrubber"] button')?.textContent === "Play"`, live)
		b.do("click", map[string]any{"page": "kinds", "selector": `[data-wid="scrubber"] button`})
		b.waitJS("kinds", `document.querySelector('[data-wid="scrubber"] button')?.textContent === "Pause"`, live)
		b.closePage("kinds")
	})

	phase(t, "hostile app text renders inert", func() {
		agent2 := newAgent(t, c.n2.BaseURL, uiAliceToken)
		agent2.call("swarm_start", map[string]any{"app": "todo", "id": "hostile"})
		for _, text := range []string{`<img src=x onerror="window.__pwned=1">`, `<script>window.__pwned=2</script>`} {
			agent2.call("hostile.new.type_into", map[string]any{"text": text})
			agent2.call("hostile.add.click", nil)
		}
		b.do("open", map[string]any{"page": "hostile", "person": "alice"})
		b.goTo("hostile", c.n3.BaseURL+"/ui/sessions/hostile")
		b.waitJS("hostile", `[...document.querySelectorAll('#view label')].some(l => l.textContent.includes('<img src=x onerror="window.__pwned=1">')) && [...document.querySelectorAll('#view label')].some(l => l.textContent.includes('<script>window.__pwned=2</script>'))`, live)
		if !b.evalBool("hostile", `window.__pwned === undefined && !document.querySelector('#view img, #view script, #log img, #log script')`) {
			t.Fatal("hostile app text became markup")
		}
		b.closePage("hostile")
	})

	phase(t, "another principal sees nothing of it", func() {
		b.login("bob", "bob", c.n2.BaseURL, uiBobToken)
		b.waitJS("bob", `document.querySelectorAll('#members tr[data-state="alive"]').length === 3`, 30*time.Second)
		if b.evalBool("bob", `document.querySelectorAll('tr[data-session]').length > 0 || document.body.textContent.includes("alice")`) {
			t.Fatal("bob's swarm page shows alice's sessions")
		}
		if st := b.goTo("bob", c.n2.BaseURL+"/ui/sessions/demo"); st != http.StatusForbidden {
			t.Fatalf("bob's session page for alice's session: HTTP %d, want 403", st)
		}
		if b.evalBool("bob", `document.body.textContent.includes("alice") || !!document.querySelector('#view')`) {
			t.Fatal("the 403 page tells bob something about the session")
		}
		for _, tc := range []struct {
			token string
			want  int
		}{{uiBobToken, http.StatusForbidden}, {uiAliceToken, http.StatusOK}, {"", http.StatusUnauthorized}} {
			if got, first := streamStatus(t, c.n2.BaseURL+"/ui/api/sessions/demo", tc.token); got != tc.want {
				t.Errorf("GET /ui/api/sessions/demo with token %q: HTTP %d, want %d", tc.token, got, tc.want)
			} else if got == http.StatusOK && (!strings.Contains(first, `"id":"demo"`) || strings.Contains(first, "hunter2")) {
				t.Errorf("first event %q: want the session, without the password", first)
			}
		}
		// An action without the page's CSRF token is refused.
		req, _ := http.NewRequest(http.MethodPost, c.n2.BaseURL+"/ui/api/sessions/demo/act", strings.NewReader(`{"widget":"logout","action":"click"}`))
		req.Header.Set("Authorization", "Bearer "+uiAliceToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("action without CSRF token: HTTP %d, want 403", resp.StatusCode)
		}
	})

	phase(t, "a killed node goes dead and comes back", func() {
		b.goTo("swarm", c.n3.BaseURL+"/ui/")
		b.waitJS("swarm", `!!document.querySelector('[data-node="node2"] tr[data-session="hostile"]') && !!document.querySelector('[data-node="node1"] tr[data-session="demo"]')`, live)
		b.shot("swarm", "swarm.png")
		killed := time.Now()
		c.n1.kill()
		dead := b.waitJS("swarm", `document.querySelector('tr[data-member="node1"]')?.dataset.state === "dead" && !document.querySelector('[data-node="node1"] tr[data-session]')`, 60*time.Second)
		t.Logf("swarm page on node3 showed node1 dead, its sessions gone, %v after SIGKILL", dead.Sub(killed).Round(time.Millisecond))
		if !b.evalBool("swarm", `!!document.querySelector('[data-node="node2"] tr[data-session="hostile"]')`) {
			t.Error("node2's session disappeared with node1")
		}
		restarted := time.Now()
		c.n1.restart()
		back := b.waitJS("swarm", `document.querySelector('tr[data-member="node1"]')?.dataset.state === "alive" && ["demo", "drive", "askpg", "tbl", "fls", "ply"].every(id => !!document.querySelector('[data-node="node1"] tr[data-session="' + id + '"]'))`, 60*time.Second)
		t.Logf("node1 and its sessions were back on the page %v after the restart began", back.Sub(restarted).Round(time.Millisecond))
	})

	phase(t, "a drained node shows draining and its session moves", func() {
		began := time.Now()
		out, err := exec.Command(c.bin, "drain", "--addr", c.n2.GRPCAt, "--cluster-key-file", c.keyFile).CombinedOutput()
		if err != nil {
			t.Fatalf("mcpswarm drain: %v\n%s", err, out)
		}
		shown := b.waitJS("swarm", `document.querySelector('tr[data-member="node2"]')?.dataset.state === "draining" && !!document.querySelector('[data-node]:not([data-node="node2"]) tr[data-session="hostile"]') && !document.querySelector('[data-node="node2"] tr[data-session]')`, live)
		t.Logf("swarm page on node3 showed node2 draining and its session moved %v after the drain began (the drain call took %v)", shown.Sub(began).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	})
}

func phase(t *testing.T, name string, fn func()) {
	t.Helper()
	t.Logf("== %s", name)
	fn()
}

// streamStatus opens an SSE endpoint with token and returns the status and
// the first data line.
func streamStatus(t *testing.T, url, token string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ""
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			return resp.StatusCode, line
		}
	}
	return resp.StatusCode, ""
}

// TestUIDevConsole: `make run`'s node (--dev, no tokens) serves the UI on
// loopback without a login, as an admin console that sees every session,
// including those of unauthenticated MCP connections.
func TestUIDevConsole(t *testing.T) {
	n := startNode(t, buildNode(t))
	a := newAgent(t, n.BaseURL, "")
	a.call("swarm_start", map[string]any{"app": "counter", "id": "devc"})
	resp, err := http.Get(n.BaseURL + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasSuffix(resp.Request.URL.Path, "/ui/") {
		t.Fatalf("GET /ui/login under --dev: HTTP %d at %s, want the swarm page", resp.StatusCode, resp.Request.URL)
	}
	status, first := streamStatus(t, n.BaseURL+"/ui/api/swarm", "")
	if status != http.StatusOK || !strings.Contains(first, `"principal":"dev-console"`) || !strings.Contains(first, `"id":"devc"`) {
		t.Fatalf("dev swarm stream: HTTP %d, first event %s", status, first)
	}
}
