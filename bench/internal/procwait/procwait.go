// Package procwait waits for a server process the benchmark or the soak
// started to answer, and shows the end of its log when it does not.
package procwait

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// AwaitOK polls url every interval until it answers 200, the process
// exits (exited closes; waitErr then says why) or d passes.
func AwaitOK(ctx context.Context, url string, d, interval time.Duration, exited <-chan struct{}, waitErr func() error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("building the request for %s: %w", url, err)
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("the process exited: %v", waitErr())
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", url, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Sleep waits d, or less if ctx ends first (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
