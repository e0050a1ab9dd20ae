package task

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

func decodeObject(t *testing.T, v any) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

var isoMillis = regexp.MustCompile(`^"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"$`)

func sample(status Status) Record {
	created := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	return Record{ID: "abc", Principal: "alice", Status: status, Created: created, Updated: created.Add(time.Second),
		TTL: time.Minute, PollInterval: 500 * time.Millisecond,
		Result: json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`), Error: &Error{Code: -32603, Message: "boom"},
		InputRequests: json.RawMessage(`{"k":{"method":"roots/list"}}`)}
}

func TestTheCreateTaskResultIsFlat(t *testing.T) {
	m := decodeObject(t, Created(sample(Working)))
	want := map[string]string{"resultType": `"task"`, "taskId": `"abc"`, "status": `"working"`, "ttlMs": "60000", "pollIntervalMs": "500"}
	for k, v := range want {
		if string(m[k]) != v {
			t.Errorf("%s = %s, want %s", k, m[k], v)
		}
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt"} {
		if !isoMillis.Match(m[k]) {
			t.Errorf("%s = %s, not ISO-8601", k, m[k])
		}
	}
	for _, k := range []string{"task", "result", "error", "inputRequests", "requestState"} {
		if _, ok := m[k]; ok {
			t.Errorf("a CreateTaskResult carries %q", k)
		}
	}
}

func TestADetailedTaskInlinesWhatItsStatusHas(t *testing.T) {
	for _, c := range []struct {
		status      Status
		has, hasNot []string
	}{
		{Working, nil, []string{"result", "error", "inputRequests"}},
		{Completed, []string{"result"}, []string{"error", "inputRequests"}},
		{Failed, []string{"error"}, []string{"result", "inputRequests"}},
		{InputRequired, []string{"inputRequests"}, []string{"result", "error"}},
		{Cancelled, nil, []string{"result", "error", "inputRequests"}},
	} {
		m := decodeObject(t, Detailed(sample(c.status)))
		if string(m["resultType"]) != `"complete"` || string(m["status"]) != `"`+string(c.status)+`"` {
			t.Errorf("%s: resultType %s status %s", c.status, m["resultType"], m["status"])
		}
		for _, k := range c.has {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: no %q", c.status, k)
			}
		}
		for _, k := range c.hasNot {
			if _, ok := m[k]; ok {
				t.Errorf("%s: carries %q", c.status, k)
			}
		}
	}
}

func TestAnAckIsOnlyResultTypeComplete(t *testing.T) {
	b, _ := json.Marshal(NewAck())
	if string(b) != `{"resultType":"complete"}` {
		t.Fatalf("ack = %s", b)
	}
}

func TestTheLegacyShapesWrapTheTask(t *testing.T) {
	m := decodeObject(t, LegacyCreated(sample(Working)))
	var task map[string]json.RawMessage
	if err := json.Unmarshal(m["task"], &task); err != nil {
		t.Fatalf("no task object in %v", m)
	}
	if string(task["taskId"]) != `"abc"` || string(task["ttl"]) != "60000" || string(task["pollInterval"]) != "500" {
		t.Errorf("legacy task = %v", task)
	}
	g := decodeObject(t, LegacyGet(sample(Completed)))
	if string(g["status"]) != `"completed"` || g["result"] != nil {
		t.Errorf("legacy tasks/get = %v", g)
	}
}

func TestALegacyResultIsWhatTheCallWouldHaveAnswered(t *testing.T) {
	raw, e := LegacyResult(sample(Completed))
	if e != nil {
		t.Fatal(e)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	meta, _ := m["_meta"].(map[string]any)
	related, _ := meta["io.modelcontextprotocol/related-task"].(map[string]any)
	if related["taskId"] != "abc" || m["content"] == nil {
		t.Errorf("tasks/result = %s", raw)
	}
	failed := sample(Failed)
	if _, e := LegacyResult(failed); e == nil || e.Message != "boom" {
		t.Errorf("a failed task's result: %v, want its error", e)
	}
	failed.Error = nil // a tool error: the result with isError
	if raw, e := LegacyResult(failed); e != nil || !strings.Contains(string(raw), `"content"`) {
		t.Errorf("a tool error's result: %s %v", raw, e)
	}
}

func TestTheLegacyListPages(t *testing.T) {
	var rs []Record
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		r := sample(Working)
		r.ID = id
		rs = append(rs, r)
	}
	var got []string
	cursor := ""
	for range 10 {
		page, e := LegacyList(rs, cursor, 2)
		if e != nil {
			t.Fatal(e)
		}
		for _, tk := range page.Tasks {
			got = append(got, tk.TaskId)
		}
		if cursor = string(page.NextCursor); cursor == "" {
			break
		}
	}
	if strings.Join(got, "") != "abcde" {
		t.Fatalf("pages held %v", got)
	}
	if _, e := LegacyList(rs, "!!", 2); e == nil || e.Code != CodeInvalidParams {
		t.Fatalf("a bad cursor: %v", e)
	}
}
