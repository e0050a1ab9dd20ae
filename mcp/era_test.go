package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func modernHeaders(method string) map[string]string {
	return map[string]string{headerProtocolVersion: mcp.ProtocolVersion20260728, "Mcp-Method": method}
}

// TestModernNotificationWithoutMeta: the 2026-07-28 revision puts the _meta
// protocolVersion on requests only; the official Go SDK posts
// notifications/cancelled with the header alone and closes the client when
// it is refused.
func TestModernNotificationWithoutMeta(t *testing.T) {
	e := newEnv(t, nil)
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"gone"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"_meta":{"trace":"x"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`,
	} {
		var env struct{ Method string }
		_ = json.Unmarshal([]byte(body), &env)
		status, resp := e.rawPost(t, body, modernHeaders(env.Method))
		if status != http.StatusAccepted {
			t.Errorf("%s: status %d %s, want 202", body, status, resp)
		}
	}
	// Still refused: a notification whose params are not an object.
	status, resp := e.rawPost(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":[1]}`, modernHeaders("notifications/cancelled"))
	if status != http.StatusBadRequest {
		t.Errorf("array params: status %d %s, want 400", status, resp)
	}
	// A request still needs its _meta.
	status, resp = e.rawPost(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, modernHeaders("tools/list"))
	if code, _, _ := rpcErrorOf(t, resp); status != http.StatusBadRequest || code != codeInvalidParams {
		t.Errorf("request without _meta: status %d %s", status, resp)
	}
}

// TestModernRemovedMethods: ping, logging/setLevel and the other methods
// 2026-07-28 removed answer "method not found" (HTTP 404), with or without
// the _meta a client had no reason to send them with.
func TestModernRemovedMethods(t *testing.T) {
	e := newEnv(t, nil)
	for _, m := range []string{"ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "initialize"} {
		for _, params := range []string{``, `,"params":{` + modernMeta + `}`} {
			body := `{"jsonrpc":"2.0","id":7,"method":"` + m + `"` + params + `}`
			status, resp := e.rawPost(t, body, modernHeaders(m))
			code, msg, _ := rpcErrorOf(t, resp)
			if status != http.StatusNotFound || code != codeMethodNotFound || !strings.Contains(msg, "removed") {
				t.Errorf("%s: status %d %s, want 404 -32601", body, status, resp)
			}
		}
	}
	// The legacy era still serves ping.
	c, _ := e.connect(t, clientOpts{})
	if err := c.Ping(t.Context()); err != nil {
		t.Errorf("legacy ping: %v", err)
	}
}

// sseConn is a raw legacy HTTP+SSE connection.
type sseConn struct {
	endpoint string
	events   chan string
}

func openSSE(t *testing.T, base string) *sseConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	c := &sseConn{events: make(chan string, 16)}
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	first := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "endpoint":
				first <- strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "data: "):
				select {
				case c.events <- strings.TrimPrefix(line, "data: "):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	select {
	case c.endpoint = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no endpoint event on /sse")
	}
	return c
}

// call posts a request and returns the response the stream carries.
func (c *sseConn) call(t *testing.T, base, body string) map[string]any {
	t.Helper()
	if status, resp := postTo(t, base+c.endpoint, body); status != http.StatusAccepted {
		t.Fatalf("POST %s: %d %s", c.endpoint, status, resp)
	}
	select {
	case ev := <-c.events:
		var m map[string]any
		if err := json.Unmarshal([]byte(ev), &m); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer on the stream to %s", body)
		return nil
	}
}

// TestSSEAdvertisesOnlyLegacyEras: over HTTP+SSE server/discover lists only
// the session-based revisions (a 2026-07-28 client then initializes), and a
// request that declares 2026-07-28 anyway is refused with the list.
func TestSSEAdvertisesOnlyLegacyEras(t *testing.T) {
	e := newEnv(t, nil)
	c := openSSE(t, e.url)
	res := c.call(t, e.url, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`)
	result, _ := res["result"].(map[string]any)
	var versions []string
	for _, v := range result["supportedVersions"].([]any) {
		versions = append(versions, v.(string))
	}
	if !slices.Equal(versions, legacyVersions()) || slices.Contains(versions, mcp.ProtocolVersion20260728) {
		t.Errorf("server/discover over /sse advertises %v, want %v", versions, legacyVersions())
	}
	res = c.call(t, e.url, `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+modernMeta+`}}`)
	errObj, _ := res["error"].(map[string]any)
	if code, _ := errObj["code"].(float64); int(code) != mcp.UNSUPPORTED_PROTOCOL_VERSION {
		t.Errorf("a 2026-07-28 request over /sse answered %v, want %d", res, mcp.UNSUPPORTED_PROTOCOL_VERSION)
	}
	// /mcp still advertises 2026-07-28.
	_, resp := e.rawPost(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+modernMeta+`}}`, modernHeaders("server/discover"))
	if !strings.Contains(resp, mcp.ProtocolVersion20260728) {
		t.Errorf("/mcp server/discover: %s", resp)
	}
}

// TestLateAnswerIsAcknowledged: an answer to a server request that already
// ended (its call was cancelled) is acknowledged and dropped; mcp-go's 400
// made the official Go SDK fail the client's next call.
func TestLateAnswerIsAcknowledged(t *testing.T) {
	e := newEnv(t, nil)
	other := newEnv(t, nil) // another node: same key, no stream for the connection
	url := e.url
	post := func(body, sid string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(headerProtocolVersion, mcp.ProtocolVersion20251125)
		if sid != "" {
			req.Header.Set(headerSessionID, sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(headerSessionID)
	}
	_, sid := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`, "")
	if sid == "" {
		t.Fatal("no session id")
	}
	for _, answer := range []string{
		`{"jsonrpc":"2.0","id":42,"result":{"action":"cancel"}}`,
		`{"jsonrpc":"2.0","id":43,"error":{"code":-1,"message":"user went away"}}`,
	} {
		if status, _ := post(answer, sid); status != http.StatusAccepted {
			t.Errorf("late answer %s: HTTP %d, want 202", answer, status)
		}
	}
	// On a node that holds no stream for the connection (mcp-go: 404, which
	// the Go SDK takes for "session gone" and closes the client).
	url = other.url
	if status, _ := post(`{"jsonrpc":"2.0","id":44,"result":{"action":"cancel"}}`, sid); status != http.StatusAccepted {
		t.Errorf("late answer on another node: HTTP %d, want 202", status)
	}
	// Still refused: an answer for a connection id nobody minted.
	if status, _ := post(`{"jsonrpc":"2.0","id":42,"result":{}}`, "s1.forged"); status != http.StatusNotFound {
		t.Errorf("forged connection: HTTP %d, want 404", status)
	}
}
