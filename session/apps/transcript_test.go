package apps

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpswarm/mcpswarm/session"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the transcript goldens in testdata")

// A transcript is a file of commands, each on a line starting with ">>> ",
// followed by the output it must produce. Commands:
//
//	start <app>                 start the app as session "s"
//	call <widget.action> [json] call a derived tool
//	key <key>                   send a key
//	screenshot <w>x<h>          render the view
//	model | tools | resource <name>
//
// Run with -rewrite to regenerate the outputs, then review the diff.
func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runTranscript(t, file) })
	}
}

type step struct {
	cmd, want string
}

func parseTranscript(data string) []step {
	var steps []step
	for _, line := range strings.Split(data, "\n") {
		if cmd, ok := strings.CutPrefix(line, ">>> "); ok {
			steps = append(steps, step{cmd: cmd})
			continue
		}
		if len(steps) > 0 {
			steps[len(steps)-1].want += line + "\n"
		}
	}
	for i := range steps {
		steps[i].want = strings.TrimRight(steps[i].want, "\n")
	}
	return steps
}

func runTranscript(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r := session.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	m, err := session.NewManager(session.ManagerConfig{Registry: r, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	steps := parseTranscript(string(data))
	var out strings.Builder
	for i, s := range steps {
		got := runStep(m, s.cmd)
		if !*rewrite && got != s.want {
			t.Errorf("%s step %d %q:\ngot:\n%s\nwant:\n%s", file, i+1, s.cmd, got, s.want)
		}
		fmt.Fprintf(&out, ">>> %s\n%s\n\n", s.cmd, got)
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func runStep(m *session.Manager, cmd string) string {
	ctx := context.Background()
	verb, rest, _ := strings.Cut(cmd, " ")
	switch verb {
	case "start":
		info, err := m.Start(ctx, "s", rest, "tester")
		if err != nil {
			return "fail: " + err.Error()
		}
		return "started " + info.ID + " (" + info.App + ")"
	case "call":
		tool, raw, _ := strings.Cut(rest, " ")
		var args map[string]any
		if raw != "" {
			if err := json.Unmarshal([]byte(raw), &args); err != nil {
				return "bad arguments: " + err.Error()
			}
		}
		res, err := m.Call(ctx, "s", "s."+tool, args)
		switch {
		case err != nil:
			return "fail: " + err.Error()
		case res.IsError:
			return "error: " + res.Text
		}
		return "ok: " + res.Text
	case "key":
		res, err := m.SendKey(ctx, "s", session.Key{Key: rest})
		if err != nil {
			return "fail: " + err.Error()
		}
		return res.Text
	case "screenshot":
		ws, hs, _ := strings.Cut(rest, "x")
		w, _ := strconv.Atoi(ws)
		h, _ := strconv.Atoi(hs)
		shot, err := m.Screenshot("s", w, h)
		if err != nil {
			return "fail: " + err.Error()
		}
		lines := strings.Split(shot, "\n")
		for i, l := range lines {
			lines[i] = "|" + l + "|"
		}
		return strings.Join(lines, "\n")
	case "model":
		b, err := m.Model("s")
		if err != nil {
			return "fail: " + err.Error()
		}
		return string(b)
	case "resource":
		b, err := m.ReadResource("s", rest)
		if err != nil {
			return "fail: " + err.Error()
		}
		return string(b)
	case "tools":
		tools, err := m.Tools("s")
		if err != nil {
			return "fail: " + err.Error()
		}
		var b strings.Builder
		for _, tl := range tools {
			ann := "read"
			if tl.Sensitive {
				ann = "write"
			}
			if tl.Task {
				ann += ", task"
			}
			fmt.Fprintf(&b, "%s (%s) %s\n", tl.Name, ann, tl.Description)
		}
		return strings.TrimRight(b.String(), "\n")
	}
	return "unknown command " + verb
}
