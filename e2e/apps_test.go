package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// appsHost drives e2e/apps/host.mjs: MCP Apps hosts built on the
// extension's app-bridge, each with a TypeScript SDK client.
type appsHost struct{ *browser }

// shown is what the host read and called to mount a View.
type shown struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType"`
	Meta     struct {
		UI struct {
			CSP map[string][]string `json:"csp"`
		} `json:"ui"`
	} `json:"meta"`
	Result struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
}

type hostState struct {
	ModelContext []struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"modelContext"`
	Calls []struct {
		Name    string `json:"name"`
		IsError bool   `json:"isError"`
	} `json:"calls"`
	Asks      []string `json:"asks"`
	Sizes     []any    `json:"sizes"`
	OffOrigin []string `json:"offOrigin"`
}

func (h appsHost) open(name, url, token string) bool {
	h.t.Helper()
	var ok bool
	if err := json.Unmarshal(h.do("open", map[string]any{"host": name, "url": url, "token": token}), &ok); err != nil {
		h.t.Fatal(err)
	}
	return ok
}

func (h appsHost) show(name, tool string, args map[string]any, who string) shown {
	h.t.Helper()
	var s shown
	if err := json.Unmarshal(h.do("show", map[string]any{"host": name, "tool": tool, "args": args, "who": who}), &s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h appsHost) wait(name, js string, timeout time.Duration) time.Time {
	h.t.Helper()
	var ms int64
	if err := h.start("wait", map[string]any{"host": name, "js": js, "timeout": timeout.Milliseconds()}).result(&ms); err != nil {
		h.t.Fatalf("host %s: waiting for %s: %v", name, js, err)
	}
	return time.UnixMilli(ms)
}

func (h appsHost) state(name string) hostState {
	h.t.Helper()
	var s hostState
	if err := json.Unmarshal(h.do("state", map[string]any{"host": name}), &s); err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h appsHost) shot(name, file string) {
	if dir := screenshotDir(h.t); dir != "" {
		h.do("screenshot", map[string]any{"host": name, "path": filepath.Join(dir, file)})
	}
}

// screenshotDir is MCPSWARM_UI_SCREENSHOTS made absolute, or "".
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("MCPSWARM_UI_SCREENSHOTS")
	if dir != "" && !filepath.IsAbs(dir) {
		dir = filepath.Join(repoRoot(t), dir)
	}
	return dir
}

// countIs is a predicate on the counter app's text in the View.
func countIs(n int) string {
	return fmt.Sprintf(`(document.querySelector('[data-wid="count"]')?.textContent || '') === 'Count: %d'`, n)
}

// TestAppsHost runs the session app in a real MCP Apps host: Chromium, the
// extension's AppBridge, the TypeScript SDK client, three real nodes. A
// session started from the host renders in a sandboxed iframe; an agent's
// calls on another node show up in it, also through a third node; a click
// in it is a tool call the agent reads back and the host's model context
// hears of; an Ask reaches the host; bob's host renders nothing of alice's.
func TestAppsHost(t *testing.T) {
	h := appsHost{startDriver(t, filepath.Join("apps", "host.mjs"))}
	c := startUICluster(t)
	const live = 5 * time.Second

	if !h.open("owner", c.n1.BaseURL, uiAliceToken) {
		t.Fatal("node1 does not declare io.modelcontextprotocol/ui to a host that declares it")
	}
	phase(t, "swarm_start from the host renders the session", func() {
		s := h.show("owner", "swarm_start", map[string]any{"app": "counter", "id": "app1"}, "alice on node1 (owner)")
		if s.URI != "ui://mcpswarm/session" || s.MIMEType != "text/html;profile=mcp-app" {
			t.Errorf("resource %s %s", s.URI, s.MIMEType)
		}
		if len(s.Result.Content) == 0 || s.Result.Content[0].Text == "" || s.Result.IsError {
			t.Errorf("swarm_start's result has no text for hosts without UI: %+v", s.Result)
		}
		for _, k := range []string{"connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"} {
			if v, ok := s.Meta.UI.CSP[k]; !ok || len(v) != 0 {
				t.Errorf("csp.%s = %v, want declared empty", k, v)
			}
		}
		h.wait("owner", countIs(0), live)
	})

	agent := newAgent(t, c.n2.BaseURL, uiAliceToken)
	if !h.open("remote", c.n3.BaseURL, uiAliceToken) {
		t.Fatal("node3 does not declare the extension")
	}
	phase(t, "the agent's calls on node2 show up in both Views, on the owner and on node3", func() {
		h.show("remote", "swarm_view", map[string]any{"id": "app1"}, "alice on node3 (not the owner)")
		h.wait("remote", countIs(0), live)
		const n = 40
		var remote, owner, call []time.Duration
		for i := 1; i <= n; i++ {
			wr := h.start("wait", map[string]any{"host": "remote", "js": countIs(i), "timeout": live.Milliseconds()})
			wo := h.start("wait", map[string]any{"host": "owner", "js": countIs(i), "timeout": live.Milliseconds()})
			t0 := time.Now()
			agent.call("app1.inc.click", nil)
			call = append(call, time.Since(t0))
			var mr, mo int64
			if err := wr.result(&mr); err != nil {
				t.Fatalf("step %d: the View on node3 did not show Count: %d: %v", i, i, err)
			}
			if err := wo.result(&mo); err != nil {
				t.Fatalf("step %d: the View on node1 did not show Count: %d: %v", i, i, err)
			}
			remote = append(remote, time.UnixMilli(mr).Sub(t0))
			owner = append(owner, time.UnixMilli(mo).Sub(t0))
		}
		t.Logf("agent change (node2 → owner node1) → iframe, from the start of the agent's call, %d changes:", n)
		t.Logf("  via node3 (not the owner): p50 %v p95 %v max %v", pct(remote, 50), pct(remote, 95), pct(remote, 100))
		t.Logf("  via node1 (the owner):     p50 %v p95 %v max %v", pct(owner, 50), pct(owner, 95), pct(owner, 100))
		t.Logf("  the agent's call itself:   p50 %v p95 %v", pct(call, 50), pct(call, 95))
		h.shot("remote", "apps-host.png")
	})

	phase(t, "a click in the View is a tool call the agent reads back", func() {
		h.do("click", map[string]any{"host": "remote", "selector": `button[data-wid="inc"]`})
		h.wait("owner", countIs(41), live)
		if got := agent.call("swarm_screenshot", map[string]any{"id": "app1"}); !strings.Contains(got, "Count: 41") {
			t.Errorf("the agent reads %q after the click, want Count: 41", got)
		}
		// The View tells the host after the click's answer: wait for it.
		st := h.state("remote")
		for deadline := time.Now().Add(live); len(st.ModelContext) == 0 && time.Now().Before(deadline); st = h.state("remote") {
			time.Sleep(20 * time.Millisecond)
		}
		if !slices.ContainsFunc(st.Calls, func(c struct {
			Name    string `json:"name"`
			IsError bool   `json:"isError"`
		}) bool {
			return c.Name == "app1.inc.click" && !c.IsError
		}) {
			t.Errorf("the click did not go through the host as tools/call app1.inc.click: %+v", st.Calls)
		}
		if len(st.ModelContext) == 0 || !strings.Contains(st.ModelContext[len(st.ModelContext)-1].Content[0].Text, "app1.inc.click") {
			t.Errorf("ui/update-model-context did not tell the host about the click: %+v", st.ModelContext)
		}
		if len(st.Sizes) == 0 {
			t.Error("the View never sent ui/notifications/size-changed")
		}
	})

	phase(t, "an Ask from a click reaches the host; masked text never reaches the View", func() {
		var torn map[string]any
		if err := json.Unmarshal(h.do("teardown", map[string]any{"host": "owner"}), &torn); err != nil {
			t.Fatalf("ui/resource-teardown: %v", err)
		}
		h.show("owner", "swarm_start", map[string]any{"app": "login", "id": "ask1"}, "alice on node1 (owner)")
		h.wait("owner", `!!document.querySelector('input[data-wid="password"]')`, live)
		h.do("type", map[string]any{"host": "owner", "selector": `input[data-wid="username"]`, "text": "demo"})
		h.do("type", map[string]any{"host": "owner", "selector": `input[data-wid="password"]`, "text": "hunter2"})
		h.do("click", map[string]any{"host": "owner", "selector": `button[data-wid="submit"]`})
		h.do("hostWait", map[string]any{"host": "owner", "js": `!document.getElementById('ask').hidden`, "timeout": live.Milliseconds()})
		h.shot("owner", "apps-ask.png")
		if st := h.state("owner"); len(st.Asks) != 1 || !strings.Contains(st.Asks[0], "ask1.submit.click") {
			t.Errorf("the host was asked %q, want one question about ask1.submit.click", st.Asks)
		}
		h.do("hostClick", map[string]any{"host": "owner", "selector": "#ask-yes"})
		h.wait("owner", `(document.querySelector('[data-wid="status"]')?.textContent || '').includes('Signed in as demo.')`, live)
		var leaks int
		if err := json.Unmarshal(h.do("received", map[string]any{"host": "owner", "text": "hunter2"}), &leaks); err != nil {
			t.Fatal(err)
		}
		if leaks != 0 {
			t.Errorf("%d answers the View received carry the masked password", leaks)
		}
	})

	phase(t, "hostile app text renders as text", func() {
		agent.call("swarm_start", map[string]any{"app": "todo", "id": "hostile"})
		for _, text := range []string{`<img src=x onerror="window.__pwned=1">`, `<script>window.__pwned=2</script>`} {
			agent.call("hostile.new.type_into", map[string]any{"text": text})
			agent.call("hostile.add.click", nil)
		}
		h.show("remote", "swarm_view", map[string]any{"id": "hostile"}, "alice on node3 (not the owner)")
		h.wait("remote", `[...document.querySelectorAll('#view label')].some(l => l.textContent.includes('<img src=x onerror="window.__pwned=1">')) && [...document.querySelectorAll('#view label')].some(l => l.textContent.includes('<script>window.__pwned=2</script>'))`, live)
		var inert bool
		if err := json.Unmarshal(h.do("eval", map[string]any{"host": "remote", "js": `window.__pwned === undefined && !document.querySelector('#view img, #view script')`}), &inert); err != nil {
			t.Fatal(err)
		}
		if !inert {
			t.Fatal("hostile app text became markup in the View")
		}
	})

	phase(t, "bob's host renders nothing of alice's", func() {
		if !h.open("bob", c.n2.BaseURL, uiBobToken) {
			t.Fatal("node2 does not declare the extension")
		}
		s := h.show("bob", "swarm_view", map[string]any{"id": "app1"}, "bob on node2")
		if !s.Result.IsError {
			t.Errorf("bob's swarm_view of alice's session answered %+v", s.Result)
		}
		h.wait("bob", `!document.getElementById('problem').hidden`, live)
		var widgets int
		if err := json.Unmarshal(h.do("eval", map[string]any{"host": "bob", "js": `document.querySelectorAll('[data-wid]').length`}), &widgets); err != nil {
			t.Fatal(err)
		}
		if widgets != 0 {
			t.Errorf("bob's View renders %d of alice's widgets", widgets)
		}
	})

	for _, name := range []string{"owner", "remote", "bob"} {
		if off := h.state(name).OffOrigin; len(off) != 0 {
			t.Errorf("host %s: requests left the page: %v", name, off)
		}
	}
}

// pct returns the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(0, min(i, len(s))-1)]
}

// TestAppsSchemaCopyIsThePackages: mcp/testdata holds the extension's
// schema.json that the Go tests check the resource and the tools against;
// it must be the installed package's (e2e/package.json pins the version).
func TestAppsSchemaCopyIsThePackages(t *testing.T) {
	root := repoRoot(t)
	pkg, err := os.ReadFile(filepath.Join(root, "e2e", "node_modules", "@modelcontextprotocol", "ext-apps", "dist", "src", "generated", "schema.json"))
	if err != nil {
		t.Skip("@modelcontextprotocol/ext-apps is not installed: run `npm ci --prefix e2e`")
	}
	copied, err := os.ReadFile(filepath.Join(root, "mcp", "testdata", "ext-apps-2.0.4-schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(pkg) != string(copied) {
		t.Error("mcp/testdata/ext-apps-2.0.4-schema.json differs from the installed package's schema.json: copy it again (and rename it after the version)")
	}
}
