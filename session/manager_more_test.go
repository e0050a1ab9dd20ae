package session

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// progressApp reports progress from UpdateContext and panics in View when
// told to.
type progressApp struct{}

type progressModel struct {
	Steps     int  `json:"steps"`
	ViewPanic bool `json:"view_panic"`
}

func (progressApp) Init() (Model, error) { return progressModel{}, nil }

func (progressApp) Update(Model, Msg) (Model, error) {
	return nil, errors.New("Update must not be called when UpdateContext exists")
}

func (progressApp) UpdateContext(ctx context.Context, m Model, msg Msg) (Model, error) {
	pm := m.(progressModel)
	switch msg {
	case "work":
		report := ProgressFrom(ctx)
		for i := range 3 {
			report(float64(i+1), 3, "step")
		}
		pm.Steps += 3
	case "break":
		pm.ViewPanic = true
	}
	return pm, nil
}

func (progressApp) View(m Model) Node {
	if m.(progressModel).ViewPanic {
		panic("view exploded")
	}
	return Column{Items: []Node{Button{ID: "work", OnClick: "work"}, Button{ID: "break", OnClick: "break"}}}
}

type panicInit struct{ progressApp }

func (panicInit) Init() (Model, error) { panic("no init for you") }

func TestProgressViewPanicAndInitPanic(t *testing.T) {
	f := newFixture(t, func(c *ManagerConfig) {
		_ = c.Registry.Register("progress", "", func() App { return progressApp{} })
		_ = c.Registry.Register("badinit", "", func() App { return panicInit{} })
		c.Startable = []string{"probe", "progress", "badinit"}
	})
	if _, err := f.m.Start(f.ctx, "b", "badinit", "a"); err == nil || !strings.Contains(err.Error(), "no init for you") {
		t.Errorf("Init panic: %v", err)
	}
	if _, err := f.m.Start(f.ctx, "p", "progress", "a"); err != nil {
		t.Fatal(err)
	}
	var got []float64
	ctx := WithProgress(f.ctx, func(p, total float64, msg string) { got = append(got, p) })
	res, err := f.m.Call(ctx, "p", "p.work.click", nil)
	if err != nil || res.IsError {
		t.Fatal(err, res)
	}
	if len(got) != 3 || got[2] != 3 {
		t.Errorf("progress %v", got)
	}
	ProgressFrom(context.Background())(1, 2, "no reporter: no effect")
	res = f.call("p", "break.click", nil)
	if !res.IsError || !strings.Contains(res.Text, "view exploded") {
		t.Errorf("View panic: %+v", res)
	}
	// The update that broke View was not applied; the session still works.
	if res := f.call("p", "work.click", nil); res.IsError {
		t.Fatal(res.Text)
	}
	if b, _ := f.m.Model("p"); string(b) != `{"steps":6,"view_panic":false}` {
		t.Errorf("model %s", b)
	}
}

