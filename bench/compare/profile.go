package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
)

// runProfile takes CPU and allocation profiles of one mcpswarm node (the
// bench/profnode build of `serve --dev`) while 16 clients click their own
// `counter` sessions, and writes `go tool pprof -top` text into o.profile.
func runProfile(ctx context.Context, o options) error {
	tmp, err := os.MkdirTemp("", "bench-profile-")
	if err != nil {
		return fmt.Errorf("creating a scratch directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "profnode")
	if err := goBuild(ctx, o.benchDir, "./profnode", bin); err != nil {
		return err
	}
	var addrs [4]string
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return err
		}
	}
	p, err := startProc(ctx, "profnode", bin, "http://"+addrs[0], "-http", addrs[0], "-grpc", addrs[1], "-gossip", addrs[2],
		"-pprof", addrs[3], "-data-dir", filepath.Join(tmp, "data"))
	if err != nil {
		return err
	}
	defer p.stop()
	const clients, secs = 16, 10
	ws, err := clicks(p, p, "p")(ctx, clients)
	if err != nil {
		return err
	}
	type got struct {
		name string
		err  error
	}
	done := make(chan got, 2)
	for _, kind := range []string{"profile", "allocs"} {
		go func() {
			out := filepath.Join(tmp, kind+".pb.gz")
			done <- got{kind, fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addrs[3], kind, secs), out)}
		}()
	}
	slog.Info("profiling", "clients", clients, "seconds", secs)
	cl, err := measure(ctx, ws, []*proc{p}, 500*time.Millisecond, (secs+1)*time.Second)
	if err != nil {
		return err
	}
	for range 2 {
		if g := <-done; g.err != nil {
			return fmt.Errorf("taking the %s profile: %w", g.name, g.err)
		}
	}
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.profile, err)
	}
	header := fmt.Sprintf("# mcpswarm node (bench/profnode = serve --dev) under %d clients each clicking its own counter session, %d s.\n"+
		"# Load during the profile: %.0f calls/s, p50 %.0f µs, p99 %.0f µs, %.0f µs server CPU per call, %d failed calls.\n"+
		"# Made by: cd bench && go run ./compare -profile ../docs/bench  (%s, source %s, %d CPUs, load %s)\n",
		clients, secs, cl.Throughput, cl.P50us, cl.P99us, cl.CPUus, cl.Errors, time.Now().UTC().Format("2006-01-02 15:04 UTC"), describeSource(ctx, o.benchDir), hostinfo.Now().CPUs, hostinfo.LoadAvg())
	views := []struct {
		file, prof string
		args       []string
	}{
		{"profile-cpu.txt", "profile", []string{"-top", "-nodecount=40"}},
		{"profile-cpu-cum.txt", "profile", []string{"-top", "-cum", "-nodecount=60"}},
		{"profile-alloc-space.txt", "allocs", []string{"-top", "-sample_index=alloc_space", "-nodecount=40"}},
		{"profile-alloc-objects.txt", "allocs", []string{"-top", "-sample_index=alloc_objects", "-nodecount=40"}},
		// Who calls what inside the call path's own steps.
		{"profile-cpu-peek.txt", "profile", []string{"-peek", peekFocus}},
		{"profile-alloc-peek.txt", "allocs", []string{"-peek", peekFocus, "-sample_index=alloc_space"}},
	}
	for _, v := range views {
		args := append([]string{"tool", "pprof"}, v.args...)
		args = append(args, bin, filepath.Join(tmp, v.prof+".pb.gz"))
		out, err := exec.CommandContext(ctx, "go", args...).Output()
		if err != nil {
			return fmt.Errorf("go tool pprof %s: %w", strings.Join(v.args, " "), err)
		}
		if err := os.WriteFile(filepath.Join(o.profile, v.file), append([]byte(header), out...), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", v.file, err)
		}
	}
	// Keep the raw profiles and the binary for `go tool pprof -peek/-list`;
	// they are not committed.
	raw := filepath.Join(os.TempDir(), "bench-profile-raw")
	if err := os.RemoveAll(raw); err == nil {
		if err := os.Rename(tmp, raw); err != nil { // the deferred RemoveAll then finds nothing
			slog.Warn("keeping the raw profiles", "err", err)
		}
	}
	fmt.Printf("wrote profiles to %s (%.0f calls/s during the profile); raw profiles in %s\n", o.profile, cl.Throughput, raw)
	return nil
}

// peekFocus names the steps of a click whose callers and callees the peek
// views show.
const peekFocus = `session\.\(\*actor\)\.(apply|render|commit)$|session\.\(\*Manager\)\.(save|emit)$|mcp\.\(\*connTable\)\.match$|swarm\.\(\*Conns\)\.records$|server\.\(\*StreamableHTTPServer\)\.handlePost$|mcp\.\(\*Server\)\.serveStreamable$`

// describeSource names the commit the profiled node was built from.
func describeSource(ctx context.Context, dir string) string {
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// fetch saves the body of url (bounded to 64 MiB) to path.
func fetch(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 64<<20)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
