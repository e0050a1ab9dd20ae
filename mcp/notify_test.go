package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/session"
)

// slowApp reports progress three times on every click.
type slowApp struct{}

type slowModel struct{ N int }

type slowGo struct{}

func (slowApp) Init() (session.Model, error) { return slowModel{}, nil }

func (a slowApp) Update(m session.Model, msg session.Msg) (session.Model, error) {
	return a.UpdateContext(context.Background(), m, msg)
}

func (slowApp) UpdateContext(ctx context.Context, m session.Model, msg session.Msg) (session.Model, error) {
	s, _ := m.(slowModel)
	if _, ok := msg.(slowGo); !ok {
		return s, nil
	}
	report := session.ProgressFrom(ctx)
	for i := 1; i <= 3; i++ {
		report(float64(i), 3, fmt.Sprintf("step %d", i))
	}
	s.N++
	return s, nil
}

func (slowApp) View(m session.Model) session.Node {
	s, _ := m.(slowModel)
	return session.Column{Items: []session.Node{
		session.Text{ID: "n", Text: fmt.Sprint(s.N)},
		session.Button{ID: "go", Label: "Go", OnClick: slowGo{}},
	}}
}

func withSlowApp(t testing.TB) func(*Config, *session.Registry) {
	return func(_ *Config, reg *session.Registry) {
		if err := reg.Register("slow", "reports progress", func() session.App { return slowApp{} }); err != nil {
			t.Fatal(err)
		}
	}
}

func TestListChangedOncePerChangeToItsConnectionsOnly(t *testing.T) {
	e := newEnv(t, nil)
	a, an := e.connect(t, clientOpts{listen: true})
	b, bn := e.connect(t, clientOpts{listen: true})
	const lc = "notifications/tools/list_changed"

	if r := callTool(t, a, "swarm_start", map[string]any{"app": "login", "id": "la"}); r.IsError {
		t.Fatal(text(r))
	}
	an.waitFor(t, lc, 1)
	// Logging in changes the view (greeting, logout): one more change.
	callTool(t, a, "la.username.type_into", map[string]any{"text": "demo"})
	callTool(t, a, "la.password.type_into", map[string]any{"text": "hunter2"})
	callTool(t, a, "la.submit.click", nil)
	an.waitFor(t, lc, 2)
	// b's own change reaches b, after which b has seen exactly one.
	if r := callTool(t, b, "swarm_start", map[string]any{"app": "counter", "id": "cb"}); r.IsError {
		t.Fatal(text(r))
	}
	bn.waitFor(t, lc, 1)
	if err := a.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := an.count(lc); got != 2 {
		t.Errorf("a saw %d list_changed, want 2", got)
	}
	if got := bn.count(lc); got != 1 {
		t.Errorf("b saw %d list_changed, want 1", got)
	}
}

func TestResourcesAndSubscriptions(t *testing.T) {
	e := newEnv(t, nil)
	c, n := e.connect(t, clientOpts{listen: true})
	if r := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "cc"}); r.IsError {
		t.Fatal(text(r))
	}
	ctx := context.Background()
	list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range list.Resources {
		have[r.URI] = true
	}
	for _, want := range []string{URIMembers, URISessions, URIMe, SessionURI("cc", "widgets"), SessionURI("cc", "context"), SessionURI("cc", "model/count")} {
		if !have[want] {
			t.Errorf("resources/list lacks %s (have %v)", want, have)
		}
	}
	tmpl, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil || len(tmpl.ResourceTemplates) != 3 {
		t.Errorf("templates: %v %v", tmpl, err)
	}
	read := func(uri string) string {
		rr := mcp.ReadResourceRequest{}
		rr.Params.URI = uri
		res, err := c.ReadResource(ctx, rr)
		if err != nil {
			t.Fatalf("reading %s: %v", uri, err)
		}
		return res.Contents[0].(mcp.TextResourceContents).Text
	}
	if me := read(URIMe); !strings.Contains(me, `"principal":"conn:`) || !strings.Contains(me, `"cc"`) {
		t.Errorf("swarm://me: %s", me)
	}
	if m := read(SessionURI("cc", "model/count")); !strings.Contains(m, `"count":0`) {
		t.Errorf("model/count: %s", m)
	}
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = SessionURI("cc", "model/count")
	if err := c.Subscribe(ctx, sub); err != nil {
		t.Fatal(err)
	}
	callTool(t, c, "cc.inc.click", nil)
	const upd = "notifications/resources/updated"
	n.waitFor(t, upd, 1)
	got := n.all(upd)[0]
	if got.Params.AdditionalFields["uri"] != sub.Params.URI {
		t.Errorf("updated uri: %v", got.Params.AdditionalFields)
	}
	meta, _ := json.Marshal(got.Params.Meta)
	if !strings.Contains(string(meta), MetaPatch) || !strings.Contains(string(meta), `"replace"`) {
		t.Errorf("updated _meta lacks the patch: %s", meta)
	}
	unsub := mcp.UnsubscribeRequest{}
	unsub.Params.URI = sub.Params.URI
	if err := c.Unsubscribe(ctx, unsub); err != nil {
		t.Fatal(err)
	}
	if subs := e.srv.Subscriptions(c.GetSessionId()); len(subs) != 0 {
		t.Errorf("subscriptions after unsubscribe: %v", subs)
	}
	// Subscribing to another principal's session resource is refused.
	other, _ := e.connect(t, clientOpts{})
	if err := other.Subscribe(ctx, sub); err == nil {
		t.Error("subscribed to another principal's resource")
	}
}

