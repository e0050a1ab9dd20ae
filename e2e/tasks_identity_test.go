package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// lookalike returns an id of id's length and alphabet that names no task:
// its second half shifted by one within each character's class, so a
// prefix (a node's, a form's) stays as it is.
func lookalike(id string) string {
	b := []byte(id)
	for i := len(b) / 2; i < len(b); i++ {
		switch c := b[i]; {
		case c >= '0' && c <= '9':
			b[i] = '0' + (c-'0'+1)%10
		case c >= 'a' && c <= 'z':
			b[i] = 'a' + (c-'a'+1)%26
		case c >= 'A' && c <= 'Z':
			b[i] = 'A' + (c-'A'+1)%26
		}
	}
	return string(b)
}

// asSeen is an answer as a client could tell it from another: the HTTP
// status and the whole error object (or result), with the asked id
// written <id>, in a canonical encoding.
func asSeen(t *testing.T, a rpcAnswer, id string) string {
	t.Helper()
	body := a.Result
	if a.Error != nil {
		body = a.Error
	}
	var v any
	if err := json.Unmarshal([]byte(strings.ReplaceAll(string(body), id, "<id>")), &v); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	canon, _ := json.Marshal(v)
	kind := "result"
	if a.Error != nil {
		kind = "error"
	}
	return fmt.Sprintf("HTTP %d %s %s", a.Status, kind, canon)
}

// TestAnotherPrincipalsTaskAnswersAsAnUnknownOne: bob's task handles,
// asked by alice on every task surface of both eras and through two
// nodes, answer exactly as a handle that names no task (same HTTP status,
// same error object but for the id itself); alice's tasks/list shows none
// of them; and nothing alice sent (cancel, update) reached bob's tasks.
func TestAnotherPrincipalsTaskAnswersAsAnUnknownOne(t *testing.T) {
	nodes := newTaskCluster(t)
	bobModern, bobLegacy := modernClient(t, nodes[0], bobToken), legacyClient(t, nodes[0], bobToken)

	// bob's tasks, in every state alice could probe: running and parked on
	// input (2026-07-28), running and finished (2025-11-25).
	running := bobModern.startTask("slow_compute", map[string]any{"seconds": 600, "label": "bob"})
	parked := bobModern.startTask("confirm_delete", map[string]any{"filename": "bob.txt"})
	parkedAs := awaitTask(t, 10*time.Second, parked.TaskID, "input_required", statusIs("input_required"), bobModern)
	legacyRunning := bobLegacy.startTask("slow_compute", map[string]any{"seconds": 600, "label": "bob-legacy"})
	legacyDone := bobLegacy.startTask("slow_compute", map[string]any{"seconds": 0, "label": "bob-done"})
	awaitTask(t, 10*time.Second, legacyDone.TaskID, "completed", statusIs("completed"), bobLegacy)
	bobs := []string{running.TaskID, parked.TaskID, legacyRunning.TaskID, legacyDone.TaskID}

	var key string // the input bob's parked task waits on
	for k := range parkedAs.InputRequests {
		key = k
	}
	update := func(id string) map[string]any {
		return map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}}
	}
	byID := func(id string) map[string]any { return map[string]any{"taskId": id} }

	type surface struct {
		c      *taskClient
		method string
		params func(id string) map[string]any
	}
	var surfaces []surface
	aliceLegacy := map[string]*taskClient{}
	for _, n := range nodes[:2] {
		modern, legacy := modernClient(t, n, aliceToken), legacyClient(t, n, aliceToken)
		aliceLegacy[n.Name] = legacy
		surfaces = append(surfaces,
			surface{modern, "tasks/get", byID}, surface{modern, "tasks/update", update}, surface{modern, "tasks/cancel", byID},
			surface{legacy, "tasks/get", byID}, surface{legacy, "tasks/result", byID}, surface{legacy, "tasks/cancel", byID})
	}
	for _, s := range surfaces {
		for _, id := range bobs {
			fake := lookalike(id)
			if fake == id {
				t.Fatalf("no lookalike of id %q", id)
			}
			unknown := s.c.do(s.method, s.params(fake))
			if unknown.code() != -32602 {
				t.Errorf("%s %s through %s: a handle naming no task answers %v, want -32602", s.c.era, s.method, s.c.node.Name, unknown)
			}
			if got, want := asSeen(t, s.c.do(s.method, s.params(id)), id), asSeen(t, unknown, fake); got != want {
				t.Errorf("%s %s through %s: bob's handle answers alice\n  %s\nbut a handle naming no task answers\n  %s", s.c.era, s.method, s.c.node.Name, got, want)
			}
		}
	}

	// alice's tasks/list holds her task and none of bob's.
	own := aliceLegacy["node1"].startTask("slow_compute", map[string]any{"seconds": 0, "label": "alice"})
	for name, c := range aliceLegacy {
		listed := listTasks(t, c)
		if !slices.Contains(listed, own.TaskID) {
			t.Errorf("alice's tasks/list through %s lacks her task %s: %v", name, own.TaskID, listed)
		}
		for _, id := range bobs {
			if slices.Contains(listed, id) {
				t.Errorf("alice's tasks/list through %s shows bob's task %s", name, id)
			}
		}
	}

	// bob's tasks are as he left them.
	for id, want := range map[string]string{running.TaskID: "working", parked.TaskID: "input_required", legacyDone.TaskID: "completed"} {
		if w := bobModern.mustGet(id); w.Status != want {
			t.Errorf("bob's task %s reads %s after alice's requests, want %s", id, w.Status, want)
		}
	}
	if w := bobLegacy.mustGet(legacyRunning.TaskID); w.Status != "working" {
		t.Errorf("bob's 2025-11-25 task reads %s after alice's requests, want working", w.Status)
	}
	if w := bobModern.mustGet(parked.TaskID); len(w.InputRequests) != 1 || w.InputRequests[key] == nil {
		t.Errorf("bob's parked task waits on %v after alice's tasks/update, want %s", w.InputRequests, key)
	}
}

// listTasks pages through a 2025-11-25 tasks/list and returns the ids.
func listTasks(t *testing.T, c *taskClient) []string {
	t.Helper()
	var ids []string
	params := map[string]any{}
	for range 100 {
		var page struct {
			Tasks      []wireTask `json:"tasks"`
			NextCursor string     `json:"nextCursor"`
		}
		c.result("tasks/list", c.do("tasks/list", params), &page)
		for _, w := range page.Tasks {
			ids = append(ids, w.TaskID)
		}
		if page.NextCursor == "" {
			return ids
		}
		params = map[string]any{"cursor": page.NextCursor}
	}
	t.Fatalf("tasks/list through %s: more than 100 pages", c.node.Name)
	return nil
}
