// Package task is the MCP tasks surface of the front: the record a task
// is, the cluster-wide table it lives in (Store, which the swarm
// implements), and the rules every node applies to it. A task is a
// tools/call whose answer comes later: its handle (the task id) is
// returned once the record is durable on this node and held by every live
// peer, so any node answers tasks/get from its own copy, and the record
// outlives the node that ran it.
//
// Two wire forms exist: the experimental tasks of the 2025-11-25 revision
// (SEP-1686: the `tasks` capability, tasks/get, tasks/result, tasks/list,
// tasks/cancel) and the 2026-07-28 extension io.modelcontextprotocol/tasks
// (SEP-2663: a flat CreateTaskResult, tasks/get with the result inlined,
// tasks/update, tasks/cancel). A record is the same in both; Form says
// which one created it and so how it is shown.
package task

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Status is a task's state. A terminal status never changes.
type Status string

// The statuses of both forms.
const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed"
	Failed        Status = "failed"
	Cancelled     Status = "cancelled"
)

// Terminal reports whether s is final: completed, failed or cancelled.
func (s Status) Terminal() bool {
	return s == Completed || s == Failed || s == Cancelled
}

// Form is the wire form a task was created in.
type Form uint8

// The two wire forms.
const (
	// Legacy is the 2025-11-25 experimental form (SEP-1686).
	Legacy Form = 1
	// Extension is the 2026-07-28 extension io.modelcontextprotocol/tasks
	// (SEP-2663).
	Extension Form = 2
)

// ExtensionName is the 2026-07-28 extension's key in capabilities.extensions.
const ExtensionName = "io.modelcontextprotocol/tasks"

// Record is one task as every node holds it. Only the node named Node
// changes it while it runs; a survivor may settle it (Failed) once Node
// is lost.
type Record struct {
	// ID is the task's handle: random, with enough entropy that it cannot
	// be guessed.
	ID string `json:"id"`
	// Principal owns the task: another principal's request for it is
	// answered exactly as one for an unknown id.
	Principal string `json:"principal"`
	// Node runs the task.
	Node string `json:"node"`
	// Tool is the tool the task calls.
	Tool string `json:"tool"`
	// Form is the wire form that created the task.
	Form Form `json:"form"`
	// Conn is the connection that created a Legacy task (its
	// notifications/tasks/status go there); "" for an Extension task.
	Conn string `json:"conn,omitempty"`

	Status  Status `json:"status"`
	Message string `json:"message,omitempty"`
	// Created and Updated are when the task was created and last changed.
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// TTL is how long after Created the record is kept; past it the task
	// is unknown on every node.
	TTL time.Duration `json:"ttl"`
	// PollInterval is the interval the server suggests between polls.
	PollInterval time.Duration `json:"poll,omitempty"`

	// Result is the tool's CallToolResult, once Completed (a tool error,
	// isError true, is Completed in the Extension form and Failed in the
	// Legacy one).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the protocol error that ended a Failed task.
	Error *Error `json:"error,omitempty"`
	// InputRequests are the requests an InputRequired task waits on, keyed
	// by server-minted ids (the 2026-07-28 inputRequests map).
	InputRequests json.RawMessage `json:"input,omitempty"`
}

// Error is a JSON-RPC error as a task carries it.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Expired reports whether r's TTL has run out at now.
func (r Record) Expired(now time.Time) bool {
	return r.TTL > 0 && now.After(r.Created.Add(r.TTL))
}

// Request is what a node asks of a task another node may be running:
// cancel it, or hand it a client's input responses (tasks/update).
type Request struct {
	// Task is the task's id.
	Task string `json:"task"`
	// Cancel asks the running node to cancel the task.
	Cancel bool `json:"cancel,omitempty"`
	// Responses are input responses keyed by the ids of the task's
	// InputRequests.
	Responses json.RawMessage `json:"responses,omitempty"`
}

// Event is one change a Store reports: a record that changed (on any
// node), or a request for a task this node runs.
type Event struct {
	// Task is the record as it now is; Gone marks one that was removed
	// (expired) or is no longer known.
	Task Record
	Gone bool
	// Request, when set, is a request addressed to a task this node runs;
	// Task is then that task's record.
	Request *Request
}

// Store is the cluster-wide task table. Create and Put are durable and
// replicated before they return; reads answer from this node's copy and
// never wait on the network.
type Store interface {
	// Create stores a new record. It returns once the record is durable
	// on this node and every live peer has it, so a tasks/get on any node
	// finds it; ErrTooMany when the principal holds its limit of live
	// tasks.
	Create(ctx context.Context, r Record) error
	// Put records a new state of a task this node runs (or settles one
	// whose node was lost). It returns once the change is durable and held
	// by every live peer.
	Put(ctx context.Context, r Record) error
	// Get returns task id as this node knows it; false when it is unknown
	// or expired.
	Get(id string) (Record, bool)
	// Of returns principal's known, unexpired tasks, newest first.
	Of(principal string) []Record
	// Ask delivers req to the node that runs req.Task, whichever node that
	// is, and returns once that node can see it.
	Ask(ctx context.Context, req Request) error
	// Watch calls fn for every Event until cancel is called. fn must not
	// block long.
	Watch(fn func(Event)) (cancel func())
}

// Errors a Store or the service returns.
var (
	// ErrUnknown is the answer for a task that does not exist, expired,
	// or belongs to another principal: the three are indistinguishable.
	ErrUnknown = errors.New("unknown task")
	// ErrTooMany refuses a task past the principal's limit.
	ErrTooMany = errors.New("too many tasks")
)

// Limits bound what tasks may cost. Each refusal names its limit.
type Limits struct {
	// PerPrincipal is how many unexpired tasks (running or finished) a
	// principal may hold across the cluster.
	PerPrincipal int
	// MaxResultBytes bounds a task's encoded result; a larger result
	// fails the task with an error saying so.
	MaxResultBytes int
	// DefaultTTL is a task's TTL when the client asks for none; MaxTTL
	// caps what a client may ask for.
	DefaultTTL, MaxTTL time.Duration
	// PollInterval is the interval suggested to clients between polls.
	PollInterval time.Duration
}

// Default limits.
const (
	DefaultPerPrincipal   = 100
	DefaultMaxResultBytes = 512 << 10 // half the smallest peer message allowed: a record travels in one
	DefaultTTL            = time.Hour
	DefaultMaxTTL         = 24 * time.Hour
	DefaultPollInterval   = 500 * time.Millisecond
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.PerPrincipal <= 0 {
		l.PerPrincipal = DefaultPerPrincipal
	}
	if l.MaxResultBytes <= 0 {
		l.MaxResultBytes = DefaultMaxResultBytes
	}
	if l.DefaultTTL <= 0 {
		l.DefaultTTL = DefaultTTL
	}
	if l.MaxTTL <= 0 {
		l.MaxTTL = DefaultMaxTTL
	}
	if l.DefaultTTL > l.MaxTTL {
		l.DefaultTTL = l.MaxTTL
	}
	if l.PollInterval <= 0 {
		l.PollInterval = DefaultPollInterval
	}
	return l
}
