package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// MaxPerPrincipal 0 is no per-principal cap, as the policy's
// limits.sessions_per_principal: 0 documents; it used to become 16.
func TestZeroPerPrincipalCapIsUnlimited(t *testing.T) {
	f := newFixture(t, func(c *ManagerConfig) { c.MaxPerPrincipal, c.MaxSessions = 0, 40 })
	for i := range 20 {
		if _, err := f.m.Start(f.ctx, fmt.Sprintf("s%d", i), "probe", "alice"); err != nil {
			t.Fatalf("session %d of one principal with no per-principal cap: %v", i+1, err)
		}
	}
}

func TestStartRefusals(t *testing.T) {
	calls := 0
	f := newFixture(t, func(c *ManagerConfig) {
		_ = c.Registry.Register("hidden", "not startable", func() App { calls++; return &probe{} })
		c.MaxPerPrincipal, c.MaxSessions = 2, 3
	})
	if _, err := f.m.Start(f.ctx, "h", "hidden", "alice"); !errors.Is(err, ErrNotStartable) {
		t.Errorf("unstartable app: %v", err)
	}
	if _, err := f.m.Start(f.ctx, "h", "nosuch", "alice"); !errors.Is(err, ErrNotStartable) {
		t.Errorf("unknown app: %v", err)
	}
	if calls != 0 {
		t.Errorf("an unstartable app's factory ran %d times", calls)
	}
	for _, id := range []string{"a.b", strings.Repeat("x", 33), "a b", "é"} {
		if _, err := f.m.Start(f.ctx, id, "probe", "alice"); !errors.Is(err, ErrInvalidID) {
			t.Errorf("id %q: %v", id, err)
		}
	}
	gen := f.start("")
	if !ValidID(gen.ID) || gen.Status != "running" || gen.Principal != "alice" {
		t.Errorf("generated info %+v", gen)
	}
	f.start("one")
	if _, err := f.m.Start(f.ctx, "one", "probe", "bob"); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate id: %v", err)
	}
	if _, err := f.m.Start(f.ctx, "two", "probe", "alice"); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "principal") {
		t.Errorf("per-principal cap: %v", err)
	}
	if _, err := f.m.Start(f.ctx, "three", "probe", "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Start(f.ctx, "four", "probe", "carol"); !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "node") {
		t.Errorf("node cap: %v", err)
	}
	if err := f.m.Stop(f.ctx, "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Start(f.ctx, "two", "probe", "alice"); err != nil {
		t.Errorf("after a stop the principal may start again: %v", err)
	}
	if got := len(f.m.List()); got != 3 {
		t.Errorf("List has %d sessions", got)
	}
	if names := f.m.Startable(); len(names) != 1 || names[0].Name != "probe" {
		t.Errorf("Startable = %v", names)
	}
}

func TestNewManagerValidates(t *testing.T) {
	if _, err := NewManager(ManagerConfig{}); err == nil {
		t.Error("no registry accepted")
	}
	if _, err := NewManager(ManagerConfig{Registry: NewRegistry(), Startable: []string{"ghost"}}); err == nil {
		t.Error("unregistered startable app accepted")
	}
	r := NewRegistry()
	_ = r.Register("a", "", func() App { return &probe{} })
	_ = r.SetDefaultStartable("a")
	m, err := NewManager(ManagerConfig{Registry: r})
	if err != nil || len(m.Startable()) != 1 {
		t.Errorf("nil Startable must take the registry default: %v %v", err, m.Startable())
	}
	m, _ = NewManager(ManagerConfig{Registry: r, Startable: []string{}})
	if len(m.Startable()) != 0 {
		t.Error("empty Startable must allow nothing")
	}
}