func TestLoggingAndProgressAreNotLost(t *testing.T) {
	for _, listen := range []bool{false, true} {
		t.Run(fmt.Sprintf("get-stream=%v", listen), func(t *testing.T) { progressRounds(t, listen) })
	}
}

func progressRounds(t *testing.T, listen bool) {
	e := newEnv(t, withSlowApp(t))
	c, n := e.connect(t, clientOpts{listen: listen})
	ctx := context.Background()
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelInfo}}); err != nil {
		t.Fatal(err)
	}
	if r := callTool(t, c, "swarm_start", map[string]any{"app": "slow", "id": "sl"}); r.IsError {
		t.Fatal(text(r))
	}
	const calls = 50
	for i := 0; i < calls; i++ {
		req := mcp.CallToolRequest{}
		req.Params.Name = "sl.go.click"
		req.Params.Meta = &mcp.Meta{ProgressToken: fmt.Sprintf("p%d", i)}
		if _, err := c.CallTool(ctx, req); err != nil {
			t.Fatal(err)
		}
		if !listen {
			// Every notification of a call arrives before its response.
			if got := n.count("notifications/progress"); got != 3*(i+1) {
				t.Fatalf("call %d: %d progress notifications, want %d", i, got, 3*(i+1))
			}
			if got := n.count("notifications/message"); got != i+1 {
				t.Fatalf("call %d: %d log messages, want %d", i, got, i+1)
			}
		}
	}
	// With a GET stream open some notifications may travel on it instead of
	// the call's own stream; none may be lost.
	n.waitFor(t, "notifications/progress", 3*calls)
	n.waitFor(t, "notifications/message", calls)
	if got := n.count("notifications/progress"); got != 3*calls {
		t.Errorf("%d progress notifications, want %d", got, 3*calls)
	}
	p := n.all("notifications/progress")[0].Params.AdditionalFields
	if p["progressToken"] != "p0" || p["total"] != float64(3) {
		t.Errorf("progress params: %v", p)
	}
}

func TestCancellationReachesTheCall(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "swarm_apps"
	if _, err := c.CallTool(ctx, req); err == nil {
		t.Error("cancelled call succeeded")
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// gateApp reports progress, then waits for the test to release it.
type gateApp struct{ release <-chan struct{} }

func (g gateApp) Init() (session.Model, error) { return slowModel{}, nil }

func (g gateApp) Update(m session.Model, msg session.Msg) (session.Model, error) {
	return g.UpdateContext(context.Background(), m, msg)
}

func (g gateApp) UpdateContext(ctx context.Context, m session.Model, msg session.Msg) (session.Model, error) {
	if _, ok := msg.(slowGo); ok {
		session.ProgressFrom(ctx)(1, 2, "half way")
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
	return m, nil
}

func (g gateApp) View(m session.Model) session.Node { return slowApp{}.View(m) }

func TestProgressArrivesWhileTheCallRuns(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, func(_ *Config, reg *session.Registry) {
		if err := reg.Register("gate", "blocks", func() session.App { return gateApp{release: release} }); err != nil {
			t.Fatal(err)
		}
	})
	c, n := e.connect(t, clientOpts{})
	callTool(t, c, "swarm_start", map[string]any{"app": "gate", "id": "gt"})
	done := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "gt.go.click"
		req.Params.Meta = &mcp.Meta{ProgressToken: "live"}
		_, err := c.CallTool(context.Background(), req)
		done <- err
	}()
	// The call is still blocked in Update: the progress must already be here.
	n.waitFor(t, "notifications/progress", 1)
	select {
	case err := <-done:
		t.Fatalf("the call ended before its progress was checked: %v", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
