package swarm

import (
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/crdt"
	"github.com/mcpswarm/mcpswarm/mcp/task"
)

// copyOf is origin name's copy of a task in status s, last changed at
// minute upd.
func copyOf(name string, s task.Status, upd int, lost bool) *taskCopy {
	base := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	return &taskCopy{origin: crdt.Origin{Name: name, Epoch: 1}, lost: lost, rec: task.Record{
		ID: "t", Status: s, Created: base, Updated: base.Add(time.Duration(upd) * time.Minute), TTL: time.Hour}}
}

// Every node picks the same copy of a task, whatever order it holds them
// in: a terminal copy over any other and the first settled of two; else a
// live copy over a lost one, then the newer.
func TestEveryNodeReadsTheSameCopyOfATask(t *testing.T) {
	cases := []struct {
		name   string
		copies []*taskCopy
		want   string
	}{
		{"terminal over a newer working copy", []*taskCopy{copyOf("n1", task.Working, 5, false), copyOf("n2", task.Failed, 2, false)}, "n2"},
		{"a lost terminal over a live working copy", []*taskCopy{copyOf("n1", task.Working, 5, false), copyOf("n2", task.Completed, 2, true)}, "n2"},
		{"the first settled of two", []*taskCopy{copyOf("n1", task.Failed, 4, false), copyOf("n2", task.Completed, 3, false)}, "n2"},
		{"an adopted copy ties with its original: the smaller name", []*taskCopy{copyOf("n2", task.Completed, 3, false), copyOf("n1", task.Completed, 3, true)}, "n1"},
		{"live over lost", []*taskCopy{copyOf("n1", task.Working, 5, true), copyOf("n2", task.Working, 1, false)}, "n2"},
		{"the newer of two live", []*taskCopy{copyOf("n1", task.Working, 1, false), copyOf("n2", task.InputRequired, 2, false)}, "n2"},
	}
	now := time.Date(2026, 12, 5, 0, 30, 0, 0, time.UTC)
	for _, c := range cases {
		for _, order := range [][]int{{0, 1}, {1, 0}} {
			e := &taskEntry{copies: map[string]*taskCopy{}}
			for _, i := range order {
				e.copies[c.copies[i].origin.Name] = c.copies[i]
			}
			if got := e.winner(now); got.origin.Name != c.want {
				t.Errorf("%s: read %s's copy, want %s's", c.name, got.origin.Name, c.want)
			}
		}
	}
	e := &taskEntry{copies: map[string]*taskCopy{"n1": copyOf("n1", task.Completed, 1, false)}}
	if got := e.winner(now.Add(time.Hour)); got != nil {
		t.Errorf("an expired copy was read: %+v", got.rec)
	}
}

// Task table keys split into a task id and, for a request, its key.
func TestTaskTableKeys(t *testing.T) {
	for key, want := range map[string][2]string{
		"t/abc":      {"abc", ""},
		"r/abc/17":   {"abc", "r/abc/17"},
		"r/abc":      {"", ""},
		"t/":         {"", ""},
		"x/abc":      {"", ""},
		"r//17":      {"", ""},
		"r/abc/":     {"", ""},
		"sessions/x": {"", ""},
	} {
		id, req, ok := parseTaskKey(key)
		if ok != (want[0] != "") || id != want[0] || req != want[1] {
			t.Errorf("parseTaskKey(%q) = %q, %q, %v; want %q, %q", key, id, req, ok, want[0], want[1])
		}
	}
}
