package session

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedStore holds every Save until the test lets it through.
type gatedStore struct {
	*MemoryStore
	entered chan Snapshot
	gate    chan struct{}
}

func (g *gatedStore) Save(s Snapshot) error {
	g.entered <- s
	<-g.gate
	return g.MemoryStore.Save(s)
}

// The runtime runs an update's effects in order: save durably, then answer
// and publish, then announce. While the save is in progress nothing of the
// new state is visible: not the model, not the answer, not an event. The
// answer does not wait for the announcement of resource changes (a change
// of the tool set is another matter: see the next test).
func TestUpdateOrderIsSaveReplyPublish(t *testing.T) {
	store := &gatedStore{MemoryStore: NewMemoryStore(), entered: make(chan Snapshot, 1), gate: make(chan struct{})}
	f := newFixture(t, func(c *ManagerConfig) { c.Store = store })
	close(store.gate)
	f.start("s")
	<-store.entered
	store.gate = make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(store.gate) }) })

	events := make(chan Event, 64)
	hold := make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(hold) }) })
	cancel := f.m.Subscribe(func(ev Event) {
		events <- ev
		<-hold // a slow subscriber must not hold up the answer
	})
	defer cancel()

	answered := make(chan Result, 1)
	go func() {
		res, err := f.m.Call(f.ctx, "s", "s.inc.click", nil)
		if err != nil {
			t.Error(err)
		}
		answered <- res
	}()
	var snap Snapshot
	select {
	case snap = <-store.entered: // the actor is inside Save
	case ev := <-events:
		t.Fatalf("announced before the save: %+v", ev)
	case res := <-answered:
		t.Fatalf("answered before the save: %+v", res)
	case <-time.After(10 * time.Second):
		t.Fatal("the update never reached the store")
	}
	if !strings.Contains(string(snap.Model), `"count":1`) {
		t.Fatalf("saving %s, want the new state", snap.Model)
	}
	// Nothing may come out until the save returns. What must not happen
	// has no event to await, and a right order never ends this wait: so
	// watch for 100 ms (sampling every 5 ms), to give a wrong order the
	// chance to show.
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m, _ := f.m.Model("s"); !strings.Contains(string(m), `"count":0`) {
			t.Fatalf("model published before its save: %s", m)
		}
		select {
		case res := <-answered:
			t.Fatalf("answered before the save returned: %+v", res)
		case ev := <-events:
			t.Fatalf("announced before the save returned: %+v", ev)
		default:
		}
	}
	open.Do(func() { close(store.gate) })
	select {
	case res := <-answered:
		if res.IsError {
			t.Fatal(res.Text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer while the subscriber is held: the answer waits for the announcement")
	}
	if m, _ := f.m.Model("s"); !strings.Contains(string(m), `"count":1`) {
		t.Fatalf("model after the answer: %s", m)
	}
	select {
	case ev := <-events:
		if ev.Session != "s" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event after the answer")
	}
	release.Do(func() { close(hold) })
}

// changes, the pure part of publishing, lists what a render changed. The
// context resource is not rendered: it changed when its parts did (the
// other resources, the tool names).
func TestChangesListsWhatARenderChanged(t *testing.T) {
	info := Info{ID: "s", Principal: "p"}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	old := map[string]json.RawMessage{"model/a": raw(`{"n":1}`), ResourceWidgets: raw(`[1]`)}
	cur := map[string]json.RawMessage{"model/a": raw(`{"n":2}`), ResourceWidgets: raw(`[1]`), "model/b": raw(`{}`)}
	same := map[string]json.RawMessage{"model/a": raw(`{"n":1}`), ResourceWidgets: raw(`[1]`)}
	one := []Tool{{Name: "s.discover_tools"}}
	two := []Tool{{Name: "s.discover_tools"}, {Name: "s.w.click"}}
	redefined := []Tool{{Name: "s.discover_tools", Description: "other"}}
	for i, tc := range []struct {
		old            map[string]json.RawMessage
		cur            map[string]json.RawMessage
		newTools       []Tool
		tools, listens bool
		want           []string
	}{
		{old, cur, one, false, false, nil},
		{old, cur, one, true, false, []string{"tools"}},
		{nil, cur, one, true, true, []string{"tools"}},
		{old, cur, one, false, true, []string{"context", "model/a", "model/b"}},
		{old, cur, one, true, true, []string{"tools", "context", "model/a", "model/b"}},
		{old, same, one, false, true, nil},
		{old, same, two, true, true, []string{"tools", "context"}}, // a tool was added: its name is in context
		{old, same, redefined, true, true, []string{"tools"}},      // same names: context is unchanged
	} {
		var got []string
		for _, ev := range changes(info, tc.old, tc.cur, one, tc.newTools, tc.tools, tc.listens) {
			if ev.Kind == ToolsChanged {
				got = append(got, "tools")
				continue
			}
			got = append(got, ev.Resource)
			if ev.Resource == "model/a" && !strings.Contains(string(ev.Patch()), `"replace"`) {
				t.Errorf("Test %d: model/a patch %s", i, ev.Patch())
			}
			if ev.Resource == "model/b" && string(ev.Patch()) != `[{"op":"replace","path":"","value":{}}]` {
				t.Errorf("Test %d: model/b patch %s", i, ev.Patch())
			}
			if !strings.HasPrefix(ev.Resource, "model/") && ev.Patch != nil {
				t.Errorf("Test %d: %s has a patch", i, ev.Resource)
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("Test %d: Expected %v but got %v", i, tc.want, got)
		}
	}
}

// with leaves the published set alone: a copy takes the change.
func TestStickyWithCopiesOnChange(t *testing.T) {
	s := newSticky("s", 3)
	a := Tool{Name: "s.a.click", Session: "s"}
	next, changed, refused := s.with([]Tool{a})
	if !changed || refused != 0 || next == s || len(s.tools) != 1 || len(next.tools) != 2 {
		t.Fatalf("adding: changed=%v refused=%d same=%v old=%d new=%d", changed, refused, next == s, len(s.tools), len(next.tools))
	}
	same, changed, _ := next.with([]Tool{a})
	if changed || same != next {
		t.Fatal("re-adding the same tool copied the set")
	}
	b, c := Tool{Name: "s.b.click", Session: "s"}, Tool{Name: "s.c.click", Session: "s"}
	full, _, _ := next.with([]Tool{b})
	if _, changed, refused := full.with([]Tool{c}); changed || refused != 1 {
		t.Fatalf("at the limit: changed=%v refused=%d", changed, refused)
	}
}

// A call that changes the tool set answers only after the change was
// announced: the node's tool index learns the set from that announcement,
// and the caller's next call may be the tool this one made (open a dialog,
// then confirm it). A subscriber that takes its time still has heard of the
// new tool when the answer arrives; resource changes are announced after.
func TestToolSetChangeIsAnnouncedBeforeTheAnswer(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	var heard, resourcesFirst atomic.Bool
	// A slow subscriber: it hears the tool set change and holds on to it
	// until the test lets go; the answer must wait for it.
	hearing, letGo := make(chan struct{}), make(chan struct{})
	cancel := f.m.Subscribe(func(ev Event) {
		switch ev.Kind {
		case ToolsChanged:
			close(hearing)
			<-letGo
			heard.Store(true)
		case ResourceChanged:
			if !heard.Load() {
				resourcesFirst.Store(true)
			}
		}
	})
	defer cancel()
	type answer struct {
		res   Result
		err   error
		heard bool // whether the subscriber had heard when the call returned
	}
	answered := make(chan answer, 1)
	go func() {
		res, err := f.m.Call(f.ctx, "s", "s.modal.click", nil)
		answered <- answer{res, err, heard.Load()}
	}()
	select {
	case <-hearing:
	case a := <-answered:
		t.Fatalf("the call answered (%+v %v) before its new tool set (s.dlg.*) was announced", a.res, a.err)
	case <-time.After(10 * time.Second):
		t.Fatal("the tool set change was never announced")
	}
	select {
	case a := <-answered:
		t.Fatalf("the call answered (%+v %v) while the subscriber was still hearing its tool set", a.res, a.err)
	default:
	}
	close(letGo)
	var a answer
	select {
	case a = <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after the subscriber let go")
	}
	if a.err != nil || a.res.IsError {
		t.Fatalf("opening the dialog: %v %+v", a.err, a.res)
	}
	if !a.heard {
		t.Fatal("the call answered before its new tool set (s.dlg.*) was announced")
	}
	if resourcesFirst.Load() {
		t.Error("a resource change was announced before the tool set change")
	}
	if _, err := f.m.Call(f.ctx, "s", "s.dlg.confirm", nil); err != nil {
		t.Fatal(err)
	}
}
