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
	"strconv"
	"strings"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/hostinfo"
)

// runProfile takes CPU and allocation profiles of mcpswarm nodes (the
// bench/profnode build of `serve --dev`) while 16 clients click their
// `counter` sessions (-profile-clients, 16 by default), and writes `go tool pprof -top` text into o.profile.
// The click and static (swarm_list) series profile one node; replica (local
// clicks on A, whose standby is B), forward and spread profile both nodes of
// a two-node cluster (B joined to A), each into files named after the
// series and the node, since their cost is split between them.
func runProfile(ctx context.Context, o options) error {
	if o.profSeries != "click" && o.profSeries != "forward" && o.profSeries != "spread" && o.profSeries != "static" && o.profSeries != "replica" {
		return fmt.Errorf("-profile-series: %q is not click, replica, forward, spread or static", o.profSeries)
	}
	tmp, err := os.MkdirTemp("", "bench-profile-")
	if err != nil {
		return fmt.Errorf("creating a scratch directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "profnode")
	if err := goBuild(ctx, o.benchDir, "./profnode", bin); err != nil {
		return err
	}
	type node struct {
		p             *proc
		pprof, gossip string
		name          string
	}
	start := func(name, join string) (node, error) {
		var addrs [4]string
		for i := range addrs {
			if addrs[i], err = freeAddr(); err != nil {
				return node{}, err
			}
		}
		args := []string{"-name", name, "-http", addrs[0], "-grpc", addrs[1], "-gossip", addrs[2],
			"-pprof", addrs[3], "-data-dir", filepath.Join(tmp, "data-"+name)}
		if o.profWaits {
			args = append(args, "-contention")
		}
		if join != "" {
			args = append(args, "-join", join)
		}
		args = append(args, profNodeArgs(o.nodeArgs)...)
		p, err := startProc(ctx, "profnode "+name, bin, "http://"+addrs[0], args...)
		return node{p: p, pprof: addrs[3], gossip: addrs[2], name: name}, err
	}
	a, err := start("profA", "")
	if err != nil {
		return err
	}
	defer a.p.stop()
	nodes := []node{a}
	if o.profSeries != "click" && o.profSeries != "static" {
		b, err := start("profB", a.gossip)
		if err != nil {
			return err
		}
		defer b.p.stop()
		nodes = append(nodes, b)
	}
	const secs = 10
	clients := o.profClients
	var connect func(context.Context, int) ([]worker, error)
	switch o.profSeries {
	case "click":
		connect = clicks(a.p, a.p, "p")
	case "static":
		connect = plainCalls(a.p, "swarm_list")
	case "replica":
		connect = clicks(a.p, a.p, "r")
	case "forward":
		connect = clicks(a.p, nodes[1].p, "f")
	case "spread":
		connect = spreadClicks(a.p, nodes[1].p)
	}
	ws, err := connect(ctx, clients)
	if err != nil {
		return err
	}
	type got struct {
		name string
		err  error
	}
	kinds := []string{"profile", "allocs"}
	if o.profWaits {
		kinds = append(kinds, "mutex", "block")
	}
	done := make(chan got, len(kinds)*len(nodes))
	for _, n := range nodes {
		for _, kind := range kinds {
			go func() {
				out := filepath.Join(tmp, n.name+"-"+kind+".pb.gz")
				done <- got{n.name + " " + kind, fetch(ctx, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", n.pprof, kind, secs), out)}
			}()
		}
	}
	slog.Info("profiling", "series", o.profSeries, "clients", clients, "seconds", secs, "nodes", len(nodes))
	procs := make([]*proc, len(nodes))
	for i, n := range nodes {
		procs[i] = n.p
	}
	before := make([]journalCounts, len(nodes))
	for i, n := range nodes {
		before[i] = scrapeJournal(ctx, n.p)
	}
	cl, err := measure(ctx, ws, procs, 500*time.Millisecond, (secs+1)*time.Second)
	if err != nil {
		return err
	}
	commits := make([]string, len(nodes))
	for i, n := range nodes {
		commits[i] = scrapeJournal(ctx, n.p).since(before[i])
	}
	for range len(kinds) * len(nodes) {
		if g := <-done; g.err != nil {
			return fmt.Errorf("taking the %s profile: %w", g.name, g.err)
		}
	}
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", o.profile, err)
	}
	what := map[string]string{
		"click":   "each clicking its own counter session on the node",
		"static":  "each calling the static tool swarm_list on the node",
		"replica": "each on node A clicking its own counter session there, whose standby is node B (every write held by B before it is answered)",
		"forward": "each on node B clicking its own counter session owned by node A (every call forwarded B -> A)",
		"spread":  "alternately on A and B, each clicking a counter session owned by the other node (every call forwarded)",
	}[o.profSeries]
	for i, n := range nodes {
		prefix := "profile-"
		if o.profSeries != "click" {
			prefix = fmt.Sprintf("profile-%s-%s-", o.profSeries, strings.TrimPrefix(n.name, "prof"))
		}
		header := fmt.Sprintf("# mcpswarm node %s (bench/profnode = serve --dev) under %d clients %s, %d s.\n"+
			"# Load during the profile: %.0f calls/s, p50 %.0f µs, p99 %.0f µs, %.0f µs server CPU per call (all profiled nodes), %d failed calls.\n"+
			"# Snapshot journal of this node during the window: %s.\n"+
			"# Made by: cd bench && go run ./compare -profile ../docs/bench -profile-series %s%s  (%s, source %s, %d CPUs, load %s)\n",
			n.name, clients, what, secs, cl.Throughput, cl.P50us, cl.P99us, cl.CPUus, cl.Errors, commits[i], o.profSeries, nodeArgsNote(o.nodeArgs),
			time.Now().UTC().Format("2006-01-02 15:04 UTC"), describeSource(ctx, o.benchDir), hostinfo.Now().CPUs, hostinfo.LoadAvg())
		views := []struct {
			file, prof string
			args       []string
		}{
			{"cpu.txt", "profile", []string{"-top", "-nodecount=40"}},
			{"cpu-cum.txt", "profile", []string{"-top", "-cum", "-nodecount=60"}},
			{"alloc-space.txt", "allocs", []string{"-top", "-sample_index=alloc_space", "-nodecount=40"}},
			{"alloc-objects.txt", "allocs", []string{"-top", "-sample_index=alloc_objects", "-nodecount=40"}},
			// Who calls what inside the call path's own steps.
			{"cpu-peek.txt", "profile", []string{"-peek", peekFocus}},
			{"alloc-peek.txt", "allocs", []string{"-peek", peekFocus, "-sample_index=alloc_space"}},
		}
		if o.profWaits {
			views = append(views, []struct {
				file, prof string
				args       []string
			}{
				{"mutex.txt", "mutex", []string{"-top", "-cum", "-nodecount=40"}},
				{"block.txt", "block", []string{"-top", "-cum", "-nodecount=40"}},
			}...)
		}
		for _, v := range views {
			args := append([]string{"tool", "pprof"}, v.args...)
			args = append(args, bin, filepath.Join(tmp, n.name+"-"+v.prof+".pb.gz"))
			cmd := exec.CommandContext(ctx, "go", args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil && v.args[0] == "-peek" {
				// A node none of the peeked steps ran on (a standby serving
				// no MCP call) has nothing to show; say so in the file.
				out, err = []byte("# pprof: "+strings.TrimSpace(stderr.String())+"\n"), nil
			}
			if err != nil {
				return fmt.Errorf("go tool pprof %s: %w: %s", strings.Join(v.args, " "), err, strings.TrimSpace(stderr.String()))
			}
			if err := os.WriteFile(filepath.Join(o.profile, prefix+v.file), append([]byte(header), out...), 0o644); err != nil {
				return fmt.Errorf("writing %s: %w", prefix+v.file, err)
			}
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
const peekFocus = `swarm\.\(\*Swarm\)\.forward$|swarm\.forwardServer\.callTool$|session\.\(\*actor\)\.(apply|render|commit)$|session\.\(\*Manager\)\.(save|emit)$|mcp\.\(\*connTable\)\.match$|swarm\.\(\*Conns\)\.records$|server\.\(\*StreamableHTTPServer\)\.handlePost$|mcp\.\(\*Server\)\.serveStreamable$`

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

// journalCounts are a node's snapshot-journal counters
// (mcpswarm_journal_records_total, mcpswarm_journal_syncs_total); ok is
// false when they could not be read (a node without them).
type journalCounts struct {
	records, syncs float64
	ok             bool
}

// scrapeJournal reads p's journal counters from its /metrics.
func scrapeJournal(ctx context.Context, p *proc) journalCounts {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.baseURL+"/metrics", nil)
	if err != nil {
		return journalCounts{}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return journalCounts{}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return journalCounts{}
	}
	var c journalCounts
	found := 0
	for _, line := range strings.Split(string(body), "\n") {
		for name, dst := range map[string]*float64{"mcpswarm_journal_records_total ": &c.records, "mcpswarm_journal_syncs_total ": &c.syncs} {
			if v, ok := strings.CutPrefix(line, name); ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					*dst = f
					found++
				}
			}
		}
	}
	c.ok = found == 2
	return c
}

// since describes the group commits between b and c.
func (c journalCounts) since(b journalCounts) string {
	if !c.ok || !b.ok {
		return "counters not exported"
	}
	records, syncs := c.records-b.records, c.syncs-b.syncs
	if syncs <= 0 {
		return fmt.Sprintf("%.0f records, no sync", records)
	}
	return fmt.Sprintf("%.0f records in %.0f syncs, %.1f records per sync", records, syncs, records/syncs)
}

// profNodeArgs passes the serve flags profnode also knows (the durability
// mode and the standbys per session) from -node-args to the profiled
// nodes; profnode takes Go's single-dash form of the same names.
func profNodeArgs(nodeArgs []string) []string {
	var out []string
	for i := 0; i < len(nodeArgs); i++ {
		a := strings.TrimLeft(nodeArgs[i], "-")
		for _, name := range []string{"durability", "session-replicas"} {
			switch {
			case strings.HasPrefix(a, name+"="):
				out = append(out, "-"+a)
			case a == name && i+1 < len(nodeArgs):
				out = append(out, "-"+name, nodeArgs[i+1])
				i++
			}
		}
	}
	return out
}

func nodeArgsNote(nodeArgs []string) string {
	if len(nodeArgs) == 0 {
		return ""
	}
	return fmt.Sprintf(" -node-args '%s'", strings.Join(nodeArgs, " "))
}
