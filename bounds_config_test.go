package mcpswarm_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/mcpswarm/mcpswarm"
)

// Issue #13: the widget and demo-app bounds were constants. Lowered in the
// node's config, each refuses input the default would take, naming the
// setting.
func TestWidgetLimitsFromTheConfigTakeEffect(t *testing.T) {
	e := newSwarmEnv(t)
	e.tweak = func(c *mcpswarm.Config) {
		c.Widgets = mcpswarm.WidgetLimits{TextBytes: 64, TodoItems: 2, TodoTitleBytes: 10, Files: 6, Commands: 1, JobSeconds: 2}
	}
	n := e.start("node1")
	c := connect(t, n, connOpts{token: aliceToken})
	for _, app := range []string{"todo", "files", "jobs"} {
		if res := c.call("swarm_start", map[string]any{"app": app, "id": app}); res.IsError {
			t.Fatalf("starting %s: %s", app, textOf(res))
		}
	}
	refused := func(tool string, args map[string]any, setting string) {
		t.Helper()
		res := c.call(tool, args)
		if !res.IsError || !strings.Contains(textOf(res), setting) {
			t.Errorf("%s %v answered %q (error %v); want a refusal naming %s", tool, args, textOf(res), res.IsError, setting)
		}
	}
	ok := func(tool string, args map[string]any) {
		t.Helper()
		if res := c.call(tool, args); res.IsError {
			t.Fatalf("%s %v: %s", tool, args, textOf(res))
		}
	}
	refused("todo.new.type_into", map[string]any{"text": strings.Repeat("x", 65)}, "widget-text-bytes")
	ok("todo.new.type_into", map[string]any{"text": strings.Repeat("x", 64)})
	refused("todo.add.click", nil, "todo-title-bytes")
	for range 2 {
		ok("todo.new.type_into", map[string]any{"text": "item"})
		ok("todo.add.click", nil)
	}
	ok("todo.new.type_into", map[string]any{"text": "third"})
	refused("todo.add.click", nil, "todo-max-items")
	// The demo tree starts with 5 files: one more fits, the next does not.
	ok("files.actions.select", map[string]any{"item": "New file"})
	refused("files.actions.select", map[string]any{"item": "New file"}, "files-max")
	// The jobs demo offers durations up to jobs-max-seconds only.
	if res := c.call("jobs.seconds.get_options", nil); textOf(res) != `{"options":["1 s","2 s"]}` {
		t.Errorf("job durations with jobs-max-seconds 2: %s", textOf(res))
	}
}

// A nonsense bound is refused at start with the flag to fix.
func TestNonsenseBoundsAreRefusedAtStart(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		tweak func(*mcpswarm.Config)
	}{
		{"widget-text-bytes", func(c *mcpswarm.Config) { c.Widgets.TextBytes = 0 }},
		{"todo-max-items", func(c *mcpswarm.Config) { c.Widgets.TodoItems = -1 }},
		{"todo-title-bytes", func(c *mcpswarm.Config) { c.Widgets.TodoTitleBytes = 2 << 20 }},
		{"files-max", func(c *mcpswarm.Config) { c.Widgets.Files = 0 }},
		{"session-commands", func(c *mcpswarm.Config) { c.Widgets.Commands = 0 }},
		{"jobs-max-seconds", func(c *mcpswarm.Config) { c.Widgets.JobSeconds = 3601 }},
		{"grpc-max-message-bytes", func(c *mcpswarm.Config) { c.GRPC.MaxMessageBytes = 1000 }},
		{"grpc-max-streams", func(c *mcpswarm.Config) { c.GRPC.MaxStreams = 0 }},
		{"grpc-open-streams", func(c *mcpswarm.Config) { c.GRPC.OpenStreams = 0 }},
		{"grpc-open-deadline", func(c *mcpswarm.Config) { c.GRPC.OpenDeadline = 0 }},
		{"grpc-handshake-timeout", func(c *mcpswarm.Config) { c.GRPC.HandshakeTimeout = time.Millisecond }},
		{"grpc-idle-timeout", func(c *mcpswarm.Config) { c.GRPC.IdleTimeout = -time.Second }},
		{"task-per-principal", func(c *mcpswarm.Config) { c.TaskLimits.PerPrincipal = -1 }},
		{"task-max-result", func(c *mcpswarm.Config) { c.TaskLimits.MaxResultBytes = 4 << 20 }},
		{"task-max-ttl", func(c *mcpswarm.Config) { c.TaskLimits.MaxTTL = 1000 * time.Hour }},
		{"task-ttl", func(c *mcpswarm.Config) { c.TaskLimits.DefaultTTL = 48 * time.Hour }},
		{"task-poll-interval", func(c *mcpswarm.Config) { c.TaskLimits.PollInterval = time.Hour }},
	} {
		cfg := mcpswarm.DefaultConfig()
		cfg.DataDir = t.TempDir()
		tc.tweak(&cfg)
		err := cfg.Validate()
		var fe *mcpswarm.FieldError
		if !errors.As(err, &fe) || fe.Flag != tc.flag {
			t.Errorf("%s: Validate() = %v; want an error naming --%s", tc.flag, err, tc.flag)
		}
	}
	cfg := mcpswarm.DefaultConfig()
	cfg.DataDir = t.TempDir()
	if err := cfg.Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// grpcNode starts one node with the gRPC limits l and returns a plaintext
