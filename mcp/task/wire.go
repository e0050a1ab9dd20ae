package task

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The wire shapes of both forms, built from a record as a reader sees it
// (Merge applied). Times are ISO-8601 in UTC with milliseconds; durations
// are integer milliseconds.

// ResultTypeTask is the resultType of a 2026-07-28 CreateTaskResult.
const ResultTypeTask mcp.ResultType = "task"

// Flat is a task's fields on the 2026-07-28 wire (SEP-2663's Task).
type Flat struct {
	TaskID         string `json:"taskId"`
	Status         Status `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          int64  `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
}

// CreateResult is the 2026-07-28 answer to a tools/call that became a
// task: resultType "task" and the task's fields flat, with no result,
// error, inputRequests or requestState.
type CreateResult struct {
	mcp.Result
	Flat
}

// DetailedTask is the 2026-07-28 answer to tasks/get: the task with its
// result inlined once completed, its error once failed, and its pending
// input requests while input_required.
type DetailedTask struct {
	mcp.Result
	Flat
	ToolResult    json.RawMessage `json:"result,omitempty"`
	Error         *Error          `json:"error,omitempty"`
	InputRequests json.RawMessage `json:"inputRequests,omitempty"`
}

// Ack is the 2026-07-28 answer to tasks/update and tasks/cancel:
// {resultType:"complete"} and nothing else.
type Ack struct{ mcp.Result }

// NewAck returns the acknowledgement of tasks/update and tasks/cancel.
func NewAck() *Ack { return &Ack{mcp.Result{ResultType: mcp.ResultTypeComplete}} }

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func flat(r Record) Flat {
	return Flat{TaskID: r.ID, Status: r.Status, StatusMessage: r.Message, CreatedAt: stamp(r.Created),
		LastUpdatedAt: stamp(r.Updated), TTLMs: r.TTL.Milliseconds(), PollIntervalMs: r.PollInterval.Milliseconds()}
}

// Created is r as a 2026-07-28 CreateTaskResult.
func Created(r Record) *CreateResult {
	return &CreateResult{Result: mcp.Result{ResultType: ResultTypeTask}, Flat: flat(r)}
}

// Detailed is r as a 2026-07-28 tasks/get answer.
func Detailed(r Record) *DetailedTask {
	d := &DetailedTask{Result: mcp.Result{ResultType: mcp.ResultTypeComplete}, Flat: flat(r)}
	switch r.Status {
	case Completed:
		d.ToolResult = r.Result
	case Failed:
		d.Error = r.Error
		if d.Error == nil { // a Legacy tool error read on this wire
			d.Error = &Error{Code: CodeInternal, Message: "the tool reported an error"}
		}
	case InputRequired:
		d.InputRequests = r.InputRequests
	}
	return d
}

// LegacyTask is r as a 2025-11-25 Task.
func LegacyTask(r Record) mcp.Task {
	ttl := r.TTL.Milliseconds()
	t := mcp.Task{TaskId: r.ID, Status: mcp.TaskStatus(r.Status), StatusMessage: r.Message,
		CreatedAt: stamp(r.Created), LastUpdatedAt: stamp(r.Updated), TTL: &ttl}
	if r.PollInterval > 0 {
		p := r.PollInterval.Milliseconds()
		t.PollInterval = &p
	}
	return t
}

// LegacyCreated is r as a 2025-11-25 CreateTaskResult ({task}).
func LegacyCreated(r Record) *mcp.CreateTaskResult {
	return &mcp.CreateTaskResult{Task: LegacyTask(r)}
}

// LegacyGet is r as a 2025-11-25 tasks/get answer.
func LegacyGet(r Record) *mcp.GetTaskResult { return &mcp.GetTaskResult{Task: LegacyTask(r)} }

// LegacyCancelled is r as a 2025-11-25 tasks/cancel answer.
func LegacyCancelled(r Record) *mcp.CancelTaskResult {
	return &mcp.CancelTaskResult{Task: LegacyTask(r)}
}

