package session_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

func newDemoManager(t *testing.T, store session.Store) *session.Manager {
	t.Helper()
	r := session.NewRegistry()
	if err := apps.Register(r); err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(session.ManagerConfig{Registry: r, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// A session detached from one manager and adopted by another carries on
// where it was: same id, principal, creation time, model and tools; the
// first manager keeps its snapshot until Release, so a crash in between
// loses nothing, and none after.
func TestDetachThenAdoptMovesASession(t *testing.T) {
	ctx := context.Background()
	fromStore := session.NewMemoryStore()
	from, to := newDemoManager(t, fromStore), newDemoManager(t, session.NewMemoryStore())
	info, err := from.Start(ctx, "mv", "counter", "alice")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := from.Call(ctx, "mv", "mv.inc.click", nil); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := from.Detach(ctx, "mv")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := from.Get("mv"); ok {
		t.Fatal("the detached session still runs on its old manager")
	}
	if left, _ := fromStore.Load(); len(left) != 1 || !strings.Contains(string(left[0].Model), `"count":2`) {
		t.Fatalf("before the peer adopted it, the old manager holds %v", left)
	}
	got, err := to.Adopt(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := from.Release("mv"); err != nil {
		t.Fatal(err)
	}
	if left, _ := fromStore.Load(); len(left) != 0 {
		t.Fatalf("after Release the old manager kept %d snapshots", len(left))
	}
	if got.ID != info.ID || got.Principal != "alice" || !got.Created.Equal(info.Created) {
		t.Fatalf("adopted %+v, want the identity of %+v", got, info)
	}
	if m, _ := to.Model("mv"); !strings.Contains(string(m), `"count":2`) {
		t.Fatalf("adopted model %s, want count 2", m)
	}
	if _, err := to.Call(ctx, "mv", "mv.inc.click", nil); err != nil {
		t.Fatalf("driving the adopted session: %v", err)
	}
	if _, err := from.Detach(ctx, "mv"); err == nil {
		t.Fatal("detaching a session that is not running succeeded")
	}
}
