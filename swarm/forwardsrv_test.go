package swarm

import (
	"errors"
	"sync"
	"testing"

	forwardv1 "github.com/mcpswarm/mcpswarm/proto/mcpswarm/forward/v1"
)

// TestProgressRelaySendsInOrderBeforeClosing: what the session reports
// while the call runs is sent in order, all of it before close returns
// (so before the result); a report after close is dropped; a call that
// reports nothing starts no sender at all.
func TestProgressRelaySendsInOrderBeforeClosing(t *testing.T) {
	var mu sync.Mutex
	var got []float64
	p := &progressRelay{send: func(ev *forwardv1.CallToolResponse) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev.GetProgress().GetProgress())
		return nil
	}}
	for i := range 10 {
		p.report(float64(i), 10, "step")
	}
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	p.report(99, 10, "late")
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 10 {
		t.Fatalf("sent %v, want the 10 reports made before close", got)
	}
	for i, v := range got {
		if v != float64(i) {
			t.Fatalf("sent %v, want 0..9 in order", got)
		}
	}

	quiet := &progressRelay{send: func(*forwardv1.CallToolResponse) error { t.Error("sent without a report"); return nil }}
	if err := quiet.close(); err != nil || quiet.queue != nil || quiet.done != nil {
		t.Fatalf("a call without progress: err %v, queue %v, sender %v", err, quiet.queue, quiet.done)
	}
}

// TestProgressRelayDropsWhenFullAndReportsAFailedSend: a sender stuck on
// the network never blocks the session (reports past the queue are
// dropped), and close returns the send's failure so the handler ends the
// call with it.
func TestProgressRelayDropsWhenFullAndReportsAFailedSend(t *testing.T) {
	release := make(chan struct{})
	broken := errors.New("stream broken")
	var sends int
	p := &progressRelay{send: func(*forwardv1.CallToolResponse) error {
		<-release
		sends++
		return broken
	}}
	for i := range 4 * progressQueue {
		p.report(float64(i), 0, "") // must not block although nothing is sent
	}
	close(release)
	if err := p.close(); !errors.Is(err, broken) {
		t.Fatalf("close after a failed send: %v", err)
	}
	if sends != 1 {
		t.Fatalf("%d sends after the first failed, want none", sends-1)
	}
}
