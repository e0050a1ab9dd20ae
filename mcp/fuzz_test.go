package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

type fuzzTarget struct {
	h   http.Handler
	sid string
}

// loopbackCtx makes a request look as if it reached a loopback listener,
// so DNS-rebinding protection runs as in production.
func loopbackCtx() context.Context {
	return context.WithValue(context.Background(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1})
}

func serveOnce(h http.Handler, body []byte, headers map[string]string) *httptest.ResponseRecorder {
	// Long-lived streams (subscriptions/listen) end when the client goes.
	ctx, cancel := context.WithTimeout(loopbackCtx(), 200*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// FuzzHandler posts arbitrary bodies to /mcp, with and without a valid
// session id, and checks the front always answers (no panic), never with
// a 5xx, and that a non-2xx JSON answer is a well-formed JSON-RPC error.
func FuzzHandler(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"swarm_apps"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"zz.x.click","arguments":{"a":[1,2,{"b":null}]}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"swarm://session/x/model/k"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"login"},"argument":{"name":"id","value":""}}}`,
		`{"jsonrpc":"2.0","id":6,"result":{"action":"accept","content":{"approve":true}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"swarm_start","arguments":{"app":"counter","id":"fz"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 80) + strings.Repeat("]", 80) + `}`,
		"\x00\xff{",
		``,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	fuzzEnv := newFuzzTarget(f)
	rec := serveOnce(fuzzEnv.h, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`), nil)
	fuzzEnv.sid = rec.Header().Get(headerSessionID)
	if fuzzEnv.sid == "" {
		f.Fatal("initialize minted no session id")
	}
	f.Fuzz(func(t *testing.T, body []byte, withSession bool) {
		h := map[string]string{}
		if withSession {
			h[headerSessionID] = fuzzEnv.sid
			h[headerProtocolVersion] = mcp.ProtocolVersion20251125
		}
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() { done <- serveOnce(fuzzEnv.h, body, h) }()
		var rec *httptest.ResponseRecorder
		select {
		case rec = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("handler hung on %q (session %v)", body, withSession)
		}
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body.String())
		}
		if rec.Code >= 400 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			var v struct {
				JSONRPC string          `json:"jsonrpc"`
				Error   json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || v.JSONRPC != "2.0" || len(v.Error) == 0 {
				t.Fatalf("malformed error answer %d for %q: %s", rec.Code, body, rec.Body.String())
			}
		}
	})
}
