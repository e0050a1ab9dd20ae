// Command scale is `make bench-scale`: it runs internal/scale's in-process
// swarm for N = 3, 8, 16, 32 and 64 nodes, each N in a fresh child
// process (so one run's heap and goroutines never weigh on the next), and
// writes docs/bench/scale.md, scale.json and the scale-*.svg charts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/scale"
)

func main() {
	sizes := flag.String("n", "3,8,16,32,64", "swarm sizes, comma-separated")
	docs := flag.String("docs", "", "the docs directory to write bench/scale.* into; empty: print only")
	quick := flag.Bool("quick", false, "short phases (a smoke run; figures are rough)")
	child := flag.Int("child", 0, "run one swarm of this size and print its result as JSON (internal)")
	profile := flag.String("cpuprofile", "", "with -child: write the run's CPU profile here")
	heapProfile := flag.String("heapprofile", "", "with -child: write a heap profile at rest here")
	flag.Parse()
	if *heapProfile != "" {
		// The default rate samples one allocation per 512 KiB: too coarse
		// to see what a node holds per peer (a few KiB). Set before the
		// swarm allocates anything.
		runtime.MemProfileRate = 4096
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *child > 0 {
		if err := runChild(ctx, *child, *quick, *profile, *heapProfile); err != nil {
			fmt.Fprintln(os.Stderr, "scale:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, *sizes, *docs, *quick); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// options are the phases' lengths for one run.
func options(n int, quick bool) scale.Options {
	o := scale.Options{N: n, Load: scale.DefaultLoad(), Writes: 100, LoadFor: 20 * time.Second,
		ReachEvery: 50 * time.Millisecond, ApproveFor: 5 * time.Second, RestFor: 10 * time.Second,
		Settle: 7 * time.Second, Extra: min(max(6000/n, 100), 1000)}
	// Extra: about 12 MB of records in the swarm at any N, enough to
	// read above the heap's noise without thousands of writes at N = 64.
	// Settle: past the delta logs' age bound (LogMaxTicks anti-entropy
	// ticks, 6 s on the loopback timers), so the heap at rest no longer
	// holds the logs' copies of the records just written, which every
	// node drops at rest.
	if quick {
		o.Writes, o.LoadFor, o.ApproveFor, o.RestFor, o.Settle, o.Extra = 20, 3*time.Second, time.Second, 2*time.Second, 500*time.Millisecond, 50
	}
	return o
}

func runChild(ctx context.Context, n int, quick bool, profile, heapProfile string) error {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	o := options(n, quick)
	o.Logf = func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
	if heapProfile != "" {
		o.AtRest = func() {
			if f, err := os.Create(heapProfile); err == nil {
				_ = pprof.Lookup("heap").WriteTo(f, 0)
				_ = f.Close()
			}
		}
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := scale.Run(ctx, o)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func run(ctx context.Context, sizes, docs string, quick bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var rep report
	rep.Started = time.Now().UTC()
	rep.Quick = quick
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("swarm size %q: %w", s, err)
		}
		args := []string{"-child", strconv.Itoa(n)}
		// Extra: about 12 MB of records in the swarm at any N, enough to
		// read above the heap's noise without thousands of writes at N = 64.
		if quick {
			args = append(args, "-quick")
		}
		cmd := exec.CommandContext(ctx, self, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("running N=%d: %w", n, err)
		}
		var res scale.Result
		if err := json.Unmarshal(out, &res); err != nil {
			return fmt.Errorf("reading N=%d's result: %w", n, err)
		}
		rep.Results = append(rep.Results, res)
	}
	fmt.Print(rep.table())
	if docs == "" {
		return nil
	}
	dir := filepath.Join(docs, "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	charts, err := rep.charts(dir)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "scale.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	md := filepath.Join(dir, "scale.md")
	out := rep.markdown(charts)
	// The comparison with real processes (bench/realscale) is written by
	// hand at the end of the file; this run does not measure it, so it
	// keeps it.
	if old, err := os.ReadFile(md); err == nil {
		if i := strings.Index(string(old), "\n"+realHeading); i >= 0 {
			out = strings.TrimRight(out, "\n") + "\n" + string(old[i:])
		}
	}
	return os.WriteFile(md, []byte(out), 0o644)
}

// realHeading opens scale.md's section on real processes.
const realHeading = "## Real processes\n"
