package apps

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
)

func TestFilesEndToEnd(t *testing.T) {
	h := start(t, "files")
	if msg := h.callErr("actions.select", map[string]any{"item": "Open"}); !strings.Contains(msg, "select a file first") {
		t.Errorf("open with nothing selected: %q", msg)
	}
	h.call("tree.expand", map[string]any{"node": "docs"})
	if msg := h.callErr("tree.expand", map[string]any{"node": "README.md"}); !strings.Contains(msg, "no children") {
		t.Errorf("expand a file: %q", msg)
	}
	h.call("tree.select_node", map[string]any{"node": "docs/guide.md"})
	h.call("actions.select", map[string]any{"item": "Open"})
	if res := h.call("viewer.get_visible_range", nil); !strings.Contains(res.Text, `"end":8`) || !strings.Contains(res.Text, `"total":24`) {
		t.Errorf("visible range: %s", res.Text)
	}
	h.call("viewer.scroll_to", map[string]any{"offset": 16})
	if shot := h.screen(); !strings.Contains(shot, "Step 17 of the guide.") || strings.Contains(shot, "Step 16 of") {
		t.Errorf("scrolled screenshot:\n%s", shot)
	}
	if msg := h.callErr("viewer.scroll_to", map[string]any{"offset": 17}); !strings.Contains(msg, "out of range") {
		t.Errorf("scroll past end: %q", msg)
	}
	h.call("actions.select", map[string]any{"item": "New file"})
	var fs struct {
		Paths    []string
		Open     string
		Selected string
	}
	h.resource("model/files", &fs)
	if fs.Selected != "docs/untitled-1.txt" || len(fs.Paths) != 6 {
		t.Fatalf("after new file: %+v", fs)
	}
	h.call("tree.select_node", map[string]any{"node": "docs"})
	h.call("actions.select", map[string]any{"item": "Delete"})
	h.call("confirm_delete.dismiss", nil)
	h.resource("model/files", &fs)
	if len(fs.Paths) != 6 {
		t.Fatalf("dismiss deleted: %+v", fs)
	}
	h.call("actions.select", map[string]any{"index": 2})
	h.call("confirm_delete.confirm", nil)
	h.resource("model/files", &fs)
	if len(fs.Paths) != 3 || fs.Open != "" {
		t.Fatalf("after deleting docs: %+v", fs)
	}
	if msg := h.callErr("confirm_delete.confirm", nil); !strings.Contains(msg, "`confirm_delete` is not in the session's current view") {
		t.Errorf("confirm after close: %q", msg)
	}
	h.call("tree.collapse", map[string]any{"node": "src"})
}

func TestPlayerEndToEnd(t *testing.T) {
	h := start(t, "player")
	h.call("scrubber.play", nil)
	h.call("scrubber.seek", map[string]any{"position": 90})
	res := h.call("scrubber.get_position", nil)
	if !strings.Contains(res.Text, `"playing":true`) || !strings.Contains(res.Text, `"position":90`) {
		t.Errorf("position: %s", res.Text)
	}
	if msg := h.callErr("scrubber.seek", map[string]any{"position": 1000}); !strings.Contains(msg, "out of range") {
		t.Errorf("seek past end: %q", msg)
	}
	if _, err := h.m.SendKey(context.Background(), h.id, session.Key{Key: "right"}); err != nil {
		t.Fatal(err)
	}
	h.call("scrubber.pause", nil)
	var pb struct {
		Track    string
		Position float64
		Playing  bool
	}
	h.resource("model/playback", &pb)
	if pb.Position != 95 || pb.Playing || pb.Track != "Overture" {
		t.Errorf("playback %+v", pb)
	}
	if shot := h.screen(); !strings.Contains(shot, "⏸ 1:35/3:05") || !strings.Contains(shot, "Track 1/3: Overture") {
		t.Errorf("screenshot:\n%s", shot)
	}
	h.call("next.click", nil)
	if res := h.call("levels.get_range", nil); !strings.Contains(res.Text, `"count":32`) || !strings.Contains(res.Text, "Interlude") {
		t.Errorf("chart range: %s", res.Text)
	}
	if res := h.call("levels.get_data", nil); !strings.Contains(res.Text, `"name":"level"`) {
		t.Errorf("chart data: %s", res.Text)
	}
}

func TestWizardEndToEnd(t *testing.T) {
	h := start(t, "wizard")
	if h.hasTool("next.click") {
		t.Error("next is disabled before a plan is chosen, yet derived a tool")
	}
	if msg := h.callErr("steps.select_tab", map[string]any{"tab": "Review"}); !strings.Contains(msg, "not reachable") {
		t.Errorf("jump ahead: %q", msg)
	}
	if res := h.call("plan.get_options", nil); !strings.Contains(res.Text, "Enterprise") {
		t.Errorf("options %s", res.Text)
	}
	h.call("plan.select", map[string]any{"option": "Team"})
	if res := h.call("plan.get_selected", nil); !strings.Contains(res.Text, `"selected":"Team"`) {
		t.Errorf("selected %s", res.Text)
	}
	h.call("next.click", nil)
	if msg := h.callErr("plan.select", map[string]any{"option": "Free"}); !strings.Contains(msg, "`plan` is not in the session's current view") {
		t.Errorf("plan on step 2: %q", msg)
	}
	h.call("terms.toggle", nil)
	h.call("notes.type_into", map[string]any{"text": "call me"})
	if res := h.call("notes.get_value", nil); !strings.Contains(res.Text, "call me") {
		t.Errorf("notes %s", res.Text)
	}
	if res := h.call("steps.get_tabs", nil); !strings.Contains(res.Text, `"selected":"Terms"`) {
		t.Errorf("tabs %s", res.Text)
	}
	h.call("steps.select_tab", map[string]any{"tab": "Review"})
	h.call("finish.click", nil)
	h.call("confirm.dismiss", nil)
	h.call("finish.click", nil)
	if shot := h.screen(); !strings.Contains(shot, "Sign up on the Team plan?") {
		t.Errorf("modal not drawn:\n%s", shot)
	}
	h.call("confirm.confirm", nil)
	var w WizardModel
	h.resource("model/answers", &w)
	if !w.Done || w.Plan != 1 || !w.Terms || w.Notes != "call me" {
		t.Errorf("answers %+v", w)
	}
	h.call("restart.click", nil)
	h.model(&w)
	if w.Done || w.Plan != -1 {
		t.Errorf("restart: %+v", w)
	}
}

// TestDemosRestore snapshots every demo after a change and restores it into
// a fresh manager with the same model.
func TestDemosRestore(t *testing.T) {
	ctx := context.Background()
	r := session.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	store := session.NewMemoryStore()
	m1, err := session.NewManager(session.ManagerConfig{Registry: r, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]string{}
	for _, name := range DemoNames() {
		if _, err := m1.Start(ctx, name, name, "p-"+name); err != nil {
			t.Fatal(err)
		}
		if _, err := m1.SendKey(ctx, name, session.Key{Key: "right"}); err != nil {
			t.Fatal(err)
		}
		b, _ := m1.Model(name)
		models[name] = string(b)
	}
	if err := m1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m2, err := session.NewManager(session.ManagerConfig{Registry: r, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(ctx)
	if err := m2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	for name, want := range models {
		b, err := m2.Model(name)
		if err != nil || string(b) != want {
			t.Errorf("%s: restored %s (%v), want %s", name, b, err, want)
		}
	}
	if _, err := m2.Call(ctx, "counter", "counter.inc.click", nil); err != nil {
		t.Error(err)
	}
}
