package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat; it
// is 100 on every Linux architecture Go supports.
const clockTicks = 100

// proc is one server process the harness started.
type proc struct {
	name    string
	baseURL string // http://127.0.0.1:PORT
	grpc    string // an mcpswarm node's gRPC address (host:port); empty for the peers
	cmd     *exec.Cmd
	log     *syncBuffer
	exited  chan struct{}
	waitErr error
	startup time.Duration // from exec to the first 200 on /healthz
}

// startProc starts bin with args in its own process group and waits until
// baseURL/healthz answers 200.
func startProc(ctx context.Context, name, bin, baseURL string, args ...string) (*proc, error) {
	p := &proc{name: name, baseURL: baseURL, log: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t0 := time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { p.waitErr = p.cmd.Wait(); close(p.exited) }()
	if err := p.awaitHealthy(ctx, 60*time.Second); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s never became healthy: %w\nlog tail:\n%s", name, err, procwait.Tail(p.log.String(), 20))
	}
	p.startup = time.Since(t0)
	return p, nil
}

// pid is the server's process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) awaitHealthy(ctx context.Context, d time.Duration) error {
	return procwait.AwaitOK(ctx, p.baseURL+"/healthz", d, 2*time.Millisecond, p.exited, func() error { return p.waitErr })
}

// stop sends SIGTERM to the process group, and SIGKILL after 15 s.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
	}
}

// cpuTicks reads the process's user+system CPU time from /proc.
func (p *proc) cpuTicks() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
	if err != nil {
		return 0, fmt.Errorf("reading %s's CPU time: %w", p.name, err)
	}
	return parseStatCPU(b)
}

// rssKB reads the process's resident set size from /proc.
func (p *proc) rssKB() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		return 0, fmt.Errorf("reading %s's RSS: %w", p.name, err)
	}
	return parseStatusRSS(b)
}

// parseStatCPU returns utime+stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) may hold spaces and parentheses, so the
// fields are counted after its last ')'.
func parseStatCPU(b []byte) (int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the name, want at least 13", len(f))
	}
	ut, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat utime: %w", err)
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat stime: %w", err)
	}
	return ut + st, nil
}

// parseStatusRSS returns VmRSS in kB from /proc/PID/status.
func parseStatusRSS(b []byte) (int64, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: odd VmRSS line %q", line)
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, errors.New("/proc status: no VmRSS line")
}

// cpuOf sums the CPU ticks of several processes.
func cpuOf(ps []*proc) (int64, error) {
	var sum int64
	for _, p := range ps {
		t, err := p.cpuTicks()
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// freeAddr asks the kernel for an unused loopback TCP port. The port is
// free when this returns; the server binds it a moment later (the usual
// small race, acceptable on a benchmark machine).
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// syncBuffer collects a child's output for error messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 { // keep the last ~1 MiB only
		b.buf.Next(b.buf.Len() - 512<<10)
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