func TestCallsActOnTheCurrentView(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	tests := []struct {
		tool, want string
		isErr      bool
		before     string // button to click first
	}{
		{tool: "inc.click", want: "click applied to widget `inc`"},
		{tool: "nomsg.click", want: "widget `nomsg` is a button without an on-click message", isErr: true},
		{tool: "fail.click", want: "refusing on purpose", isErr: true},
		{tool: "panic.click", want: "update panicked: boom", isErr: true},
		{tool: "victim.click", before: "hide", want: "widget `victim` is not in the session's current view", isErr: true},
		{tool: "thing.click", before: "swap", want: "widget `thing` is now a checkbox, not a button", isErr: true},
		{tool: "nosuch.click", want: "session `s` has no tool `s.nosuch.click`", isErr: true},
		{tool: "pw.get_value", want: "has no tool", isErr: true},
	}
	for _, tt := range tests {
		if tt.before != "" {
			if res := f.call("s", tt.before+".click", nil); res.IsError {
				t.Fatal(res.Text)
			}
		}
		res := f.call("s", tt.tool, nil)
		if res.IsError != tt.isErr || !strings.Contains(res.Text, tt.want) {
			t.Errorf("%s: got %+v, want IsError=%v with %q", tt.tool, res, tt.isErr, tt.want)
		}
	}
	if got := f.count("s"); got != 1 {
		t.Errorf("count = %d after one good click and a failed update and a panic", got)
	}
	// The session survived the panic and still runs updates.
	f.call("s", "inc.click", nil)
	if got := f.count("s"); got != 2 {
		t.Errorf("count = %d", got)
	}
	// A checkbox now holds the id: its own tools work.
	if res := f.call("s", "thing.get_checked", nil); res.IsError || !strings.Contains(res.Text, `"checked":false`) {
		t.Errorf("thing.get_checked: %+v", res)
	}
	if _, err := f.m.Call(f.ctx, "nope", "nope.inc.click", nil); !errors.Is(err, ErrNotRunning) {
		t.Errorf("call to a stopped session: %v", err)
	}
}

func TestBusyAndTimeout(t *testing.T) {
	f := newFixture(t, func(c *ManagerConfig) { c.Mailbox = 1; c.CallTimeout = 50 * time.Millisecond })
	f.start("s")
	_, err := f.m.Call(f.ctx, "s", "s.block.click", nil)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "may still apply") {
		t.Fatalf("blocked call: %v", err)
	}
	<-f.probe.entered // the actor is inside Update
	// The mailbox holds one call; the next is refused at once.
	queued := make(chan error, 1)
	go func() {
		_, err := f.m.Call(context.Background(), "s", "s.inc.click", nil)
		queued <- err
	}()
	eventually(t, func() bool { return f.m.actor("s").waiting() == 1 })
	startBusy := time.Now()
	if _, err := f.m.Call(f.ctx, "s", "s.inc.click", nil); !errors.Is(err, ErrBusy) {
		t.Errorf("full mailbox: %v", err)
	}
	if d := time.Since(startBusy); d > 40*time.Millisecond {
		t.Errorf("busy took %v, want immediate", d)
	}
	close(f.probe.gate) // the timed-out update still applies
	if err := <-queued; !errors.Is(err, ErrTimeout) && err != nil {
		t.Errorf("queued call: %v", err)
	}
	eventually(t, func() bool { return f.count("s") >= 100 })
}

func TestCircuitBreaker(t *testing.T) {
	f := newFixture(t, func(c *ManagerConfig) { c.BreakerTimeout = 30 * time.Millisecond })
	f.start("s")
	// Widget errors never count.
	f.call("s", "hide.click", nil)
	for range 10 {
		if res := f.call("s", "victim.click", nil); !res.IsError {
			t.Fatal("victim is hidden")
		}
	}
	f.call("s", "hide.click", nil)
	if res := f.call("s", "victim.click", nil); res.IsError {
		t.Fatalf("widget errors opened the breaker: %s", res.Text)
	}
	fail := func(n int) {
		for range n {
			if res := f.call("s", "fail.click", nil); !res.IsError {
				t.Fatal("fail succeeded")
			}
		}
	}
	fail(2)
	// The widget gone in between neither counts nor resets the run of faults.
	f.call("s", "hide.click", nil)
	fail(3)
	f.call("s", "hide.click", nil)
	fail(3)
	if _, err := f.m.Call(f.ctx, "s", "s.fail.click", nil); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after 5 faults: %v", err)
	}
	if res := f.call("s", "inc.click", nil); res.IsError {
		t.Errorf("another tool's breaker opened: %s", res.Text)
	}
	b := f.m.actor("s").breaker("s.fail.click")
	eventually(t, func() bool { return b.State() == gobreaker.StateHalfOpen })
	if res := f.call("s", "fail.click", nil); !res.IsError {
		t.Fatal("half-open call did not run")
	}
	if b.State() != gobreaker.StateOpen {
		t.Errorf("a failed half-open call leaves the breaker %v", b.State())
	}
}

