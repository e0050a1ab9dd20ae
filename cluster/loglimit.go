package cluster

import (
	"regexp"
	"sync"
	"time"
)

// logLimiter decides which of memberlist's log lines to emit: at most one
// line per template per window, where a template is the line without the
// remote address. A stream of garbage datagrams (each logged by memberlist
// at ERROR, issue #13: 200 packets gave 200 lines) then costs one line per
// window, and the next line emitted says how many were suppressed.
type logLimiter struct {
	window time.Duration

	mu   sync.Mutex
	seen map[string]*logSlot
}

type logSlot struct {
	last       time.Time
	suppressed int
}

// maxLogTemplates bounds the limiter's memory; past it the table restarts
// (errors carry text from the sender, so templates are not a fixed set).
const maxLogTemplates = 256

// remoteAddr matches memberlist's LogAddress / LogConn suffix.
var remoteAddr = regexp.MustCompile(`\s*from=\S*`)

func newLogLimiter(window time.Duration) *logLimiter {
	return &logLimiter{window: window, seen: map[string]*logSlot{}}
}

// allow reports whether line may be logged at now, and how many lines of
// its template were suppressed since the last one logged.
func (l *logLimiter) allow(line string, now time.Time) (ok bool, suppressed int) {
	key := remoteAddr.ReplaceAllString(line, "")
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.seen[key]
	if s == nil {
		if len(l.seen) >= maxLogTemplates {
			clear(l.seen)
		}
		l.seen[key] = &logSlot{last: now}
		return true, 0
	}
	if now.Sub(s.last) < l.window {
		s.suppressed++
		return false, 0
	}
	suppressed, s.suppressed, s.last = s.suppressed, 0, now
	return true, suppressed
}
