package ui

import (
	"bytes"
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mcpswarm/mcpswarm/cluster"
)

// startJournal runs one in-memory cluster node on loopback with the journal
// declared on it, and stops both when the test ends. The journal is
// returned started unless start is false.
func startJournal(tb testing.TB, start bool, opts ...JournalOption) *Journal {
	tb.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	cfg := cluster.LocalConfig()
	cfg.Name = "n1"
	cfg.GRPCAddr = lis.Addr().String()
	cfg.Key = bytes.Repeat([]byte{7}, 32)
	c, err := cluster.New(cfg)
	if err != nil {
		_ = lis.Close()
		tb.Fatal(err)
	}
	j, err := NewJournal(c, cfg.Name, nil, opts...)
	if err != nil {
		_ = lis.Close()
		tb.Fatal(err)
	}
	srv := grpc.NewServer(c.ServerOptions()...)
	c.Register(srv)
	go func() { _ = srv.Serve(lis) }()
	if err := c.Start(context.Background()); err != nil {
		srv.Stop()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		j.Stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
		srv.Stop()
	})
	if start {
		j.Start()
	}
	return j
}

// cpuTime is the CPU time (user and system, all threads) this process has
// used: unlike wall time it counts the writer's work wherever it runs and
// does not grow while other processes hold the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
