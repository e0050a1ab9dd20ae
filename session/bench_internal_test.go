package session

import (
	"context"
	"strconv"
	"testing"
)

// miniCounter has the shape of the counter demo (which this package cannot
// import): a text, three buttons and one projection.
type miniCounter struct{}

func (miniCounter) Init() (Model, error) { return 0, nil }

func (miniCounter) Update(m Model, msg Msg) (Model, error) {
	if msg == "inc" {
		return m.(int) + 1, nil
	}
	return m, nil
}

func (miniCounter) View(m Model) Node {
	return Column{Items: []Node{
		Text{ID: "count", Text: "Count: " + strconv.Itoa(m.(int))},
		Row{Items: []Node{Button{ID: "dec", OnClick: "dec"}, Button{ID: "inc", OnClick: "inc"}, Button{ID: "reset", OnClick: "reset"}}},
	}}
}

func (miniCounter) Resources() []Projection {
	return []Projection{{Key: "count", Project: func(m Model) any { return map[string]int{"count": m.(int)} }}}
}

func benchManager(b *testing.B) *Manager {
	r := NewRegistry()
	_ = r.Register("counter", "", func() App { return miniCounter{} })
	m, err := NewManager(ManagerConfig{Registry: r, Startable: []string{"counter"}, Store: NewMemoryStore()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// BenchmarkHandleInline is the baseline for BenchmarkCallThroughActor: the
// same request handled (Update, render, resources, snapshot) in the
// benchmark's goroutine, without mailbox, actor goroutine, timer or breaker.
func BenchmarkHandleInline(b *testing.B) {
	m := benchManager(b)
	factory, _ := m.cfg.Registry.Lookup("counter")
	a, err := m.newActor(context.Background(), "c", "counter", "p", factory, nil)
	if err != nil {
		b.Fatal(err)
	}
	req := &request{ctx: context.Background(), tool: "c.inc.click", reply: make(chan reply, 1)}
	b.ReportAllocs()
	defer cpuMeterInternal(b)()
	for b.Loop() {
		if rep, _ := a.handle(req); rep.res.IsError {
			b.Fatal(rep.res.Text)
		}
	}
}

// BenchmarkCallThroughActor is Manager.Call for the same request: breaker,
// mailbox, actor goroutine, the same handling, answer.
func BenchmarkCallThroughActor(b *testing.B) {
	m := benchManager(b)
	ctx := context.Background()
	if _, err := m.Start(ctx, "c", "counter", "p"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	defer cpuMeterInternal(b)()
	for b.Loop() {
		if res, err := m.Call(ctx, "c", "c.inc.click", nil); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}

// cpuMeterInternal starts measuring process CPU time; the returned func
// reports it per op as cpu-ns/op.
func cpuMeterInternal(b *testing.B) func() {
	start := processCPU()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}
