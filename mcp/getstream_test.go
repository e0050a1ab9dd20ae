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

// A connection initialized here is known here with what initialize
// declared (a lone node keeps it itself, a cluster in its registry), and
// its DELETE clears what this node holds of it.
func TestAConnectionIsKnownOnItsHomeNodeUntilItsDelete(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	id := c.GetSessionId()
	if !e.srv.conns.known(id) {
		t.Fatal("the home node does not know the connection it initialized")
	}
	if ci, ok := e.srv.registry.Get(id); !ok || ci.ClientInfo.Name != "test" {
		t.Errorf("the connection's record is %+v; want what initialize declared", ci)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code, body := e.rawDelete(t, id); code != http.StatusOK {
		t.Fatalf("DELETE answered %d %s", code, body)
	}
	if e.srv.conns.known(id) {
		t.Error("the ended connection is still known here")
	}
}

// A GET stream becomes the connection's way here, and what the
// connection subscribed to before reaches it there.
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
	poll.Until(t, 5*time.Second, "the GET is the connection's stream here", func() error {
		if e.srv.conns.out(id) == nil {
			return fmt.Errorf("no stream registered for %s", id)
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
// served.
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
