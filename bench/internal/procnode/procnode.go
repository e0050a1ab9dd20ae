// Package procnode starts and stops `mcpswarm serve` processes on fresh
// loopback ports for the bench programs (soak, idle): one process group
// per node, output kept in memory or written to a file, readiness awaited
// on /readyz.
package procnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/mcpswarm/mcpswarm/bench/internal/procwait"
)

// Node is one `mcpswarm serve` process.
type Node struct {
	Name    string
	BaseURL string // http://127.0.0.1:PORT
	GRPC    string // its gRPC address (cluster and admin API)
	Gossip  string // its gossip address, for others to --join
	// Debug is its --debug-addr (pprof), or "" when not profiled; the
	// caller that passed the flag records it.
	Debug string

	cmd     *exec.Cmd
	log     *buffer
	exited  chan struct{}
	waitErr error
}

// Start starts node name of bin on fresh loopback ports, in its own
// process group, joining join when given, with extra flags, and waits up
// to 60 s for /readyz. With a logDir its whole output goes to
// logDir/NAME.log instead of memory (e.g. for a goroutine dump after kill
// -QUIT).
func Start(ctx context.Context, bin, name, join, logDir string, extra ...string) (*Node, error) {
	return StartGossipOn(ctx, "127.0.0.1", bin, name, join, logDir, extra...)
}

// StartGossipOn is Start with the gossip listener on gossipHost, an
// address of this machine: on a non-loopback one the node runs the LAN
// timers (cluster.DefaultConfig) instead of the loopback ones, while HTTP
// and gRPC stay on 127.0.0.1.
func StartGossipOn(ctx context.Context, gossipHost, bin, name, join, logDir string, extra ...string) (*Node, error) {
	var addrs [3]string
	for i := range addrs {
		host := "127.0.0.1"
		if i == 2 {
			host = gossipHost
		}
		a, err := freeAddrOn(host)
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	args := []string{"serve", "--name", name, "--http", addrs[0], "--grpc", addrs[1], "--gossip", addrs[2]}
	if join != "" {
		args = append(args, "--join", join)
	}
	args = append(args, extra...)
	nd := &Node{Name: name, BaseURL: "http://" + addrs[0], GRPC: addrs[1], Gossip: addrs[2], log: &buffer{}, exited: make(chan struct{})}
	nd.cmd = exec.Command(bin, args...)
	var out io.Writer = nd.log
	if logDir != "" {
		f, err := os.Create(filepath.Join(logDir, name+".log"))
		if err != nil {
			return nil, fmt.Errorf("creating %s's log file: %w", name, err)
		}
		defer f.Close() // the child holds its own descriptor
		out = f
	}
	nd.cmd.Stdout, nd.cmd.Stderr = out, out
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(nd.cmd.SysProcAttr)
	if err := nd.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { nd.waitErr = nd.cmd.Wait(); close(nd.exited) }()
	if err := procwait.AwaitOK(ctx, nd.BaseURL+"/readyz", 60*time.Second, 20*time.Millisecond, nd.exited, func() error { return nd.waitErr }); err != nil {
		nd.Stop()
		return nil, fmt.Errorf("%s never became ready: %w\nlog tail:\n%s", name, err, procwait.Tail(nd.log.String(), 20))
	}
	return nd, nil
}

// PID is the process's id (and its process group's).
func (n *Node) PID() int { return n.cmd.Process.Pid }

// Alive reports whether the process is still running.
func (n *Node) Alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Exit is how the process ended; valid once Alive is false.
func (n *Node) Exit() error {
	<-n.exited
	return n.waitErr
}

// Log is the last ~256 KiB of its output kept in memory (empty with a
// logDir).
func (n *Node) Log() string { return n.log.String() }

// Stop sends SIGTERM to the process group, and SIGKILL after 15 s.
func (n *Node) Stop() {
	if !n.Alive() {
		return
	}
	_ = syscall.Kill(-n.PID(), syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-n.PID(), syscall.SIGKILL)
		<-n.exited
	}
}

// Kill kills the process group with SIGKILL, as a crash would (no leave,
// sockets closed by the kernel), and waits for it to end.
func (n *Node) Kill() {
	if !n.Alive() {
		return
	}
	_ = syscall.Kill(-n.PID(), syscall.SIGKILL)
	<-n.exited
}

// FreeAddr finds an unused loopback TCP port (the usual small race before
// the node binds it; see freeAddrOn).
func FreeAddr() (string, error) { return freeAddrOn("127.0.0.1") }

// Ports handed out are drawn below Linux's ephemeral range (32768–60999
// by default). A port the kernel picks for ":0" comes from that range, as
// does the local port of every outgoing connection: with a dozen nodes
// dialing each other between the moment a free port is found and the
// moment its node binds it, one of those connections took it (a node at
// N = 12 failed to start with "address already in use").
const portLow, portHigh = 20000, 32000

// freeAddrOn is FreeAddr on host: a random port in [portLow, portHigh)
// that is free for TCP and for UDP (gossip binds both).
func freeAddrOn(host string) (string, error) {
	for range 100 {
		addr := net.JoinHostPort(host, strconv.Itoa(portLow+rand.IntN(portHigh-portLow)))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err != nil {
			continue
		}
		pc.Close()
		return addr, nil
	}
	return "", fmt.Errorf("finding a free port on %s: 100 tries below %d all taken", host, portHigh)
}

// buffer keeps the last ~256 KiB of a node's output.
type buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 256<<10 {
		b.buf.Next(b.buf.Len() - 128<<10)
	}
	return b.buf.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
