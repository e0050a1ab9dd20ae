package apps

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
)

// The default startable set is pinned: a new demo becomes startable only
// through a reviewed change to this list.
func TestDemoNamesPinned(t *testing.T) {
	want := []string{"counter", "login", "todo", "table", "files", "player", "wizard", "jobs"}
	if got := DemoNames(); !slices.Equal(got, want) {
		t.Fatalf("DemoNames() = %v, want %v", got, want)
	}
	r := session.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	if err := Register(r); err == nil {
		t.Error("registering twice succeeded")
	}
	if got := r.DefaultStartable(); !slices.Equal(got, want) {
		t.Errorf("default startable %v", got)
	}
}

// TestDemosCoverEveryWidgetKind renders every state the other tests reach
// and checks that together the demos use every built-in kind.
func TestDemosCoverEveryWidgetKind(t *testing.T) {
	want := []string{"button", "text_input", "password_field", "text_area", "select_list", "checkbox", "tabs",
		"menu", "modal", "table", "tree", "viewport", "scrubber", "chart", "text", "column", "row", "box",
		"progress", "status_bar"}
	seen := map[string]bool{}
	var visit func(n session.Node)
	visit = func(n session.Node) {
		seen[n.Kind()] = true
		if c, ok := n.(session.Container); ok {
			for _, ch := range c.Children() {
				visit(ch)
			}
		}
	}
	views := []session.Node{
		Files{}.View(FilesModel{Files: initialFiles(), Confirm: true, Selected: "README.md"}),
		Wizard{}.View(WizardModel{Plan: 0, Terms: true, Step: 1}),
		Wizard{}.View(WizardModel{Plan: 0, Terms: true, Step: 2, Confirming: true}),
	}
	for _, d := range demos(Bounds{}) {
		app := d.factory()
		m, err := app.Init()
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, app.View(m))
	}
	for _, v := range views {
		visit(v)
	}
	for _, k := range want {
		if !seen[k] {
			t.Errorf("no demo uses %s", k)
		}
	}
}

func TestDemosRejectForeignMessages(t *testing.T) {
	for _, d := range demos(Bounds{}) {
		app := d.factory()
		m, _ := app.Init()
		if _, err := app.Update(m, struct{}{}); err == nil {
			t.Errorf("%s accepted an unknown message", d.name)
		}
		if _, err := app.Update("not a model", session.KeyPress{}); err == nil {
			t.Errorf("%s accepted a foreign model", d.name)
		}
	}
}

func TestLoginEndToEnd(t *testing.T) {
	h := start(t, "login")
	h.call("username.type_into", map[string]any{"text": "demo"})
	if got := h.call("username.get_value", nil); !strings.Contains(got.Text, `"demo"`) {
		t.Errorf("username: %s", got.Text)
	}
	h.call("password.type_into", map[string]any{"text": "wrong"})
	h.call("submit.click", nil)
	var st struct {
		User, Status string
		Locked       bool
	}
	h.resource("model/status", &st)
	if st.User != "" || !strings.Contains(st.Status, "1 of 3") {
		t.Fatalf("after a wrong password: %+v", st)
	}
	h.call("password.type_into", map[string]any{"text": "hunter2"})
	if shot := h.screen(); strings.Contains(shot, "hunter2") || !strings.Contains(shot, "Password: [*******]") {
		t.Errorf("screenshot shows the password:\n%s", shot)
	}
	h.call("submit.click", nil)
	h.resource("model/status", &st)
	if st.User != "demo" || st.Status != "Signed in as demo." {
		t.Fatalf("after the right password: %+v", st)
	}
	if msg := h.callErr("password.type_into", map[string]any{"text": "x"}); !strings.Contains(msg, "`password`") {
		t.Errorf("password after sign-in: %q", msg)
	}
	h.call("logout.click", nil)
	for range 3 {
		h.call("submit.click", nil)
	}
	h.resource("model/status", &st)
	if !st.Locked {
		t.Errorf("three failures did not lock: %+v", st)
	}
	if msg := h.callErr("submit.click", nil); !strings.Contains(msg, "no longer offers") {
		t.Errorf("submit on a locked form: %q", msg)
	}
}

func TestTodoEndToEnd(t *testing.T) {
	h := start(t, "todo")
	for _, title := range []string{"write tests", "ship", "rest"} {
		h.call("new.type_into", map[string]any{"text": title})
		h.call("add.click", nil)
	}
	h.call("item_1.toggle", nil) // "ship" done
	var items struct {
		Items  []TodoItem
		Filter string
	}
	h.resource("model/items", &items)
	if len(items.Items) != 3 || !items.Items[1].Done || items.Items[0].Done {
		t.Fatalf("items %+v", items)
	}
	h.call("filter.select_tab", map[string]any{"tab": "Active"})
	if res := h.call("item_1.get_checked", nil); !strings.Contains(res.Text, "false") {
		t.Errorf("slot 1 under Active should be 'rest', unchecked: %s", res.Text)
	}
	h.call("delete_0.click", nil) // deletes "write tests"
	h.call("filter.select_tab", map[string]any{"index": 2})
	h.resource("model/items", &items)
	if len(items.Items) != 2 || items.Items[0].Title != "ship" || items.Filter != "Done" {
		t.Fatalf("after delete: %+v", items)
	}
	if msg := h.callErr("item_1.toggle", nil); !strings.Contains(msg, "`item_1`") {
		t.Errorf("slot 1 is empty under Done: %q", msg)
	}
	if msg := h.callErr("add.click", nil); !strings.Contains(msg, "`add`") {
		t.Errorf("add with an empty draft: %q", msg)
	}
	if shot := h.screen(); !strings.Contains(shot, "[x] ship") || !strings.Contains(shot, "1 item left") {
		t.Errorf("screenshot:\n%s", shot)
	}
}

func TestTableEndToEnd(t *testing.T) {
	h := start(t, "table")
	res := h.call("elements.get_rows", map[string]any{"limit": 500})
	rows := res.Structured.(map[string]any)["rows"].([]map[string]any)
	if len(rows) != 60 {
		t.Fatalf("%d rows", len(rows))
	}
	h.call("elements.sort", map[string]any{"column": "mass", "direction": "desc"})
	res = h.call("elements.get_rows", map[string]any{"limit": 2})
	if !strings.Contains(res.Text, `"key":"Nd"`) || !strings.Contains(res.Text, `"key":"Pr"`) {
		t.Errorf("heaviest first: %s", res.Text)
	}
	h.call("elements.sort", map[string]any{"column": "name"})
	h.call("elements.select_row", map[string]any{"row": 0})
	var sel ElementsModel
	h.resource("model/selection", &sel)
	if sel.Selected != "Al" || sel.SortColumn != "name" || sel.SortDirection != "asc" {
		t.Errorf("selection %+v", sel)
	}
	h.call("elements.select_row", map[string]any{"key": "Fe"})
	if shot := h.screen(); !strings.Contains(shot, "Iron (Fe): atomic number 26, mass 55.845 u") {
		t.Errorf("screenshot:\n%s", shot)
	}
	if msg := h.callErr("elements.sort", map[string]any{"column": "colour"}); !strings.Contains(msg, "colour") {
		t.Errorf("unknown column: %q", msg)
	}
	if _, err := h.m.SendKey(context.Background(), h.id, session.Key{Key: "escape"}); err != nil {
		t.Fatal(err)
	}
	h.model(&sel)
	if sel.Selected != "" {
		t.Errorf("escape kept %q selected", sel.Selected)
	}
}
