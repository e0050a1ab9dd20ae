package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/internal/poll"
)

// syncBuffer is a bytes.Buffer the process writes while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// noDev returns serveArgs without --dev.
func noDev(t *testing.T) []string {
	args := serveArgs(t)
	return append(args[:1:1], args[2:]...)
}

func TestNetworkTransportWithoutPolicyRefusesToBoot(t *testing.T) {
	code, stderr := runBinary(t, nil, noDev(t)...)
	if code == 0 {
		t.Fatalf("booted without a policy; stderr:\n%s", stderr)
	}
	if line := lastLine(stderr); !strings.Contains(line, "--policy: a network transport needs an operator-configured tool and read policy") {
		t.Fatalf("last line %q does not name --policy", line)
	}
}

func TestPolicyWithoutReadRulesRefusesToBoot(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("name: tools-only\ntools:\n  - allow: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := runBinary(t, nil, append(noDev(t), "--policy", policy)...)
	if code == 0 {
		t.Fatalf("booted with a tools-only policy; stderr:\n%s", stderr)
	}
	if line := lastLine(stderr); !strings.Contains(line, "--policy: a network transport needs an operator-configured read policy") {
		t.Fatalf("last line %q does not name the missing read policy", line)
	}
}

func TestPolicyWithAnUnknownKeyNamesTheLine(t *testing.T) {
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policy, []byte("name: typo\ntools: []\nreads: []\nlimtis: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := runBinary(t, nil, append(noDev(t), "--policy", policy)...)
	if code == 0 {
		t.Fatalf("booted with an unknown policy key; stderr:\n%s", stderr)
	}
	if line := lastLine(stderr); !strings.Contains(line, "--policy: ") || !strings.Contains(line, ":4") {
		t.Fatalf("last line %q does not name --policy and line 4", line)
	}
}

func TestValidPolicyBoots(t *testing.T) {
	args := append(noDev(t), "--policy", filepath.Join("..", "..", "authz", "testdata", "production.yaml"))
	httpAddr := args[4]
	cmd := exec.Command(binary, args...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitHTTP(t, "http://"+httpAddr+"/healthz")
	// /healthz can answer before the line naming the policy is flushed to
	// the pipe: wait for the line rather than reading once.
	poll.Until(t, 10*time.Second, "the loaded policy is logged", func() error {
		if !strings.Contains(stderr.String(), `"policy":"production"`) {
			return fmt.Errorf("not in the log:\n%s", stderr.String())
		}
		return nil
	})
}

func TestSettingsPrecedenceFlagEnvFileDefault(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "mcpswarm.yaml")
	if err := os.WriteFile(cfgFile, []byte("name: from-file\nshutdown-timeout: 3s\ndead-grace: 7s\njoin: [127.0.0.1:1, 127.0.0.1:2]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		wantName string
	}{
		{"file beats default", nil, nil, "from-file"},
		{"env beats file", nil, map[string]string{"MCPSWARM_NAME": "from-env"}, "from-env"},
		{"flag beats env", []string{"--name", "from-flag"}, map[string]string{"MCPSWARM_NAME": "from-env"}, "from-flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfgName string
			var logFormat, logLevel, configFile string
			cfg := defaultConfigForTest()
			fs := serveFlags(&cfg, &logFormat, &logLevel, &configFile)
			if err := fs.Parse(append([]string{"--config", cfgFile}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			getenv := func(k string) string { return tc.env[k] }
			if err := (settings{fs: fs, getenv: getenv}).resolve(); err != nil {
				t.Fatal(err)
			}
			cfgName = cfg.Name
			if cfgName != tc.wantName {
				t.Fatalf("name = %q, want %q", cfgName, tc.wantName)
			}
			if cfg.ShutdownTimeout.String() != "3s" || cfg.DeadGrace.String() != "7s" {
				t.Fatalf("file values not applied: shutdown-timeout %v, dead-grace %v", cfg.ShutdownTimeout, cfg.DeadGrace)
			}
			if strings.Join(cfg.Join, ",") != "127.0.0.1:1,127.0.0.1:2" {
				t.Fatalf("join = %v, want the file's list", cfg.Join)
			}
		})
	}
}

func TestConfigFileWithUnknownSettingIsRefused(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "mcpswarm.yaml")
	if err := os.WriteFile(cfgFile, []byte("nmae: typo\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := runBinary(t, nil, append(serveArgs(t), "--config", cfgFile)...)
	if code == 0 || !strings.Contains(lastLine(stderr), `--config: `+cfgFile+`: unknown setting "nmae"`) {
		t.Fatalf("exit %d, last line %q", code, lastLine(stderr))
	}
}