func TestConcurrentCallsApplyInOrder(t *testing.T) {
	f := newFixture(t, func(c *ManagerConfig) { c.Mailbox = 256 })
	f.start("s")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				res, err := f.m.Call(context.Background(), "s", "s.inc.click", nil)
				if err != nil || res.IsError {
					t.Errorf("%v %v", err, res)
				}
			}
		})
	}
	wg.Wait()
	if got := f.count("s"); got != 160 {
		t.Errorf("count = %d, want 160", got)
	}
}

func TestStickyToolsAndEvents(t *testing.T) {
	f := newFixture(t, nil)
	var mu sync.Mutex
	var evs []Event
	cancel := f.m.Subscribe(func(e Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	})
	defer cancel()
	f.start("s")
	count := func(kind EventKind, res string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, e := range evs {
			if e.Kind == kind && e.Session == "s" && e.Resource == res {
				n++
			}
		}
		return n
	}
	if count(Started, "") != 1 || count(ToolsChanged, "") != 1 {
		t.Fatalf("start events: %+v", evs)
	}
	f.call("s", "modal.click", nil) // open: dlg.confirm, dlg.dismiss appear
	f.call("s", "dlg.dismiss", nil)
	f.call("s", "modal.click", nil) // open again: no change
	if got := count(ToolsChanged, ""); got != 2 {
		t.Errorf("ToolsChanged %d times, want 2 (start, first modal)", got)
	}
	tools, _ := f.m.Tools("s")
	f.call("s", "dlg.confirm", nil)
	after, _ := f.m.Tools("s")
	if len(after) != len(tools) || tools[0].Name != "s.discover_tools" {
		t.Errorf("the sticky set shrank or lost discover_tools: %d -> %d", len(tools), len(after))
	}
	if res := f.call("s", "dlg.confirm", nil); !res.IsError || !strings.Contains(res.Text, "`dlg`") {
		t.Errorf("confirm on a closed modal: %+v", res)
	}
	f.call("s", "inc.click", nil)
	// Events are announced after the answer, from the session's worker.
	var patch json.RawMessage
	eventually(t, func() bool { return count(ResourceChanged, "model/count") > 0 })
	mu.Lock()
	for _, e := range evs {
		if e.Kind == ResourceChanged && e.Resource == "model/count" {
			patch = e.Patch()
		}
	}
	mu.Unlock()
	if string(patch) != `[{"op":"replace","path":"/count","value":1}]` {
		t.Errorf("model/count patch %s", patch)
	}
	if count(ResourceChanged, "widgets") == 0 || count(ResourceChanged, "context") == 0 {
		t.Error("no widgets/context change events")
	}
	if err := f.m.Stop(f.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if count(Stopped, "") != 1 {
		t.Error("no Stopped event")
	}
	if _, err := f.m.Tools("s"); !errors.Is(err, ErrNotRunning) {
		t.Errorf("tools after stop: %v", err)
	}
}

func TestDiscoverTools(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	f.start("t")
	res := f.call("s", "discover_tools", map[string]any{"query": "password"})
	if res.IsError || !strings.Contains(res.Text, "s.pw.type_into") || strings.Contains(res.Text, "t.pw") {
		t.Errorf("discover: %s", res.Text)
	}
	if res := f.call("s", "discover_tools", map[string]any{"query": "zzzz"}); res.Text != "no tools match" {
		t.Errorf("no match: %q", res.Text)
	}
	if res := f.call("s", "discover_tools", map[string]any{"query": 5}); !res.IsError {
		t.Error("a non-string query was accepted")
	}
}

func TestSecretsStayOut(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	f.call("s", "pw.type_into", map[string]any{"text": "hunter2"})
	for _, name := range []string{"widgets", "context"} {
		b, err := f.m.ReadResource("s", name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "hunter2") {
			t.Errorf("%s leaks the password: %s", name, b)
		}
	}
	shot, _ := f.m.Screenshot("s", 0, 0)
	if strings.Contains(shot, "hunter2") || !strings.Contains(shot, "[*******]") || !strings.Contains(shot, "[#######]") {
		t.Errorf("screenshot:\n%s", shot)
	}
	model, _ := f.m.Model("s")
	if !strings.Contains(string(model), "hunter2") {
		t.Error("the model itself must hold the secret (it is a sensitive read)")
	}
	names, _ := f.m.ResourceNames("s")
	if strings.Join(names, ",") != "widgets,context,model/count" {
		t.Errorf("resource names %v", names)
	}
	if _, err := f.m.ReadResource("s", "model/nope"); !errors.Is(err, ErrUnknownResource) {
		t.Errorf("unknown resource: %v", err)
	}
}

func TestWarningNamesTheWidget(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	f.call("s", "bad.click", nil)
	f.call("s", "inc.click", nil) // a second render logs nothing new
	logs := f.logs.String()
	if strings.Count(logs, `widget=evil.id`) != 1 {
		t.Errorf("want one warning naming evil.id, logs:\n%s", logs)
	}
}

func TestSendKey(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	if _, err := f.m.SendKey(f.ctx, "s", Key{Key: "enter"}); err != nil {
		t.Fatal(err)
	}
	if got := f.count("s"); got != 5 {
		t.Errorf("count = %d, want 5", got)
	}
	f.call("s", "pw.type_into", map[string]any{"text": "x"})
	f.call("s", "victim.get_value", nil) // reads do not move the focus
	if focus, err := f.m.Focus("s"); err != nil || focus != "pw" {
		t.Errorf("focus %q %v", focus, err)
	}
	if _, err := f.m.SendKey(f.ctx, "s", Key{Key: "a"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := f.m.Model("s"); !strings.Contains(string(b), `"last_focus":"pw"`) {
		t.Errorf("KeyPress.Focus not delivered: %s", b)
	}
}

func TestSnapshotsAndRestore(t *testing.T) {
	f := newFixture(t, nil)
	f.start("s")
	f.call("s", "inc.click", nil)
	f.call("s", "modal.click", nil) // derive the modal's tools
	f.call("s", "dlg.dismiss", nil)
	before, _ := f.m.Tools("s")
	snaps, _ := f.store.Load()
	if len(snaps) != 1 || !strings.Contains(string(snaps[0].Model), `"count":1`) {
		t.Fatalf("snapshots %+v", snaps)
	}
	if err := f.m.Close(f.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.m.Start(f.ctx, "x", "probe", "a"); !errors.Is(err, ErrClosed) {
		t.Errorf("start after close: %v", err)
	}
	m2, err := NewManager(ManagerConfig{Registry: f.m.cfg.Registry, Startable: []string{}, Store: f.store, Logger: f.m.log})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close(context.Background())
	if err := m2.Restore(f.ctx); err != nil {
		t.Fatal(err)
	}
	info, ok := m2.Get("s")
	if !ok || info.Principal != "alice" {
		t.Fatalf("restored info %+v", info)
	}
	after, _ := m2.Tools("s")
	if !equalTools(before, after) {
		t.Errorf("sticky tools not restored: %v vs %v", names(before), names(after))
	}
	res, err := m2.Call(f.ctx, "s", "s.inc.click", nil)
	if err != nil || res.IsError {
		t.Fatal(err, res)
	}
	model, _ := m2.Model("s")
	if !strings.Contains(string(model), `"count":2`) {
		t.Errorf("restored model %s", model)
	}
	if err := m2.Stop(f.ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if snaps, _ := f.store.Load(); len(snaps) != 0 {
		t.Error("stop kept the snapshot")
	}
}

// badStore fails every Save once full is set.
type badStore struct {
	MemoryStore
	full atomic.Bool
}

func (b *badStore) Save(s Snapshot) error {
	if b.full.Load() {
		return errors.New("disk full")
	}
	return b.MemoryStore.Save(s)
}

// A snapshot that cannot be saved refuses what it would have acknowledged:
// the start, or the update (the model stays as it was). The error reaches
// the caller and the log.
func TestStoreErrorsRefuseTheWrite(t *testing.T) {
	store := &badStore{MemoryStore: *NewMemoryStore()}
	f := newFixture(t, func(c *ManagerConfig) { c.Store = store })
	f.start("s")
	store.full.Store(true)
	res, err := f.m.Call(f.ctx, "s", "s.inc.click", nil)
	// Nothing could be saved, the previous state included: the caller
	// is told to read before retrying.
	if err != nil || !res.IsError || !strings.Contains(res.Text, "disk full") || !strings.Contains(res.Text, "read the session before you retry") {
		t.Fatalf("call with a failing store: %+v, %v", res, err)
	}
	if model, _ := f.m.Model("s"); !strings.Contains(string(model), `"count":0`) {
		t.Errorf("an unsaved update was published: %s", model)
	}
	if _, err := f.m.Start(f.ctx, "t", "probe", "alice"); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("start with a failing store: %v", err)
	}
	if _, ok := f.m.Get("t"); ok {
		t.Error("a session whose start was not saved runs")
	}
	if !strings.Contains(f.logs.String(), "disk full") {
		t.Error("store error not logged")
	}
	store.full.Store(false)
	if res, err := f.m.Call(f.ctx, "s", "s.inc.click", nil); err != nil || res.IsError {
		t.Fatalf("after the disk recovered: %+v, %v", res, err)
	}
	if model, _ := f.m.Model("s"); !strings.Contains(string(model), `"count":1`) {
		t.Errorf("after the disk recovered: %s", model)
	}
}

// recordingRefuser is a store that records a snapshot and then refuses it
// once, as a replicating store does when its standby does not acknowledge
// a write its own journal already took.
type recordingRefuser struct {
	MemoryStore
	refuse atomic.Bool
}

func (r *recordingRefuser) Save(s Snapshot) error {
	if err := r.MemoryStore.Save(s); err != nil {
		return err
	}
	if r.refuse.CompareAndSwap(true, false) {
		return errors.New("standby did not acknowledge")
	}
	return nil
}

// An update whose save is refused after the store recorded it is not
// applied, and the store gets the session's previous state back: a restart
// from it cannot bring back the update the caller was told failed.
func TestARefusedSaveIsUndoneInTheStore(t *testing.T) {
	store := &recordingRefuser{MemoryStore: *NewMemoryStore()}
	f := newFixture(t, func(c *ManagerConfig) { c.Store = store })
	f.start("s")
	store.refuse.Store(true)
	res, err := f.m.Call(f.ctx, "s", "s.inc.click", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text, "not applied") || !strings.Contains(res.Text, "retrying is safe") {
		t.Fatalf("call with a refused save: %+v, %v", res, err)
	}
	saved, err := store.Load()
	if err != nil || len(saved) != 1 || !strings.Contains(string(saved[0].Model), `"count":0`) {
		t.Fatalf("the store holds %+v (%v) after the refused update, want the previous count 0", saved, err)
	}
	if res, _ := f.m.Call(f.ctx, "s", "s.inc.click", nil); res.IsError {
		t.Fatalf("the next click: %s", res.Text)
	}
	if model, _ := f.m.Model("s"); !strings.Contains(string(model), `"count":1`) {
		t.Errorf("after one refused and one applied click: %s", model)
	}
}

// refusingStore fails every Save with err while it is set.
type refusingStore struct {
	MemoryStore
	mu  sync.Mutex
	err error
}

func (r *refusingStore) Save(s Snapshot) error {
	r.mu.Lock()
	err := r.err
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.MemoryStore.Save(s)
}

func (r *refusingStore) refuse(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// A save the session's standbys refused (ErrNotReplicated) refuses the
// write as any failed save does, but it is not the tool's fault: however
// many come in a row (a partition), the tool's breaker stays closed and
// the first call after it runs. A failing disk still opens the breaker.
func TestUnreplicatedSavesDoNotOpenTheBreaker(t *testing.T) {
	store := &refusingStore{MemoryStore: *NewMemoryStore()}
	f := newFixture(t, func(c *ManagerConfig) { c.Store = store })
	f.start("s")
	store.refuse(fmt.Errorf("the owner is cut off: %w", ErrNotReplicated))
	for i := range 20 {
		res, err := f.m.Call(f.ctx, "s", "s.inc.click", nil)
		if err != nil || !res.IsError || !strings.Contains(res.Text, "could not be saved") {
			t.Fatalf("unreplicated save %d: %+v, %v; want the write refused", i, res, err)
		}
	}
	store.refuse(nil)
	if res, err := f.m.Call(f.ctx, "s", "s.inc.click", nil); err != nil || res.IsError {
		t.Fatalf("after 20 unreplicated saves: %+v, %v; want the click to run", res, err)
	}
	store.refuse(errors.New("disk full"))
	for range 20 {
		if _, err := f.m.Call(f.ctx, "s", "s.inc.click", nil); errors.Is(err, ErrCircuitOpen) {
			return
		}
	}
	t.Fatal("20 failed saves to a full disk did not open the breaker")
}
