// Package rpcwire reads JSON-RPC answers from MCP Streamable HTTP
// responses for the benchmark and soak clients: one JSON message, or an SSE
// stream whose events may carry notifications before the answer.
package rpcwire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strconv"
	"strings"
)

// MaxResponse bounds what a client reads of one answer.
const MaxResponse = 1 << 20

// Error is a JSON-RPC error answer.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// ReadResult finds the answer to request id in a Streamable HTTP response
// body: one JSON message, or an SSE stream whose events may also carry
// notifications before it.
func ReadResult(contentType string, body io.Reader, id int64) (json.RawMessage, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("answer Content-Type %q: %w", contentType, err)
	}
	switch mt {
	case "application/json":
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, fmt.Errorf("reading the answer: %w", err)
		}
		return matchResult(b, id)
	case "text/event-stream":
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 4096), MaxResponse)
		var data []byte
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
			case line == "" && len(data) > 0:
				if res, err := matchResult(data, id); !errors.Is(err, errNotOurs) {
					return res, err
				}
				data = data[:0]
			}
		}
		if len(data) > 0 {
			if res, err := matchResult(data, id); !errors.Is(err, errNotOurs) {
				return res, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("reading the event stream: %w", err)
		}
		return nil, errors.New("the event stream ended without an answer")
	default:
		return nil, fmt.Errorf("unexpected answer Content-Type %q", contentType)
	}
}

// errNotOurs marks an SSE event that is not the answer being waited for.
var errNotOurs = errors.New("not the awaited answer")

// matchResult decodes one JSON-RPC message and returns its result when it
// answers id.
func matchResult(b []byte, id int64) (json.RawMessage, error) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("decoding the answer: %w", err)
	}
	if string(m.ID) != strconv.FormatInt(id, 10) {
		return nil, errNotOurs
	}
	if m.Error != nil {
		return nil, m.Error
	}
	if m.Result == nil {
		return nil, errors.New("answer without result or error")
	}
	return m.Result, nil
}
