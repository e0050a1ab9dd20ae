package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm"
	"github.com/mcpswarm/mcpswarm/internal/poll"
)

// binary is bin/mcpswarm built once for the tests that run it as a process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpswarm-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "mcpswarm")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building mcpswarm: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// freePorts returns n distinct loopback addresses nobody listens on right
// now. Every listener stays open until all are chosen: closed one at a
// time, a port could come back for the next address.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// serveArgs are the flags of a dev node on free loopback ports.
func serveArgs(t *testing.T) []string {
	p := freePorts(t, 3)
	return []string{"serve", "--dev", "--name", "t1",
		"--http", p[0], "--grpc", p[1], "--gossip", p[2],
		"--data-dir", t.TempDir(), "--log-format", "json"}
}

// runBinary runs mcpswarm to completion and returns its exit code and stderr.
func runBinary(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), stderr.String()
	default:
		t.Fatalf("running mcpswarm: %v", err)
		return -1, ""
	}
}

func TestServeRefusesBadConfigurationWithOneLine(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	cases := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"bad address", []string{"--http", "localhost:http-port"}, nil, `--http: invalid address "localhost:http-port"`},
		{"address without port", []string{"--grpc", "127.0.0.1"}, nil, `--grpc: invalid address "127.0.0.1": want host:port`},
		{"port in use", []string{"--http", busy.Addr().String()}, nil, "--http: listen " + busy.Addr().String() + ": address already in use"},
		{"missing policy file", []string{"--policy", "/nonexistent/policy.yaml"}, nil, "--policy: "},
		{"dev on a public address", []string{"--http", "0.0.0.0:0"}, nil, "--dev: refuses non-loopback address 0.0.0.0:0"},
		{"dev gossiping on a public address", []string{"--gossip", "0.0.0.0:0"}, nil, "--dev: refuses non-loopback address 0.0.0.0:0"},
		{"bad env value", nil, []string{"MCPSWARM_SHUTDOWN_TIMEOUT=soon"}, "--shutdown-timeout: from MCPSWARM_SHUTDOWN_TIMEOUT"},
		{"unknown flag", []string{"--colour", "red"}, nil, "flag provided but not defined: -colour"},
		{"bad log level", []string{"--log-level", "loud"}, nil, `--log-level: "loud" is not one of`},
		{"data dir not writable", []string{"--data-dir", "/dev/null/data"}, nil, "--data-dir: not writable"},
		{"probe interval too short", []string{"--probe-interval", "10ms"}, nil, "--probe-interval: must be 0 (the default timers) or from 100ms to 10s, got 10ms"},
		{"body limit too small", []string{"--max-body", "10"}, nil, "--max-body: must be between 1 KiB and 64 MiB"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append(serveArgs(t), tc.args...)
			code, stderr := runBinary(t, tc.env, args...)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero; stderr:\n%s", stderr)
			}
			line := lastLine(stderr)
			if !strings.Contains(line, tc.want) {
				t.Fatalf("last stderr line %q does not contain %q; stderr:\n%s", line, tc.want, stderr)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestSIGTERMExitsCleanly(t *testing.T) {
	args := serveArgs(t)
	httpAddr := args[5]
	dataDir := args[11]
	cmd := exec.Command(binary, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	logs := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs <- sc.Text()
		}
		close(logs)
	}()
	waitHTTP(t, "http://"+httpAddr+"/healthz")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var all []string
	for l := range logs {
		all = append(all, l)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\nlogs:\n%s", err, strings.Join(all, "\n"))
	}
	if !strings.Contains(strings.Join(all, "\n"), `"msg":"node stopped"`) {
		t.Fatalf("no clean stop logged:\n%s", strings.Join(all, "\n"))
	}
	assertBoltClosed(t, dataDir)
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	poll.Until(t, 20*time.Second, url+" answers 200", func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("answered %d", resp.StatusCode)
		}
		return nil
	})
}

func TestKeygenWritesAUsableKey(t *testing.T) {
	out, err := exec.Command(binary, "keygen").Output()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(keyFile, out, 0o600); err != nil {
		t.Fatal(err)
	}
	// A node given the key file must accept it: it starts and is healthy.
	args := serveArgs(t)
	args = append(args[:1], args[2:]...) // without --dev
	args = append(args, "--cluster-key-file", keyFile, "--stdio")
	cmd := exec.Command(binary, args...)
	cmd.Stdin = strings.NewReader("")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("serve --stdio with a generated key: %v\n%s", err, out)
	}
}

func defaultConfigForTest() mcpswarm.Config { return mcpswarm.DefaultConfig() }
