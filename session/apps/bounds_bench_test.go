package apps

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
)

// BenchmarkTodoSessionAtItsBounds measures the heap one todo session holds
// when a client has filled it to every bound (DefaultTodoItems items of
// DefaultTodoTitleBytes, a draft of session.DefaultMaxTextBytes): the worst a client can make
// a demo session cost, reported as heap-bytes/session. Sessions run in a
// real Manager with an in-memory snapshot store, so the figure includes
// the saved snapshot.
func BenchmarkTodoSessionAtItsBounds(b *testing.B) {
	const sessions = 200
	r := session.NewRegistry()
	if err := Register(r); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		m, err := session.NewManager(session.ManagerConfig{Registry: r, Store: session.NewMemoryStore(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxSessions: 10 * sessions})
		if err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		title := strings.Repeat("t", DefaultTodoTitleBytes)
		for i := range sessions {
			id := fmt.Sprintf("s%d", i)
			if _, err := m.Start(ctx, id, "todo", fmt.Sprintf("p%d", i)); err != nil {
				b.Fatal(err)
			}
			for range DefaultTodoItems {
				mustCall(b, m, id, "new.type_into", map[string]any{"text": title})
				mustCall(b, m, id, "add.click", nil)
			}
			mustCall(b, m, id, "new.type_into", map[string]any{"text": strings.Repeat("d", session.DefaultMaxTextBytes)})
		}
		b.ReportMetric(float64(heapInUse()-before)/sessions, "heap-bytes/session")
		if err := m.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func mustCall(b *testing.B, m *session.Manager, id, tool string, args map[string]any) {
	res, err := m.Call(context.Background(), id, id+"."+tool, args)
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %s", tool, err, res.Text)
	}
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}
