package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/session"
)

// waitApp's one button waits until its call's context ends, telling the
// test when it started and how it ended: "cancelled" only when the call
// was cancelled (the owner's call timeout ends it as "timed out").
type waitApp struct{ outcome chan string }

func (waitApp) Init() (session.Model, error) { return map[string]any{}, nil }

func (waitApp) Update(m session.Model, _ session.Msg) (session.Model, error) { return m, nil }

func (a waitApp) UpdateContext(ctx context.Context, m session.Model, _ session.Msg) (session.Model, error) {
	a.outcome <- "started"
	select {
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			a.outcome <- "cancelled"
		} else {
			a.outcome <- "timed out"
		}
		return m, ctx.Err()
	case <-time.After(10 * time.Second):
		a.outcome <- "not cancelled"
		return m, nil
	}
}

func (waitApp) View(session.Model) session.Node {
	return session.Button{ID: "wait", Label: "Wait", OnClick: "wait"}
}

// A client's notifications/cancelled cancels its tool call, whether it
// reaches this node's front or is relayed from another node's.
func TestAClientCancelsACall(t *testing.T) {
	outcome := make(chan string, 2)
	e := newEnv(t, func(_ *Config, r *session.Registry) {
		if err := r.Register("wait", "waits for cancellation", func() session.App { return waitApp{outcome} }); err != nil {
			t.Fatal(err)
		}
	})
	c, _ := e.connect(t, clientOpts{})
	sid := c.GetSessionId()
	if st, _, body := e.post(t, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"swarm_start","arguments":{"app":"wait","id":"wt"}}}`); st != http.StatusOK || strings.Contains(body, `"isError":true`) {
		t.Fatalf("swarm_start: %d %s", st, body)
	}
	const cancel = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"stop"}}` // %s: the call's id

	for _, tc := range []struct {
		name, id string
		send     func(body string)
	}{
		{"on this node's front", "4242", func(body string) {
			if st, _, out := e.post(t, sid, body); st != http.StatusAccepted {
				t.Errorf("the cancellation answered %d %s", st, out)
			}
		}},
		{"relayed from another node", `"call-2"`, func(body string) {
			if _, err := e.srv.DeliverResponse(context.Background(), sid, []byte(body)); err != nil {
				t.Errorf("delivering the cancellation: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answered := postInBackground(e.url, sid,
				`{"jsonrpc":"2.0","id":`+tc.id+`,"method":"tools/call","params":{"name":"wt.wait.click","arguments":{}}}`)
			if got := receive(t, outcome, 10*time.Second, "the call reaching the session"); got != "started" {
				t.Fatalf("the session reported %q before starting", got)
			}
			tc.send(fmt.Sprintf(cancel, tc.id))
			if got := receive(t, outcome, 15*time.Second, "the session's update ending"); got != "cancelled" {
				t.Fatalf("the session saw %q", got)
			}
			// The call ended because of the cancellation — the caller
			// stopped waiting ("call cancelled") or the update saw its
			// context end first ("context canceled") —, not at the owner's
			// call timeout (which cancels the update's context too, once
			// the handler returns).
			if body := receive(t, answered, 10*time.Second, "the cancelled call's answer"); strings.Contains(body, "no answer within") || !strings.Contains(body, "cancel") {
				t.Fatalf("the cancelled call answered %s", body)
			}
		})
	}
}

// postInBackground POSTs a message of connection sid and hands on the
// answer's body (or the error) once it ends.
func postInBackground(url, sid, body string) <-chan string {
	answered := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(headerSessionID, sid)
		req.Header.Set(headerProtocolVersion, mcp.ProtocolVersion20251125)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- string(b)
	}()
	return answered
}

// receive returns the next value from ch, failing the test when none
// comes within the time given.
func receive[T any](t testing.TB, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("waited %s for %s", within, what)
		var zero T
		return zero
	}
}

// post sends one JSON-RPC message of connection sid and returns the
// answer's status, media type and body.
func (e *testEnv) post(t *testing.T, sid, body string) (int, string, string) {
	t.Helper()
	return e.rawPostTyped(t, body, map[string]string{headerSessionID: sid, headerProtocolVersion: mcp.ProtocolVersion20251125})
}
