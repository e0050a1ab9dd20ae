package apps

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
)

// harness drives one demo session through a real Manager.
type harness struct {
	t   *testing.T
	m   *session.Manager
	id  string
	ctx context.Context
}

func start(t *testing.T, app string) *harness {
	t.Helper()
	r := session.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(session.ManagerConfig{Registry: r, Store: session.NewMemoryStore(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := m.Start(ctx, "s1", app, "alice")
	if err != nil {
		t.Fatalf("starting %s: %v", app, err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &harness{t: t, m: m, id: info.ID, ctx: ctx}
}

// call runs a tool and fails the test on a transport error or an IsError
// result.
func (h *harness) call(tool string, args map[string]any) session.Result {
	h.t.Helper()
	res, err := h.m.Call(h.ctx, h.id, h.id+"."+tool, args)
	if err != nil {
		h.t.Fatalf("calling %s: %v", tool, err)
	}
	if res.IsError {
		h.t.Fatalf("calling %s: tool error: %s", tool, res.Text)
	}
	return res
}

// callErr runs a tool that must answer a tool error, returning its text.
func (h *harness) callErr(tool string, args map[string]any) string {
	h.t.Helper()
	res, err := h.m.Call(h.ctx, h.id, h.id+"."+tool, args)
	if err != nil {
		h.t.Fatalf("calling %s: %v", tool, err)
	}
	if !res.IsError {
		h.t.Fatalf("calling %s: want a tool error, got %q", tool, res.Text)
	}
	return res.Text
}

// model decodes the session's model into v.
func (h *harness) model(v any) {
	h.t.Helper()
	b, err := h.m.Model(h.id)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) resource(name string, v any) {
	h.t.Helper()
	b, err := h.m.ReadResource(h.id, name)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) hasTool(name string) bool {
	h.t.Helper()
	tools, err := h.m.Tools(h.id)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, t := range tools {
		if t.Name == h.id+"."+name {
			return true
		}
	}
	return false
}

func (h *harness) screen() string {
	h.t.Helper()
	s, err := h.m.Screenshot(h.id, 0, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}
