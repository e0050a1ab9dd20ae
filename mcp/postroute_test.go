package mcp

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// pendingFor reports how many notifications wait for sid's next POST.
func (r *postRoutes) pendingFor(sid string) int {
	sh := r.shard(sid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return len(sh.pending[sid])
}

func note(method string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"` + method + `"}`)
}

// A backend notification for a connection rides a POST of it running
// here, written before that POST's answer, which becomes an SSE stream.
func TestRoutedNotificationPrecedesTheRunningPOSTsAnswer(t *testing.T) {
	r := newPostRoutes()
	rec := httptest.NewRecorder()
	p := newEventStream(rec)
	r.begin("c1", p)
	if taken, _ := r.route("c1", note("notifications/resources/updated"), true); !taken {
		t.Fatal("a running POST did not take the notification")
	}
	r.end("c1", p)
	answer := `{"jsonrpc":"2.0","id":3,"result":{}}`
	if sse, err := p.finish([]byte(answer)); !sse || err != nil {
		t.Fatalf("finish: sse %v, err %v; want the answer as the stream's last event", sse, err)
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

// With no POST running here, a notification waits for the connection's
// next POST (bounded), which writes it first.
func TestRoutedNotificationWaitsForTheNextPOST(t *testing.T) {
	r := newPostRoutes()
	if taken, _ := r.route("c1", note("notifications/tools/list_changed"), false); taken {
		t.Fatal("nothing runs and nothing may wait: the notification must not be taken")
	}
	for i := range maxQueued {
		if taken, dropped := r.route("c1", note("notifications/tools/list_changed"), true); !taken || dropped {
			t.Fatalf("notification %d was not kept for the next POST", i)
		}
	}
	if _, dropped := r.route("c1", note("notifications/tools/list_changed"), true); !dropped {
		t.Fatalf("more than %d notifications kept for one connection", maxQueued)
	}
	rec := httptest.NewRecorder()
	p := newEventStream(rec)
	r.begin("c1", p)
	if n := r.pendingFor("c1"); n != 0 {
		t.Fatalf("%d still pending once a POST began", n)
	}
	r.end("c1", p)
	if _, err := p.finish([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(rec.Body.String(), "notifications/tools/list_changed"); got != maxQueued {
		t.Fatalf("the next POST wrote %d of %d", got, maxQueued)
	}
	r.route("c1", note("notifications/tools/list_changed"), true)
	r.forget("c1")
	if n := r.pendingFor("c1"); n != 0 {
		t.Fatalf("an ended connection still has %d pending", n)
	}
}

// A POST answered as JSON (nothing written before) writes nothing else,
// and once it finished it takes no notification.
func TestAFinishedPOSTTakesNothing(t *testing.T) {
	r := newPostRoutes()
	rec := httptest.NewRecorder()
	p := newEventStream(rec)
	if sse, err := p.finish([]byte(`{"jsonrpc":"2.0","id":4,"result":{}}`)); sse || err != nil {
		t.Fatalf("finish: sse %v, err %v; want a JSON answer left to the caller", sse, err)
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("finish wrote %q on a JSON answer", rec.Body.String())
	}
	r.begin("c1", p)
	if taken, _ := r.route("c1", note("x"), false); taken {
		t.Fatal("a finished POST still takes notifications")
	}
}
