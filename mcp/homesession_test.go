package mcp

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/internal/poll"
)

// connRequest is a request of method on connection id's endpoint, as a
// 2025-11-25 client sends it.
func (e *testEnv) connRequest(ctx context.Context, method, id string) *http.Request {
	req, err := http.NewRequestWithContext(ctx, method, e.url+"/mcp", nil)
	if err != nil {
		panic(err) // a constant method and the test server's URL
	}
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	req.Header.Set(headerSessionID, id)
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20251125)
	return req
}

// openGET opens connection id's GET stream and returns its lines as they
// arrive; the stream ends with the test.
func (e *testEnv) openGET(t *testing.T, id string, headers map[string]string) (int, <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := e.connRequest(ctx, http.MethodGet, id)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = resp.Body.Close()
		<-done
	})
	return resp.StatusCode, lines
}

// registered returns what this node registered for connection id.
func (e *testEnv) registered(id string) any { return e.srv.conns.session(id) }

// A connection initialized here is held by a stand-in of a few hundred
// bytes, not by mcp-go's 9.5 KB session object, and the stand-in carries
// what initialize declared (a lone node has no registry to read it from).
func TestAnIdleConnectionKeepsOnlyAStandInOnItsHomeNode(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	h, ok := e.registered(c.GetSessionId()).(*homeSession)
	if !ok {
		t.Fatalf("the home node registered %T for the connection; want its stand-in", e.registered(c.GetSessionId()))
	}
	if h.GetClientInfo().Name != "test" {
		t.Errorf("the stand-in's client info is %+v; want what initialize declared", h.GetClientInfo())
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A GET stream takes the stand-in's place with mcp-go's own session, and
// what the connection subscribed to before reaches it there.
func TestAGETStreamTakesOverTheConnectionWithItsSubscriptions(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	id := c.GetSessionId()
	if r := callTool(t, c, "swarm_start", map[string]any{"app": "counter", "id": "gs"}); r.IsError {
		t.Fatal(text(r))
	}
	uri := SessionURI("gs", "model/count")
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = uri
	if err := c.Subscribe(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	status, lines := e.openGET(t, id, nil)
	if status != http.StatusOK {
		t.Fatalf("GET answered %d", status)
	}
	poll.Until(t, 5*time.Second, "the GET's session replaces the stand-in", func() error {
		if _, standIn := e.registered(id).(*homeSession); standIn || e.registered(id) == nil {
			return fmt.Errorf("registered: %T", e.registered(id))
		}
		return nil
	})
	// No POST of the connection runs: the change goes to the GET stream.
	e.srv.onEvent(Event{Kind: ResourceChanged, Session: "gs", Resource: "model/count"})
	timeout := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the GET stream ended before the notification")
			}
			if strings.Contains(l, "notifications/resources/updated") && strings.Contains(l, uri) {
				return
			}
		case <-timeout:
			t.Fatal("the subscription made before the GET did not reach the GET stream")
		}
	}
}

// A GET that mcp-go answers without registering a session (a resumption
// it cannot replay) puts the stand-in back, so the connection's end still
// clears what this node keeps of it.
func TestARefusedGETLeavesTheStandInInPlace(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	id := c.GetSessionId()
	before := e.registered(id)
	status, _ := e.openGET(t, id, map[string]string{"Last-Event-ID": "nothing-to-replay"})
	if status == http.StatusOK {
		t.Fatalf("a resumption of an unknown event was answered %d", status)
	}
	if got := e.registered(id); got != before {
		t.Fatalf("after the refused GET the node holds %T; want the stand-in back", got)
	}
	if code, body := e.rawDelete(t, id); code != http.StatusOK {
		t.Fatalf("DELETE answered %d %s", code, body)
	}
	if got := e.registered(id); got != nil {
		t.Errorf("the ended connection is still registered here (%T)", got)
	}
}

func (e *testEnv) rawDelete(t *testing.T, id string) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(e.connRequest(context.Background(), http.MethodDelete, id))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	return resp.StatusCode, b.String()
}

// Two GET streams of one connection opened at the same moment are both
// served: the second waits for the first to take the stand-in out instead
// of finding it registered (mcp-go refuses a GET then).
func TestTwoGETsAtOnceAreBothServed(t *testing.T) {
	e := newEnv(t, nil)
	for round := range 20 {
		c, _ := e.connect(t, clientOpts{})
		id := c.GetSessionId()
		statuses := make(chan int, 2)
		for range 2 {
			go func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				resp, err := http.DefaultClient.Do(e.connRequest(ctx, http.MethodGet, id))
				if err != nil {
					statuses <- 0
					return
				}
				statuses <- resp.StatusCode
				_ = resp.Body.Close()
			}()
		}
		for range 2 {
			if got := <-statuses; got != http.StatusOK {
				t.Fatalf("round %d: a GET of a connection opened together with another answered %d", round, got)
			}
		}
		_ = c.Close()
	}
}
