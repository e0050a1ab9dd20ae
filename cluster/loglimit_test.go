package cluster

import (
	"testing"
	"time"
)

func TestLogLimiterEmitsOneLinePerTemplatePerWindow(t *testing.T) {
	l := newLogLimiter(10 * time.Second)
	t0 := time.Unix(1000, 0)
	emitted := 0
	for i := range 200 {
		// Garbage from many ports: the address is not part of the template.
		line := "Decrypt packet failed: no installed keys could decrypt the message from=10.0.0." + string(rune('0'+i%10)) + ":7946"
		if ok, _ := l.allow(line, t0.Add(time.Duration(i)*time.Millisecond)); ok {
			emitted++
		}
	}
	if emitted != 1 {
		t.Errorf("200 garbage datagrams in 0.2 s logged %d lines; want 1", emitted)
	}
	ok, suppressed := l.allow("Decrypt packet failed: no installed keys could decrypt the message from=10.0.0.9:1", t0.Add(11*time.Second))
	if !ok || suppressed != 199 {
		t.Errorf("after the window: ok=%v suppressed=%d; want true, 199", ok, suppressed)
	}
	if ok, _ := l.allow("Failed to decode ping request: EOF from=10.0.0.1:2", t0.Add(11*time.Second)); !ok {
		t.Error("a different template was suppressed")
	}
}

func TestLogLimiterBoundsItsTable(t *testing.T) {
	l := newLogLimiter(time.Minute)
	now := time.Unix(0, 0)
	for i := range 10 * maxLogTemplates {
		l.allow(string(rune(i))+" distinct", now)
	}
	if len(l.seen) > maxLogTemplates {
		t.Errorf("limiter holds %d templates; want at most %d", len(l.seen), maxLogTemplates)
	}
}
