package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/mcp"
	"github.com/mcpswarm/mcpswarm/mcp/fixture"
	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// fixtureFront serves the front with the conformance fixture plugged in and
// returns its base URL.
func fixtureFront(t *testing.T) string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := session.NewRegistry()
	if err := apps.Register(reg); err != nil {
		t.Fatal(err)
	}
	mgr, err := session.NewManager(session.ManagerConfig{Registry: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.New(mcp.Config{Node: "n1", Backend: mcp.NewLocalBackend("n1", mgr), Cluster: mcp.LoneCluster(), Guard: authz.DevGuard(),
		SessionKey: []byte("0123456789abcdef0123456789abcdef"), Logger: log, Keepalive: time.Hour,
		Extend: fixture.Register, Completer: fixture.Completer{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		ts.CloseClientConnections()
		ts.Close()
		_ = mgr.Close(ctx)
		http.DefaultClient.CloseIdleConnections()
	})
	return ts.URL
}

// postModern posts a 2026-07-28 tools/call with the given _meta additions
// and returns the HTTP status and the whole body.
func postModern(t *testing.T, url, tool string, meta map[string]any) (int, string) {
	t.Helper()
	m := map[string]any{
		mcpgo.MetaKeyProtocolVersion:    mcpgo.ProtocolVersion20260728,
		mcpgo.MetaKeyClientCapabilities: map[string]any{},
	}
	for k, v := range meta {
		m[k] = v
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": map[string]any{}, "_meta": m}})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcpgo.HeaderProtocolVersion, mcpgo.ProtocolVersion20260728)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestUndeclaredCapabilityIsRefusedBeforeTheToolRuns: 2026-07-28 says a
// server MUST NOT rely on a capability the client did not declare, and
// answers -32021 with HTTP 400 and data.requiredCapabilities as an object.
func TestUndeclaredCapabilityIsRefusedBeforeTheToolRuns(t *testing.T) {
	url := fixtureFront(t)
	status, body := postModern(t, url, fixture.ToolMissingCapability, nil)
	var resp struct {
		ID    int `json:"id"`
		Error *struct {
			Code int `json:"code"`
			Data struct {
				RequiredCapabilities map[string]map[string]any `json:"requiredCapabilities"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Error == nil {
		t.Fatalf("HTTP %d %s", status, body)
	}
	if status != http.StatusBadRequest || resp.Error.Code != mcpgo.MISSING_REQUIRED_CLIENT_CAPABILITY || resp.ID != 9 {
		t.Errorf("HTTP %d code %d id %d, want 400 -32021 id 9", status, resp.Error.Code, resp.ID)
	}
	if _, ok := resp.Error.Data.RequiredCapabilities["sampling"]; !ok {
		t.Errorf("requiredCapabilities %v lacks sampling", resp.Error.Data.RequiredCapabilities)
	}
	// Declared, the tool runs.
	status, body = postModern(t, url, fixture.ToolMissingCapability,
		map[string]any{mcpgo.MetaKeyClientCapabilities: map[string]any{"sampling": map[string]any{}}})
	if status != http.StatusOK || !strings.Contains(body, "sampling is declared") {
		t.Errorf("with sampling declared: HTTP %d %s", status, body)
	}
}

// TestModernLogLevelThroughTheFront: a 2026-07-28 request receives exactly
// the log messages at or above the _meta logLevel it set, on its own
// response stream, and none without one.
func TestModernLogLevelThroughTheFront(t *testing.T) {
	url := fixtureFront(t)
	for _, tc := range []struct {
		level string
		want  int
	}{{"", 0}, {"info", 2}, {"debug", 3}, {"warning", 1}} {
		meta := map[string]any{}
		if tc.level != "" {
			meta[mcpgo.MetaKeyLogLevel] = tc.level
		}
		for range 5 {
			status, body := postModern(t, url, fixture.ToolLogLevel, meta)
			if status != http.StatusOK || !strings.Contains(body, fixture.LoggingDoneText) {
				t.Fatalf("HTTP %d %s", status, body)
			}
			if n := strings.Count(body, `"notifications/message"`); n != tc.want {
				t.Errorf("logLevel %q: %d log messages, want %d\n%s", tc.level, n, tc.want, body)
			}
		}
	}
}
