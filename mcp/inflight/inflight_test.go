package inflight

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestDrainWaitsForRequestsInFlight pins that Close returns once the
// request in flight has returned, and refuses requests after.
func TestDrainWaitsForRequestsInFlight(t *testing.T) {
	var d Drain
	if !d.Enter() {
		t.Fatal("a fresh drain refused a request")
	}
	closed := make(chan error, 1)
	go func() { closed <- d.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("close returned (%v) while a request was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	d.Leave()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if d.Enter() {
		t.Fatal("a closed drain let a request in")
	}
}

func TestACancellationCancelsTheRequestItNames(t *testing.T) {
	var c Calls
	ctx1, done1 := c.Start(context.Background(), "conn", float64(7))
	defer done1()
	ctx2, done2 := c.Start(context.Background(), "other", float64(7))
	defer done2()
	c.Cancel("conn", json.RawMessage(`{"requestId":7}`))
	if ctx1.Err() == nil {
		t.Fatal("request 7 of conn was not cancelled")
	}
	if ctx2.Err() != nil {
		t.Fatal("request 7 of another connection was cancelled")
	}
}
