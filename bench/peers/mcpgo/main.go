// Command mcpgo is the bench-compare baseline: a bare mark3labs/mcp-go v1.2.1
// server with its default options, serving one trivial tool, "increment",
// over Streamable HTTP at /mcp (and 200 at /healthz), so its cost per call is
// the floor every other series is measured against.
//
// With -journal DIR it is the durable ceiling instead (bench-compare's
// `mcpgo-durable`): before answering, "increment" puts a record the size of
// a click's snapshot into mcpswarm's own journal in DIR, in its Sync mode
// (group commit, answered after fdatasync), the durability a click on a
// lone node promises. Its throughput is the most any durable click can
// reach on the machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpswarm/mcpswarm/journal"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "HTTP listen address")
	dir := flag.String("journal", "", "journal directory: each call puts a record there, answered after its fdatasync (empty: no journal)")
	recSize := flag.Int("journal-record", 1300, "bytes of each journal record's value (a counter session's snapshot is about 1,300)")
	mode := flag.String("journal-mode", "sync", "how the journal makes a call durable: sync (the journal's Sync mode: group commit of write and fdatasync) or process-sync (write(2) in Process mode, then Journal.Sync: what a lone mcpswarm node does under the default durability)")
	flag.Parse()
	if err := run(*addr, *dir, *recSize, *mode); err != nil {
		fmt.Fprintln(os.Stderr, "mcpgo:", err)
		os.Exit(1)
	}
}

func run(addr, dir string, recSize int, mode string) error {
	var count atomic.Int64
	save := func(int64) error { return nil }
	if dir != "" {
		j, err := openJournal(dir, mode)
		if err != nil {
			return err
		}
		defer j.Close()
		save = func(n int64) error { return put(j, mode, n, recSize) }
	}
	s := server.NewMCPServer("bench-mcp-go", "1.2.1")
	s.AddTool(mcp.NewTool("increment", mcp.WithDescription("Adds one to a counter and returns it.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := count.Add(1)
			if err := save(n); err != nil {
				return nil, err
			}
			return mcp.NewToolResultText("count: " + strconv.FormatInt(n, 10)), nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return serve(addr, mux)
}

// serve runs h on addr until SIGINT or SIGTERM, then shuts down gracefully.
func serve(addr string, h http.Handler) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		slog.Warn("shutdown", "err", err)
	}
	return nil
}

// openJournal opens the journal a durable call writes to.
func openJournal(dir, mode string) (*journal.Journal, error) {
	m := journal.Sync
	switch mode {
	case "sync":
	case "process-sync":
		m = journal.Process
	default:
		return nil, fmt.Errorf("-journal-mode %q is not sync or process-sync", mode)
	}
	return journal.Open(dir, journal.Options{Mode: m})
}

// put makes call n durable: a record of size bytes under one of 64 keys
// (as many sessions as the bench's clients at most, so the journal's
// compaction sees a click load's live set), on disk before it returns.
func put(j *journal.Journal, mode string, n int64, size int) error {
	v := make([]byte, size)
	for i := range v {
		v[i] = 'x'
	}
	copy(v, strconv.FormatInt(n, 10))
	if err := j.Put("s"+strconv.FormatInt(n%64, 10), v); err != nil {
		return err
	}
	if mode == "process-sync" {
		return j.Sync()
	}
	return nil
}
