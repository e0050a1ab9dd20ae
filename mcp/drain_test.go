package mcp

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestStreamsOpenedDuringShutdownAreRefused pins the shutdown drain: once
// Shutdown has begun, a GET (a stream nothing would close) is answered 503
// with Retry-After.
func TestStreamsOpenedDuringShutdownAreRefused(t *testing.T) {
	e := newEnv(t, nil)
	c, _ := e.connect(t, clientOpts{})
	id := c.GetSessionId()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	req, err := http.NewRequest(http.MethodGet, e.url+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(headerSessionID, id)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET after shutdown: %v (a stream was opened that nothing will close)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET after shutdown: HTTP %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