// LegacyResult is what a 2025-11-25 tasks/result answers for the terminal
// r: exactly what the tools/call would have answered — the tool's result
// (with the related-task _meta) or the error that failed it.
func LegacyResult(r Record) (json.RawMessage, *Error) {
	switch {
	case r.Status == Cancelled:
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("task %s was cancelled", r.ID)}
	case r.Status == Failed && r.Error != nil:
		return nil, r.Error
	case len(r.Result) == 0:
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("task %s has no result", r.ID)}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(r.Result, &m); err != nil || m == nil {
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("task %s holds an unreadable result", r.ID)}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	related, _ := json.Marshal(mcp.RelatedTaskMeta(r.ID))
	meta[mcp.RelatedTaskMetaKey] = related
	m["_meta"], _ = json.Marshal(meta)
	b, _ := json.Marshal(m)
	return b, nil
}

// LegacyList is the page of rs (newest first, as Store.Of returns them)
// after cursor, at most size long, as a 2025-11-25 tasks/list answer. The
// cursor is the base64 of the last id of the previous page.
func LegacyList(rs []Record, cursor string, size int) (*mcp.ListTasksResult, *Error) {
	start := 0
	if cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil {
			return nil, &Error{Code: CodeInvalidParams, Message: "invalid cursor: " + err.Error()}
		}
		start = len(rs)
		for i, r := range rs {
			if r.ID == string(after) {
				start = i + 1
				break
			}
		}
	}
	end := min(start+size, len(rs))
	out := &mcp.ListTasksResult{Tasks: make([]mcp.Task, 0, end-start)}
	for _, r := range rs[start:end] {
		out.Tasks = append(out.Tasks, LegacyTask(r))
	}
	if end < len(rs) {
		out.NextCursor = mcp.Cursor(base64.RawURLEncoding.EncodeToString([]byte(rs[end-1].ID)))
	}
	return out, nil
}

// LegacyCapability is the server's 2025-11-25 `tasks` capability: list,
// cancel, and task-augmented tools/call.
func LegacyCapability() *mcp.TasksCapability {
	c := &mcp.TasksCapability{List: &struct{}{}, Cancel: &struct{}{}, Requests: &mcp.TaskRequestsCapability{}}
	c.Requests.Tools = &struct {
		Call *struct{} `json:"call,omitempty"`
	}{Call: &struct{}{}}
	return c
}

// NamesTask reports whether method carries a taskId that the 2026-07-28
// Mcp-Name header must repeat (tasks/get, tasks/update, tasks/cancel).
func NamesTask(method string) bool {
	return method == MethodGet || method == MethodUpdate || method == MethodCancel
}

// CheckNameHeader checks a 2026-07-28 task request's Mcp-Name header (as
// header returns it, "" when absent) against its params.taskId, as
// SEP-2663 extends SEP-2243's rule to tasks: a missing or different name
// is an mcp.HeaderMismatchError. Other methods pass.
func CheckNameHeader(header func(string) string, method string, params json.RawMessage) error {
	if !NamesTask(method) {
		return nil
	}
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(params, &p)
	v := header(mcp.HeaderName)
	if v == "" {
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: fmt.Sprintf("missing required header for method %q", method)}
	}
	name, ok := mcp.DecodeHeaderValue(v)
	if !ok {
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: "invalid Base64 encoding"}
	}
	if name != p.TaskID {
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: fmt.Sprintf("header value %q does not match body taskId %q", name, p.TaskID)}
	}
	return nil
}

// Status notification methods of both forms.
const (
	NotificationStatus       = "notifications/tasks"        // 2026-07-28, on subscriptions/listen streams
	LegacyNotificationStatus = "notifications/tasks/status" // 2025-11-25, to the creating connection
)

// StatusNotification is the notification telling r's principal its new
// state: in the Extension form the DetailedTask's fields (result or error
// inlined once terminal), in the Legacy form the Task.
func StatusNotification(r Record) (method string, params map[string]any) {
	var v any = LegacyTask(r)
	method = LegacyNotificationStatus
	if r.Form == Extension {
		d := Detailed(r)
		d.ResultType = ""
		v, method = d, NotificationStatus
	}
	b, _ := json.Marshal(v)
	_ = json.Unmarshal(b, &params)
	return method, params
}
