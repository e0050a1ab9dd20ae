package apps

import (
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
)

// Issue #13: typing 4 MB into a todo draft, 25 times, grew a node to
// 3.45 GiB. Every string a client types is now refused past
// session.DefaultMaxTextBytes, with an error naming the limit, and the model keeps
// what it had.
func TestTextBeyondTheLimitIsRefusedAndLosesNothing(t *testing.T) {
	h := start(t, "todo")
	h.call("new.type_into", map[string]any{"text": "keep me"})
	msg := h.callErr("new.type_into", map[string]any{"text": strings.Repeat("x", session.DefaultMaxTextBytes+1)})
	if !strings.Contains(msg, "widget-text-bytes") || !strings.Contains(msg, "8192") {
		t.Errorf("oversized text: error %q does not name the limit", msg)
	}
	h.call("add.click", nil)
	var m struct{ Items []TodoItem }
	h.resource("model/items", &m)
	if len(m.Items) != 1 || m.Items[0].Title != "keep me" {
		t.Errorf("after a refused type_into the list is %+v; want the earlier draft added", m.Items)
	}
	h.call("new.type_into", map[string]any{"text": strings.Repeat("y", session.DefaultMaxTextBytes)})
}

func TestTodoCapsTitlesAndItems(t *testing.T) {
	h := start(t, "todo")
	h.call("new.type_into", map[string]any{"text": strings.Repeat("t", DefaultTodoTitleBytes+1)})
	if msg := h.callErr("add.click", nil); !strings.Contains(msg, "todo-title-bytes") {
		t.Errorf("long title: error %q does not name the limit", msg)
	}
	for range DefaultTodoItems {
		h.call("new.type_into", map[string]any{"text": "item"})
		h.call("add.click", nil)
	}
	h.call("new.type_into", map[string]any{"text": "one too many"})
	if msg := h.callErr("add.click", nil); !strings.Contains(msg, "todo-max-items") {
		t.Errorf("item %d: error %q does not name the limit", DefaultTodoItems+1, msg)
	}
	var m struct{ Items []TodoItem }
	h.resource("model/items", &m)
	if len(m.Items) != DefaultTodoItems {
		t.Errorf("list holds %d items; want %d", len(m.Items), DefaultTodoItems)
	}
}

func TestFilesCapsNewFiles(t *testing.T) {
	h := start(t, "files")
	var fs struct{ Paths []string }
	h.resource("model/files", &fs)
	for range DefaultMaxFiles - len(fs.Paths) {
		h.call("actions.select", map[string]any{"item": "New file"})
	}
	if msg := h.callErr("actions.select", map[string]any{"item": "New file"}); !strings.Contains(msg, "files-max") {
		t.Errorf("file %d: error %q does not name the limit", DefaultMaxFiles+1, msg)
	}
}