// client connection to its gRPC listener.
func grpcNode(t *testing.T, l mcpswarm.GRPCLimits) (*mcpswarm.Node, *grpc.ClientConn) {
	t.Helper()
	e := newSwarmEnv(t)
	// Sockets: the handshake and idle bounds are watched with raw TCP
	// connections that never speak gRPC.
	e.sockets = true
	e.tweak = func(c *mcpswarm.Config) { c.GRPC = l }
	n := e.start("node1")
	cc, err := grpc.NewClient(n.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return n, cc
}

// watch opens a health Watch stream and waits for its first answer, so the
// server has admitted it.
func watch(ctx context.Context, cc *grpc.ClientConn) error {
	s, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

// Issue #13: the gRPC listener's bounds were constants. Lowered in the
// node's config, each holds where the default would not.
func TestGRPCLimitsFromTheConfigTakeEffect(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out gRPC deadlines on real listeners")
	}
	t.Run("max message", func(t *testing.T) {
		l := mcpswarm.DefaultGRPCLimits()
		l.MaxMessageBytes = 1 << 20
		_, cc := grpcNode(t, l)
		h := healthpb.NewHealthClient(cc)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := h.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("s", 512<<10)})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("a 512 KiB check answered %v; want NotFound (an unknown service)", err)
		}
		_, err = h.Check(ctx, &healthpb.HealthCheckRequest{Service: strings.Repeat("s", 2<<20)})
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("a 2 MiB check under a 1 MiB bound answered %v; want ResourceExhausted", err)
		}
	})
	t.Run("open streams", func(t *testing.T) {
		l := mcpswarm.DefaultGRPCLimits()
		l.OpenStreams = 2
		_, cc := grpcNode(t, l)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := range 2 {
			if err := watch(ctx, cc); err != nil {
				t.Fatalf("anonymous stream %d: %v", i+1, err)
			}
		}
		err := watch(ctx, cc)
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "grpc-open-streams") {
			t.Fatalf("a third anonymous stream answered %v; want ResourceExhausted naming grpc-open-streams", err)
		}
	})
	t.Run("open deadline", func(t *testing.T) {
		l := mcpswarm.DefaultGRPCLimits()
		l.OpenDeadline = time.Second
		_, cc := grpcNode(t, l)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		s, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err = s.Recv(); err != nil {
				break
			}
		}
		if ctx.Err() != nil || status.Code(err) == codes.OK {
			t.Fatalf("an anonymous stream under a 1 s deadline lasted the test's 15 s (%v)", err)
		}
	})
	t.Run("max streams", func(t *testing.T) {
		l := mcpswarm.DefaultGRPCLimits()
		l.MaxStreams, l.OpenStreams = 16, 64
		_, cc := grpcNode(t, l)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := range 16 {
			if err := watch(ctx, cc); err != nil {
				t.Fatalf("stream %d: %v", i+1, err)
			}
		}
		// The 17th waits client-side for a free stream.
		short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
		defer cancelShort()
		if err := watch(short, cc); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("a 17th stream on one connection under a bound of 16 answered %v; want it held until its deadline", err)
		}
	})
	t.Run("handshake", func(t *testing.T) {
		l := mcpswarm.DefaultGRPCLimits()
		l.HandshakeTimeout = time.Second
		n, _ := grpcNode(t, l)
		c, err := net.Dial("tcp", n.GRPCAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(8 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("a connection that never sent its preface under a 1 s bound was held %v", err)
		}
	})
	t.Run("idle", func(t *testing.T) {
		l := mcpswarm.DefaultGRPCLimits()
		l.IdleTimeout = time.Second
		_, cc := grpcNode(t, l)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
		// The server's GOAWAY after 1 s without streams sends the client
		// connection back to IDLE.
		for s := cc.GetState(); s != connectivity.Idle; s = cc.GetState() {
			if !cc.WaitForStateChange(ctx, s) {
				t.Fatalf("the connection is still %v after 15 s without streams under a 1 s idle bound", s)
			}
		}
	})
}
