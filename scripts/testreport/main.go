// Command testreport reads `go test -json` on stdin and prints what plain
// `go test` prints: each package's result line and the output of failed
// tests. It also keeps what plain `go test` hides, for `make test` to show
// at its end:
//
//   - the tests that did not run for want of something on this machine (their
//     skip message starts with testenv.Prefix), appended to the -notrun file;
//   - the whole event stream, appended to the -log file, for timings
//     (each "pass" event of a test carries its Elapsed seconds).
//
// It exits 1 when a package or test failed or when the stream held no
// result at all (go test itself could not start), so `go test -json | testreport`
// fails as `go test` would.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mcpswarm/mcpswarm/internal/testenv"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail
	Test       string
	Output     string
}

func main() {
	notrun := flag.String("notrun", "", "append one line per test not run for want of a tool to this file")
	logPath := flag.String("log", "", "append the raw `go test -json` stream to this file")
	flag.Parse()

	var raw io.Writer = io.Discard
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testreport: opening the log: %v\n", err)
			os.Exit(2)
		}
		defer f.Close()
		raw = f
	}
	r := newReport(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		raw.Write(line)
		raw.Write([]byte{'\n'})
		r.line(line)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "testreport: reading go test's output: %v\n", err)
		r.failed = true
	}
	if *notrun != "" && len(r.notRun) > 0 {
		f, err := os.OpenFile(*notrun, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "testreport: opening the not-run list: %v\n", err)
			os.Exit(2)
		}
		for _, s := range r.notRun {
			fmt.Fprintln(f, s)
		}
		f.Close()
	}
	if r.results == 0 {
		fmt.Fprintln(os.Stderr, "testreport: go test reported no package result")
		os.Exit(1)
	}
	if r.failed {
		os.Exit(1)
	}
}

// report turns events into plain output. Each test's output is held until
// its result: printed when it failed, searched for testenv.Prefix when it
// was skipped, dropped when it passed.
type report struct {
	out     io.Writer
	held    map[string][]string // package + " " + test -> output lines
	notRun  []string
	results int // package results seen
	failed  bool
}

func newReport(out io.Writer) *report {
	return &report{out: out, held: map[string][]string{}}
}

func (r *report) line(b []byte) {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
		fmt.Fprintf(r.out, "%s\n", b) // not an event: go test's own words
		return
	}
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Action == "build-fail":
		r.failed = true
	case e.Test == "":
		r.pkg(e)
	default:
		r.test(e)
	}
}

// pkg handles an event of the package itself: its result line, and output
// outside any test (a panic in init, a timeout's goroutine dump).
func (r *report) pkg(e event) {
	switch e.Action {
	case "output":
		if e.Output != "PASS\n" {
			fmt.Fprint(r.out, e.Output)
		}
	case "pass", "skip":
		r.results++
	case "fail":
		r.results++
		r.failed = true
	}
}

func (r *report) test(e event) {
	key := e.Package + " " + e.Test
	switch e.Action {
	case "output":
		if !strings.HasPrefix(e.Output, "=== ") {
			r.held[key] = append(r.held[key], e.Output)
		}
	case "fail":
		r.failed = true
		for _, s := range r.held[key] {
			fmt.Fprint(r.out, s)
		}
		delete(r.held, key)
	case "skip":
		for _, s := range r.held[key] {
			if _, why, ok := strings.Cut(s, testenv.Prefix); ok {
				r.notRun = append(r.notRun, fmt.Sprintf("%s %s: %s", e.Package, e.Test, strings.TrimSpace(why)))
				break
			}
		}
		delete(r.held, key)
	case "pass":
		delete(r.held, key)
	}
}
