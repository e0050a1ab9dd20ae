package mcp

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// pendingFor reports how many notifications wait for sid's next POST.
func (r *postRoutes) pendingFor(sid string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending[sid])
}

func note(method string) mcp.JSONRPCNotification {
	n := mcp.JSONRPCNotification{JSONRPC: "2.0"}
	n.Method = method
	return n
}

// A backend notification for a connection rides a POST of it running
// here, written before that POST's answer, which becomes an SSE stream.
func TestRoutedNotificationPrecedesTheRunningPOSTsAnswer(t *testing.T) {
	r := newPostRoutes()
	rec := httptest.NewRecorder()
	p := newPostStream(rec, "node1")
	r.begin("c1", p)
	if taken, _ := r.route("c1", note("notifications/resources/updated"), true); !taken {
		t.Fatal("a running POST did not take the notification")
	}
	p.Header().Set("Content-Type", "application/json")
	p.WriteHeader(200)
	answer := `{"jsonrpc":"2.0","id":3,"result":{}}`
	if _, err := p.Write([]byte(answer + "\n")); err != nil {
		t.Fatal(err)
	}
	if late := r.end("c1", p); len(late) != 0 {
		t.Fatalf("%d notifications left after the answer", len(late))
	}
	body := rec.Body.String()
	ni, ai := strings.Index(body, "notifications/resources/updated"), strings.Index(body, `"id":3`)
	if ni < 0 || ai < 0 || ni > ai {
		t.Fatalf("the notification does not precede the answer:\n%s", body)
	}
	if got := rec.Result().Header.Get("Content-Type"); got != "text/event-stream" {
		t.Fatalf("content type %q, want an SSE stream", got)
	}
}

// With no POST running and no GET stream here, a notification waits for
// the connection's next POST (bounded), which writes it first; with a GET
// stream here it is left to mcp-go's channel.
func TestRoutedNotificationWaitsForTheNextPOSTUnlessAGETListens(t *testing.T) {
	r := newPostRoutes()
	if taken, _ := r.route("c1", note("notifications/tools/list_changed"), false); taken {
		t.Fatal("a connection with a GET stream here: the notification must go to mcp-go's channel")
	}
	for i := range maxPendingNotes {
		if taken, dropped := r.route("c1", note("notifications/tools/list_changed"), true); !taken || dropped {
			t.Fatalf("notification %d was not kept for the next POST", i)
		}
	}
	if _, dropped := r.route("c1", note("notifications/tools/list_changed"), true); !dropped {
		t.Fatalf("more than %d notifications kept for one connection", maxPendingNotes)
	}
	rec := httptest.NewRecorder()
	p := newPostStream(rec, "node1")
	r.begin("c1", p)
	if n := r.pendingFor("c1"); n != 0 {
		t.Fatalf("%d still pending once a POST began", n)
	}
	p.Flush()
	if got := strings.Count(rec.Body.String(), "notifications/tools/list_changed"); got != maxPendingNotes {
		t.Fatalf("the next POST wrote %d of %d", got, maxPendingNotes)
	}
	r.end("c1", p)
	r.route("c1", note("notifications/tools/list_changed"), true)
	r.forget("c1")
	if n := r.pendingFor("c1"); n != 0 {
		t.Fatalf("an ended connection still has %d pending", n)
	}
}

// Once a POST began a JSON answer, nothing is written into it: what is
// queued then is handed back when the POST ends, for another stream.
func TestNotificationQueuedAfterAJSONAnswerBeganIsHandedOn(t *testing.T) {
	r := newPostRoutes()
	rec := httptest.NewRecorder()
	p := newPostStream(rec, "node1")
	r.begin("c1", p)
	p.Header().Set("Content-Type", "application/json")
	p.WriteHeader(200)
	r.route("c1", note("notifications/resources/updated"), true)
	answer := `{"jsonrpc":"2.0","id":4,"result":{}}`
	if _, err := p.Write([]byte(answer + "\n")); err != nil {
		t.Fatal(err)
	}
	if body := rec.Body.String(); body != answer+"\n" {
		t.Fatalf("the JSON answer was corrupted:\n%s", body)
	}
	late := r.end("c1", p)
	if len(late) != 1 || late[0].Method != "notifications/resources/updated" {
		t.Fatalf("handed on %v, want the one queued notification", late)
	}
	if taken, _ := r.route("c1", note("x"), false); taken {
		t.Fatal("an ended POST still takes notifications")
	}
}