func TestRestoreSkipsUnknownApps(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	_ = f.store.Save(Snapshot{Info: Info{ID: "ghost", App: "gone", Principal: "x"}, Model: []byte(`{}`)})
	_ = f.store.Save(Snapshot{Info: Info{ID: "junk", App: "probe", Principal: "x"}, Model: []byte(`[1,2]`)})
	if err := f.m.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	m2, err := NewManager(ManagerConfig{Registry: f.m.cfg.Registry, Store: f.store, Startable: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(context.Background())
	err = m2.Restore(f.ctx)
	if err == nil || !strings.Contains(err.Error(), "ghost") || !strings.Contains(err.Error(), "junk") {
		t.Errorf("restore errors: %v", err)
	}
	if _, ok := m2.Get("s"); !ok {
		t.Error("the good snapshot was not restored")
	}
}

func TestUnknownToolsGrowNothing(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	for _, name := range []string{"s.nope.click", "t.inc.click", "s.inc", ""} {
		if res := f.call("s", strings.TrimPrefix(name, "s."), nil); !res.IsError {
			t.Errorf("%q answered %+v", name, res)
		}
	}
	if n := len(f.m.actor("s").breakers); n != 0 {
		t.Errorf("%d breakers for unknown tools", n)
	}
}

func TestStopAnswersQueuedCalls(t *testing.T) {
	f := newFixture(t, func(c *ManagerConfig) { c.Mailbox = 4 })
	f.start("s")
	blocked := make(chan error, 1)
	go func() {
		_, err := f.m.Call(context.Background(), "s", "s.block.click", nil)
		blocked <- err
	}()
	<-f.probe.entered
	queued := make(chan error, 1)
	go func() {
		_, err := f.m.Call(context.Background(), "s", "s.inc.click", nil)
		queued <- err
	}()
	eventually(t, func() bool { return f.m.actor("s").waiting() == 1 })
	a := f.m.actor("s")
	stopped := make(chan error, 1)
	go func() { stopped <- f.m.Stop(context.Background(), "s") }()
	eventually(t, func() bool { _, ok := f.m.Get("s"); return !ok })
	close(f.probe.gate)
	if err := <-blocked; err != nil {
		t.Errorf("the running call: %v", err)
	}
	if err := <-queued; !errors.Is(err, ErrNotRunning) {
		t.Errorf("the queued call: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	<-a.done
	if snaps, _ := f.store.Load(); len(snaps) != 0 {
		t.Errorf("snapshot survived stop: %+v", snaps)
	}
}

func TestContextResource(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	b, err := f.m.ReadResource("s", "context")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Session     struct{ ID, App, Status string }
		Projections map[string]struct{ Count int }
		Widgets     struct{ Kind string }
		Tools       []string
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("context is not JSON: %v\n%s", err, b)
	}
	if doc.Session.ID != "s" || doc.Session.App != "probe" || doc.Projections["count"].Count != 0 ||
		doc.Widgets.Kind != "column" || len(doc.Tools) == 0 || doc.Tools[0] != "s.discover_tools" {
		t.Errorf("context %+v", doc)
	}
}

func TestToolLimit(t *testing.T) {
	f := newFixture(t, func(c *ManagerConfig) { c.MaxTools = 5 })
	f.start("s")
	f.call("s", "inc.click", nil)
	tools, _ := f.m.Tools("s")
	if len(tools) != 5 {
		t.Errorf("%d tools, want the limit 5", len(tools))
	}
	if n := strings.Count(f.logs.String(), "tool limit"); n != 1 {
		t.Errorf("tool limit logged %d times:\n%s", n, f.logs.String())
	}
}

// fragile is a custom widget that panics when performing or rendering.
type fragile struct{}

func (fragile) Kind() string      { return "fragile" }
func (fragile) WidgetID() string  { return "f" }
func (fragile) Actions() []Action { return []Action{{Name: "poke", Write: true}} }
func (fragile) Perform(string, map[string]any) (Outcome, error) {
	panic("perform exploded")
}
func (fragile) Render(int) []string { panic("render exploded") }

type fragileApp struct{ miniCounter }

func (fragileApp) View(Model) Node {
	return Column{Items: []Node{fragile{}, Button{ID: "inc", OnClick: "inc"}}}
}

func TestPanickingCustomWidget(t *testing.T) {
	f := newFixture(t, func(c *ManagerConfig) {
		_ = c.Registry.Register("fragile", "", func() App { return fragileApp{} })
		c.Startable = []string{"fragile"}
	})
	if _, err := f.m.Start(f.ctx, "s", "fragile", "a"); err != nil {
		t.Fatal(err)
	}
	if res := f.call("s", "f.poke", nil); !res.IsError || !strings.Contains(res.Text, "perform exploded") {
		t.Errorf("poke: %+v", res)
	}
	if _, err := f.m.Screenshot("s", 10, 2); err == nil || !strings.Contains(err.Error(), "render exploded") {
		t.Errorf("screenshot: %v", err)
	}
	if res := f.call("s", "inc.click", nil); res.IsError {
		t.Errorf("the session did not survive: %s", res.Text)
	}
}
