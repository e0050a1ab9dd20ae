package mcp

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestStreamsOpenedDuringShutdownAreRefused pins the shutdown drain: once
// Shutdown has begun, a GET (which would register its session and start
// mcp-go's session-scoped listening pump after mcp-go's own sweep, leaking
// the pump and hanging the handler) is answered 503 with Retry-After.
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

// TestDrainSweepsUntilRequestsInFlightReturn pins that close keeps
// sweeping while a request is in flight and stops once it has returned.
func TestDrainSweepsUntilRequestsInFlightReturn(t *testing.T) {
	var d requestDrain
	if !d.enter() {
		t.Fatal("a fresh drain refused a request")
	}
	sweeps := make(chan struct{}, 100)
	go func() {
		<-sweeps
		<-sweeps // two sweeps seen while the request is in flight
		d.leave()
	}()
	if err := d.close(context.Background(), func() {
		select {
		case sweeps <- struct{}{}:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	if d.enter() {
		t.Fatal("a closed drain let a request in")
	}
}
