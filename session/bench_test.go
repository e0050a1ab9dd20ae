package session_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// bigView is a 1,000-widget view: 100 rows of ten widgets of assorted kinds.
func bigView() session.Node {
	var rows []session.Node
	for r := range 100 {
		var items []session.Node
		for c := range 10 {
			id := fmt.Sprintf("w%d_%d", r, c)
			var n session.Node
			switch c % 5 {
			case 0:
				n = session.Button{ID: id, Label: "b", OnClick: id}
			case 1:
				n = session.TextInput{ID: id, Value: "v"}
			case 2:
				n = session.Checkbox{ID: id}
			case 3:
				n = session.Table{ID: id, Columns: []session.TableColumn{{Key: "k", Sortable: true}}}
			default:
				n = session.Text{ID: id, Text: "t"}
			}
			items = append(items, n)
		}
		rows = append(rows, session.Row{Items: items})
	}
	return session.Column{Items: rows}
}

func BenchmarkDerive1000Widgets(b *testing.B) {
	view := bigView()
	b.ReportAllocs()
	var n int
	cpu := cpuMeter(b)
	for b.Loop() {
		n = len(session.Derive("bench", view).Tools)
	}
	cpu()
	b.ReportMetric(float64(n), "tools")
}

func newBenchManager(b *testing.B, adjust func(*session.ManagerConfig)) *session.Manager {
	b.Helper()
	r := session.NewRegistry()
	if err := apps.Register(r); err != nil {
		b.Fatal(err)
	}
	cfg := session.ManagerConfig{Registry: r, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if adjust != nil {
		adjust(&cfg)
	}
	m, err := session.NewManager(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// BenchmarkWriteDirect is the baseline for BenchmarkWriteThroughActor: the
// same Update, View and derivation, called in the benchmark's goroutine.
func BenchmarkWriteDirect(b *testing.B) {
	app := apps.Counter{}
	m, _ := app.Init()
	b.ReportAllocs()
	defer cpuMeter(b)()
	for b.Loop() {
		view := app.View(m)
		t := session.Tool{Widget: "inc", Kind: "button", Action: "click", Sensitive: true}
		out, err := session.Invoke(view, t, nil)
		if err != nil {
			b.Fatal(err)
		}
		if m, err = app.Update(m, out.Msg); err != nil {
			b.Fatal(err)
		}
		_ = session.Derive("c", app.View(m))
	}
}

// BenchmarkWriteThroughActor is one write action: dispatch to the session's
// actor, Update, re-render, snapshot to a MemoryStore, answer.
func BenchmarkWriteThroughActor(b *testing.B) {
	m := newBenchManager(b, func(c *session.ManagerConfig) { c.Store = session.NewMemoryStore() })
	ctx := context.Background()
	if _, err := m.Start(ctx, "c", "counter", "p"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer cpuMeter(b)()
	for b.Loop() {
		res, err := m.Call(ctx, "c", "c.inc.click", nil)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// BenchmarkWriteSubscribed is BenchmarkWriteThroughActor with an event
// subscriber, as the mcp front always has: change detection and JSON Patch
// for the projections run on every write.
func BenchmarkWriteSubscribed(b *testing.B) {
	m := newBenchManager(b, func(c *session.ManagerConfig) { c.Store = session.NewMemoryStore() })
	var events int
	var mu sync.Mutex
	defer m.Subscribe(func(session.Event) { mu.Lock(); events++; mu.Unlock() })()
	ctx := context.Background()
	if _, err := m.Start(ctx, "c", "counter", "p"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer cpuMeter(b)()
	for b.Loop() {
		res, err := m.Call(ctx, "c", "c.inc.click", nil)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkIdleCounterSession measures heap plus goroutine stack per idle
// counter session, over 1,000 sessions.
func BenchmarkIdleCounterSession(b *testing.B) {
	const n = 1000
	ctx := context.Background()
	for b.Loop() {
		m := newBenchManager(b, func(c *session.ManagerConfig) { c.MaxPerPrincipal = n })
		before := memInUse()
		for i := range n {
			if _, err := m.Start(ctx, "c"+strconv.Itoa(i), "counter", "p"); err != nil {
				b.Fatal(err)
			}
		}
		after := memInUse()
		b.ReportMetric(float64(after-before)/n, "bytes/session")
		if err := m.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuMeter starts measuring process CPU time; the returned func reports it
// per op as cpu-ns/op.
func cpuMeter(b *testing.B) func() {
	start := session.ProcessCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(session.ProcessCPU()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func memInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// BenchmarkTenThousandSessions starts 10,000 counter sessions on one
// manager, then calls a write action on every one of them concurrently.
func BenchmarkTenThousandSessions(b *testing.B) {
	const n = 10000
	ctx := context.Background()
	workers := runtime.GOMAXPROCS(0) * 4
	defer cpuMeter(b)()
	for b.Loop() {
		m := newBenchManager(b, func(c *session.ManagerConfig) { c.MaxPerPrincipal = n; c.MaxSessions = n })
		before := memInUse()
		for i := range n {
			if _, err := m.Start(ctx, "c"+strconv.Itoa(i), "counter", "p"+strconv.Itoa(i%100)); err != nil {
				b.Fatal(err)
			}
		}
		ids := make(chan string, n)
		for i := range n {
			ids <- "c" + strconv.Itoa(i)
		}
		close(ids)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for id := range ids {
					if res, err := m.Call(ctx, id, id+".inc.click", nil); err != nil || res.IsError {
						b.Error(err, res)
						return
					}
				}
			})
		}
		wg.Wait()
		b.ReportMetric(float64(memInUse()-before)/n, "bytes/session")
		if len(m.List()) != n {
			b.Fatalf("%d sessions", len(m.List()))
		}
		if err := m.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
