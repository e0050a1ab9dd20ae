package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
)

// encodingStore encodes every saved snapshot as the node's journal store
// does (json.Marshal) and keeps the bytes.
type encodingStore struct {
	session.MemoryStore
	mu    sync.Mutex
	saved [][]byte
}

func (s *encodingStore) Save(snap session.Snapshot) error {
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	// A store may also take MarshalJSON's bytes as they are (json.Marshal
	// compacts them): they must be the same.
	direct, err := snap.MarshalJSON()
	if err != nil {
		return err
	}
	if string(direct) != string(b) {
		return fmt.Errorf("MarshalJSON wrote %s, json.Marshal %s", direct, b)
	}
	// The journal store appends them to a reused buffer instead.
	appended, err := snap.AppendJSON([]byte("leftover"))
	if err != nil {
		return err
	}
	if string(appended) != "leftover"+string(b) {
		return fmt.Errorf("AppendJSON wrote %s, json.Marshal %s", appended, b)
	}
	s.mu.Lock()
	s.saved = append(s.saved, b)
	s.mu.Unlock()
	return nil
}

// Snapshots the actor builds splice the model into info and tools encoded
// once per tool set. Their bytes must be exactly those of encoding every
// field, across updates that keep and that change the tool set.
func TestSavedSnapshotEncodesLikeEveryField(t *testing.T) {
	store := &encodingStore{}
	m := newDemoManager(t, store)
	ctx := context.Background()
	if _, err := m.Start(ctx, "s", "todo", "p"); err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		tool string
		args map[string]any
	}{
		{"s.new.type_into", map[string]any{"text": "one <&> \u2028"}},
		{"s.add.click", nil}, // adds an item: new tools
		{"s.new.type_into", map[string]any{"text": "two"}},
		{"s.add.click", nil},
		{"s.new.type_into", map[string]any{"text": "three"}}, // same tools as before
	} {
		if res, err := m.Call(ctx, "s", step.tool, step.args); err != nil || res.IsError {
			t.Fatalf("step %d %s: %v %+v", i, step.tool, err, res)
		}
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.saved) < 6 {
		t.Fatalf("%d snapshots saved, want the start and 5 updates", len(store.saved))
	}
	tools := map[int]bool{}
	for i, b := range store.saved {
		var snap session.Snapshot
		if err := json.Unmarshal(b, &snap); err != nil {
			t.Fatalf("snapshot %d does not decode: %v\n%s", i, err, b)
		}
		tools[len(snap.Tools)] = true
		// A decoded snapshot carries no pre-encoded parts: this encodes
		// every field.
		again, err := json.Marshal(snap)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(b) {
			t.Errorf("snapshot %d:\nsaved     %s\nevery field %s", i, b, again)
		}
	}
	if len(tools) < 2 {
		t.Errorf("the tool set never changed (%v tools): the test covers nothing", tools)
	}
}
