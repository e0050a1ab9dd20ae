package session

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"
)

// probeModel is the model of the probe app the manager tests drive.
type probeModel struct {
	Count     int    `json:"count"`
	ShowModal bool   `json:"show_modal"`
	Swap      bool   `json:"swap"`
	Hide      bool   `json:"hide"`
	Secret    string `json:"secret"`
	BadWidget bool   `json:"bad_widget"`
	LastFocus string `json:"last_focus,omitempty"`
}

// probe is an app whose messages exercise the runtime: "block" waits on
// gate after signalling entered, "fail" errors, "panic" panics.
type probe struct {
	gate    chan struct{}
	entered chan struct{}
}

func (p *probe) Init() (Model, error) { return probeModel{}, nil }

func (p *probe) Update(m Model, msg Msg) (Model, error) {
	pm := m.(probeModel)
	switch msg := msg.(type) {
	case string:
		switch msg {
		case "inc":
			pm.Count++
		case "fail":
			return nil, errors.New("refusing on purpose")
		case "panic":
			panic("boom")
		case "block":
			p.entered <- struct{}{}
			<-p.gate
			pm.Count += 100
		case "modal":
			pm.ShowModal = !pm.ShowModal
		case "swap":
			pm.Swap = !pm.Swap
		case "hide":
			pm.Hide = !pm.Hide
		case "bad":
			pm.BadWidget = true
		}
	case TypeInto:
		pm.Secret = msg.Text
	case Confirm, Dismiss:
		pm.ShowModal = false
	case KeyPress:
		pm.Count += len(msg.Key.Key)
		pm.LastFocus = msg.Focus
	}
	return pm, nil
}

func (p *probe) View(m Model) Node {
	pm := m.(probeModel)
	items := []Node{
		Text{ID: "count", Text: "count " + strconv.Itoa(pm.Count)},
		Button{ID: "inc", Label: "+", OnClick: "inc"},
		Button{ID: "panic", OnClick: "panic"},
		Button{ID: "block", OnClick: "block"},
		Button{ID: "modal", OnClick: "modal"},
		Button{ID: "swap", OnClick: "swap"},
		Button{ID: "hide", OnClick: "hide"},
		Button{ID: "bad", OnClick: "bad"},
		Button{ID: "nomsg"},
		PasswordField{ID: "pw", Value: pm.Secret},
		TextInput{ID: "masked", Mask: '#', Value: pm.Secret},
	}
	if !pm.Hide {
		items = append(items, Button{ID: "victim", OnClick: "inc"}, Button{ID: "fail", OnClick: "fail"})
	}
	if pm.Swap {
		items = append(items, Checkbox{ID: "thing"})
	} else {
		items = append(items, Button{ID: "thing", OnClick: "inc"})
	}
	if pm.ShowModal {
		items = append(items, Modal{ID: "dlg", Title: "Sure?"})
	}
	if pm.BadWidget {
		items = append(items, Button{ID: "evil.id", OnClick: "inc"})
	}
	return Column{Items: items}
}

func (p *probe) Resources() []Projection {
	return []Projection{{Key: "count", Project: func(m Model) any { return map[string]int{"count": m.(probeModel).Count} }}}
}

type fixture struct {
	t     *testing.T
	m     *Manager
	probe *probe
	store *MemoryStore
	logs  *syncBuffer
	ctx   context.Context
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newFixture returns a manager with the probe app registered as "probe";
// adjust tweaks the config.
func newFixture(t *testing.T, adjust func(*ManagerConfig)) *fixture {
	t.Helper()
	f := &fixture{t: t, probe: &probe{gate: make(chan struct{}), entered: make(chan struct{}, 16)},
		store: NewMemoryStore(), logs: &syncBuffer{}, ctx: context.Background()}
	r := NewRegistry()
	if err := r.Register("probe", "test app", func() App { return f.probe }); err != nil {
		t.Fatal(err)
	}
	cfg := ManagerConfig{Registry: r, Startable: []string{"probe"}, Store: f.store,
		Logger: slog.New(slog.NewTextHandler(f.logs, nil))}
	if adjust != nil {
		adjust(&cfg)
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return f
}

func (f *fixture) start(id string) Info {
	f.t.Helper()
	info, err := f.m.Start(f.ctx, id, "probe", "alice")
	if err != nil {
		f.t.Fatal(err)
	}
	return info
}

func (f *fixture) call(id, tool string, args map[string]any) Result {
	f.t.Helper()
	res, err := f.m.Call(f.ctx, id, id+"."+tool, args)
	if err != nil {
		f.t.Fatalf("calling %s: %v", tool, err)
	}
	return res
}

func (f *fixture) count(id string) int {
	f.t.Helper()
	b, err := f.m.ReadResource(id, "model/count")
	if err != nil {
		f.t.Fatal(err)
	}
	var v struct{ Count int }
	if err := jsonUnmarshal(b, &v); err != nil {
		f.t.Fatal(err)
	}
	return v.Count
}

// eventually polls cond until it holds or a deadline passes; for conditions
// that only wall-clock time makes true (a breaker's open period).
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("condition not met within 5s")
		}
	}
}
