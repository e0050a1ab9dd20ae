package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// saveHeapProfiles writes each node's heap profile (after a forced GC, so
// it shows what is retained, not garbage) to dir/NAME-heap-PHASE.pb.gz,
// for `go tool pprof -top -inuse_space -base BEFORE AFTER`. Nodes started
// without a debug address are skipped.
func saveHeapProfiles(ctx context.Context, nodes []*node, dir, phase string) error {
	hc := &http.Client{Timeout: 60 * time.Second}
	for _, n := range nodes {
		if n.Debug == "" {
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-heap-%s.pb.gz", n.Name, phase))
		if err := fetchTo(ctx, hc, "http://"+n.Debug+"/debug/pprof/heap?gc=1", path); err != nil {
			return fmt.Errorf("%s's heap profile: %w", n.Name, err)
		}
	}
	return nil
}

func fetchTo(ctx context.Context, hc *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}
