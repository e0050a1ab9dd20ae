package mcp

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// A notification drained before mcp-go's answer starts an SSE response;
// mcp-go, which did not upgrade the response itself, then writes its answer
// as plain JSON. The answer must still arrive as an SSE event, or the
// client reads a stream without it ("unexpected nil response").
func TestPostStreamFramesAJSONAnswerAfterItStartedSSE(t *testing.T) {
	rec := httptest.NewRecorder()
	p := newPostStream(rec, "node1")
	ch := p.source()
	defer p.close()
	n := mcp.JSONRPCNotification{JSONRPC: "2.0"}
	n.Method = "notifications/tools/list_changed"
	ch <- n
	p.Flush()
	// What mcp-go's handlePost does for a response it did not upgrade.
	p.Header().Set("Content-Type", "application/json")
	p.WriteHeader(200)
	answer := `{"jsonrpc":"2.0","id":7,"result":{}}`
	if _, err := p.Write([]byte(answer + "\n")); err != nil {
		t.Fatal(err)
	}
	body := rec.Body.String()
	if !strings.Contains(body, "event: message\ndata: "+answer+"\n\n") {
		t.Fatalf("the answer is not an SSE event of the stream:\n%s", body)
	}
	if got := rec.Result().Header.Get("Content-Type"); got != "text/event-stream" {
		t.Fatalf("content type %q", got)
	}
}

// mcp-go sets the answer's header from its own goroutines while this
// stream's tick may start the SSE response for a queued notification: the
// two must not share a header map (a concurrent map write crashes the
// node; `go test -race` sees it).
func TestPostStreamHeaderIsNotSharedWithTheTick(t *testing.T) {
	rec := httptest.NewRecorder()
	p := newPostStream(rec, "node1")
	ch := p.source()
	defer p.close()
	n := mcp.JSONRPCNotification{JSONRPC: "2.0"}
	n.Method = "notifications/progress"
	ch <- n
	// Keep setting for several tick intervals, so the tick's start of the
	// SSE response falls inside the loop.
	for start := time.Now(); time.Since(start) < 6*postDrainInterval; {
		p.Header().Set("Content-Type", "application/json")
	}
	// The tick drains within postDrainInterval; Flush drains now either way.
	p.Flush()
	if !strings.Contains(rec.Body.String(), "notifications/progress") {
		t.Fatalf("the notification was not written:\n%s", rec.Body.String())
	}
}
