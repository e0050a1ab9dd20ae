package task

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// The rules every node applies to a task, as pure functions: what a reader
// sees of a record and the requests made of it, which changes a record
// may take, how an outcome settles it, how ids and TTLs are made.

// NewID mints a task id: 128 random bits (crypto/rand), URL- and
// header-safe, so a handle can neither be guessed nor enumerated.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ClampTTL is the TTL a task gets when the client asks for asked (0: none
// asked): the default when none, at most l.MaxTTL. l must have its
// defaults applied.
func ClampTTL(asked time.Duration, l Limits) time.Duration {
	switch {
	case asked <= 0:
		return l.DefaultTTL
	case asked > l.MaxTTL:
		return l.MaxTTL
	}
	return asked
}

// Moves reports whether a task in status from may be changed at all: a
// terminal status never changes, whatever the new state.
func Moves(from Status) bool { return !from.Terminal() }

// Merge is what a reader sees of r once the requests seen for it are
// taken into account, before the running node acted on them: a cancel
// makes a task that has not ended read as cancelled, and answered input
// keys leave InputRequests at once (an input_required task with none left
// reads as working). A terminal record is returned as it is. Every node's
// Store.Get applies it, so any node answers the same right after a
// tasks/cancel or tasks/update.
func Merge(r Record, reqs []Request) Record {
	if r.Status.Terminal() || len(reqs) == 0 {
		return r
	}
	pending := decodeMap(r.InputRequests)
	for _, q := range reqs {
		if q.Task != r.ID {
			continue
		}
		if q.Cancel {
			r.Status, r.InputRequests = Cancelled, nil
			return r
		}
		for k := range decodeMap(q.Responses) {
			delete(pending, k)
		}
	}
	if r.Status == InputRequired {
		r.InputRequests = encodeMap(pending)
		if len(pending) == 0 {
			r.Status = Working
		}
	}
	return r
}

// Outcome is what one run of a task's handler produced: a result, a
// protocol error, or (a multi round-trip handler) input requests to
// answer before it runs again.
type Outcome struct {
	// Result is the encoded CallToolResult; IsError marks a tool error
	// (isError true).
	Result  json.RawMessage
	IsError bool
	// Input, when set, are the input requests (key → request) of an
	// input_required result and State its requestState: the handler runs
	// again with the responses once every key is answered.
	Input json.RawMessage
	State string
	// Err is the protocol error that ends the task as failed.
	Err *Error
}

// Settle is r ended by out at now: completed with its result, failed with
// its error or with a result larger than maxResult bytes, and — in the
// Legacy form, where a tool error is a failure — failed with the tool's
// error result. A terminal r is returned unchanged.
func Settle(r Record, out Outcome, maxResult int, now time.Time) Record {
	if r.Status.Terminal() {
		return r
	}
	r.Updated, r.InputRequests, r.Message = now, nil, ""
	switch {
	case out.Err != nil:
		r.Status, r.Error = Failed, out.Err
	case maxResult > 0 && len(out.Result) > maxResult:
		r.Status, r.Error = Failed, &Error{Code: CodeInternal,
			Message: fmt.Sprintf("result of %d bytes exceeds the limit of %d bytes (--task-max-result)", len(out.Result), maxResult)}
	case out.IsError && r.Form == Legacy:
		r.Status, r.Result = Failed, out.Result
	default:
		r.Status, r.Result = Completed, out.Result
	}
	return r
}

// JSON-RPC error codes a task answers with.
const (
	CodeInvalidParams = -32602
	CodeInternal      = -32603
)

// Cancel is r cancelled at now (unchanged when terminal).
func Cancel(r Record, now time.Time) Record {
	if r.Status.Terminal() {
		return r
	}
	r.Status, r.Updated, r.InputRequests = Cancelled, now, nil
	return r
}

func decodeMap(raw json.RawMessage) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &m)
	}
	return m
}

func encodeMap(m map[string]json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m) // raw values re-encode as they are
	return b
}
