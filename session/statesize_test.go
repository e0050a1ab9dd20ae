package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// growApp's model grows by one chunk per click (1,000 bytes unless set),
// as an embedder's app without its own bounds would.
type growApp struct{ chunk int }

type growModel struct {
	Chunks []string `json:"chunks"`
}

func (growApp) Init() (Model, error) { return growModel{}, nil }

func (g0 growApp) Update(m Model, msg Msg) (Model, error) {
	g := m.(growModel)
	if msg == "grow" {
		n := g0.chunk
		if n == 0 {
			n = 1000
		}
		g.Chunks = append(append([]string(nil), g.Chunks...), strings.Repeat("x", n))
	}
	return g, nil
}

func (growApp) View(m Model) Node {
	return Column{Items: []Node{
		Text{ID: "n", Text: strconv.Itoa(len(m.(growModel).Chunks)) + " chunks"},
		Button{ID: "grow", OnClick: "grow"},
	}}
}

// countingStore counts the snapshots saved.
type countingStore struct {
	*MemoryStore
	saves atomic.Int64
}

func (c *countingStore) Save(s Snapshot) error {
	c.saves.Add(1)
	return c.MemoryStore.Save(s)
}

func growManager(t *testing.T, store Store, limit int, logs *bytes.Buffer) *Manager {
	t.Helper()
	r := NewRegistry()
	if err := r.Register("grow", "grows per click", func() App { return growApp{} }); err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(ManagerConfig{Registry: r, Startable: []string{"grow"}, Store: store,
		MaxStateBytes: limit, BreakerFaults: 2, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// Issue #13: one session's model grew without bound (25 × 4 MB drafts took
// a node to 3.45 GiB). An update whose snapshot would pass the per-session
// bound is refused with an error naming the size, the limit and the
// setting; the session keeps its model, nothing is saved or announced, and
// the refusal is not a fault that opens the tool's breaker.
func TestUpdateOverTheStateLimitIsRefused(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{MemoryStore: NewMemoryStore()}
	var logs bytes.Buffer
	m := growManager(t, store, 8<<10, &logs)
	if _, err := m.Start(ctx, "g", "grow", "alice"); err != nil {
		t.Fatal(err)
	}
	var refused Result
	grown := 0
	for i := 0; i < 20 && !refused.IsError; i++ {
		res, err := m.Call(ctx, "g", "g.grow.click", nil)
		if err != nil {
			t.Fatalf("click %d: %v", i, err)
		}
		if res.IsError {
			refused = res
			break
		}
		grown++
	}
	if !refused.IsError {
		t.Fatal("20 clicks of 1,000 bytes each grew the session past its 8 KiB bound without a refusal")
	}
	if grown < 5 {
		t.Fatalf("refused after %d clicks; 8 KiB holds more than 5 chunks of 1,000 bytes", grown)
	}
	for _, want := range []string{"session g: update refused: its state would be ", "over the 8 KiB per-session limit (limits.session_state_bytes)"} {
		if !strings.Contains(refused.Text, want) {
			t.Errorf("refusal %q does not say %q", refused.Text, want)
		}
	}

	before, err := m.Model("g")
	if err != nil {
		t.Fatal(err)
	}
	saves := store.saves.Load()
	events := make(chan Event, 64)
	cancel := m.Subscribe(func(ev Event) { events <- ev })
	defer cancel()
	// Again, past the breaker's fault count: a refusal is not a fault.
	for i := 0; i < 4; i++ {
		res, err := m.Call(ctx, "g", "g.grow.click", nil)
		if err != nil || !res.IsError || !strings.Contains(res.Text, "limits.session_state_bytes") {
			t.Fatalf("click %d past the bound: %+v, %v", i, res, err)
		}
	}
	after, _ := m.Model("g")
	if !bytes.Equal(before, after) || strings.Count(string(after), strings.Repeat("x", 1000)) != grown {
		t.Errorf("a refused update changed the model: %d bytes before, %d after", len(before), len(after))
	}
	if n := store.saves.Load(); n != saves {
		t.Errorf("refused updates saved %d snapshots", n-saves)
	}
	snaps, _ := store.Load()
	if len(snaps) != 1 || !bytes.Equal(snaps[0].Model, before) {
		t.Errorf("the stored snapshot is not the last accepted state")
	}
	select {
	case ev := <-events:
		t.Errorf("a refused update announced %+v", ev)
	default:
	}
	// The bound is on the encoded snapshot: the last accepted one fits.
	if n, err := stateBytes(snaps[0]); err != nil || n > 8<<10 {
		t.Errorf("accepted snapshot is %d bytes (%v), over the bound", n, err)
	}
}

// Start, Adopt and Restore check the bound too: an oversized snapshot
// restored from disk is refused and logged, not run, and stays stored.
func TestStartAdoptRestoreCheckTheStateLimit(t *testing.T) {
	ctx := context.Background()
	big := Snapshot{Info: Info{ID: "big", App: "grow", Principal: "alice"},
		Model: []byte(`{"chunks":["` + strings.Repeat("y", 20000) + `"]}`)}

	store := NewMemoryStore()
	if err := store.Save(big); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	m := growManager(t, store, 8<<10, &logs)
	err := m.Restore(ctx)
	if !errors.Is(err, ErrStateTooLarge) || !strings.Contains(err.Error(), "limits.session_state_bytes") {
		t.Errorf("restoring an oversized snapshot: %v", err)
	}
	if _, ok := m.Get("big"); ok {
		t.Error("an oversized snapshot was restored")
	}
	if !strings.Contains(logs.String(), "level=ERROR msg=\"session not restored\" session=big") {
		t.Errorf("refused restore not logged as an error: %s", logs.String())
	}
	if snaps, _ := store.Load(); len(snaps) != 1 {
		t.Error("the refused snapshot was dropped from the store")
	}

	if _, err := m.Adopt(ctx, big); !errors.Is(err, ErrStateTooLarge) {
		t.Errorf("adopting an oversized snapshot: %v", err)
	}
	if _, ok := m.Get("big"); ok {
		t.Error("an oversized snapshot was adopted")
	}

	tiny := growManager(t, NewMemoryStore(), 64, &logs)
	if _, err := tiny.Start(ctx, "g", "grow", "alice"); !errors.Is(err, ErrStateTooLarge) || !strings.Contains(err.Error(), "over the 64 B per-session limit") {
		t.Errorf("starting a session whose first state is over the bound: %v", err)
	}
	if _, ok := tiny.Get("g"); ok {
		t.Error("a session over the bound was started")
	}
}

// The size checked is the length of the snapshot as a Store encodes it,
// and a new tool set is measured again, not taken from the cache.
func TestStateSizerMeasuresTheEncodedSnapshot(t *testing.T) {
	info := Info{ID: "s", App: "grow", Principal: "alice", Status: "running"}
	tools := newSticky("s", 100)
	next, changed, _ := tools.with([]Tool{{Name: "s.grow.click", Session: "s", Widget: "grow", Action: "click",
		Kind: "button", Description: strings.Repeat("d", 300), InputSchema: []byte(`{"type":"object"}`)}})
	if !changed {
		t.Fatal("the new tool was not added")
	}
	var z stateSizer
	for i, c := range []struct {
		tools *sticky
		model string
	}{{tools, `{"chunks":[]}`}, {tools, `{"chunks":["` + strings.Repeat("x", 500) + `"]}`}, {next, `{"chunks":["x"]}`}} {
		snap := Snapshot{Info: info, Model: []byte(c.model), Tools: c.tools.tools}
		enc, err := json.Marshal(snap)
		if err != nil {
			t.Fatal(err)
		}
		if err := z.check(snap, c.tools, len(enc)); err != nil {
			t.Errorf("case %d: a snapshot of exactly the limit was refused: %v", i, err)
		}
		err = z.check(snap, c.tools, len(enc)-1)
		if !errors.Is(err, ErrStateTooLarge) || !strings.Contains(err.Error(), "("+strconv.Itoa(len(enc))+" bytes)") {
			t.Errorf("case %d: one byte over: %v; want a refusal naming %d bytes", i, err, len(enc))
		}
	}
}

func TestNewManagerRefusesANegativeStateLimit(t *testing.T) {
	if _, err := NewManager(ManagerConfig{Registry: NewRegistry(), MaxStateBytes: -1}); err == nil {
		t.Error("a negative MaxStateBytes was accepted")
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 8 << 10: "8 KiB", 1 << 20: "1 MiB", 1363149: "1.3 MiB"} {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// BenchmarkSessionAtTheStateBound measures what one session filled to the
// default bound (DefaultMaxStateBytes) costs: heap-bytes/session is what
// the node holds in memory (the model, its JSON, the view and resources;
// no Store, since the node's snapshots live in bbolt, outside the heap),
// snapshot-bytes/session what each session writes to the journal.
func BenchmarkSessionAtTheStateBound(b *testing.B) {
	const sessions = 20
	r := NewRegistry()
	if err := r.Register("grow", "", func() App { return growApp{chunk: 64 << 10} }); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		m, err := NewManager(ManagerConfig{Registry: r, Startable: []string{"grow"},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		var snapBytes int
		for i := range sessions {
			id := fmt.Sprintf("s%d", i)
			if _, err := m.Start(ctx, id, "grow", fmt.Sprintf("p%d", i)); err != nil {
				b.Fatal(err)
			}
			for {
				res, err := m.Call(ctx, id, id+".grow.click", nil)
				if err != nil {
					b.Fatal(err)
				}
				if res.IsError {
					break // at the bound
				}
			}
			n, err := stateBytes(m.actor(id).snapshot())
			if err != nil {
				b.Fatal(err)
			}
			snapBytes += n
		}
		b.ReportMetric(float64(heapInUse()-before)/sessions, "heap-bytes/session")
		b.ReportMetric(float64(snapBytes)/sessions, "snapshot-bytes/session")
		if err := m.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}
