package main

import (
	"strings"
	"testing"
)

// A stream as `go test -json` writes it: a passing test, a failing one, a
// test skipped for want of a tool and one skipped by design.
const stream = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestOK"}
{"Action":"output","Package":"p","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"p","Test":"TestOK","Output":"    a_test.go:1: chatter\n"}
{"Action":"pass","Package":"p","Test":"TestOK","Elapsed":0.1}
{"Action":"output","Package":"p","Test":"TestBad","Output":"    a_test.go:2: broke\n"}
{"Action":"output","Package":"p","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestBad","Elapsed":0}
{"Action":"output","Package":"p","Test":"TestTool","Output":"    a_test.go:3: NOT RUN: chromium is not installed\n"}
{"Action":"skip","Package":"p","Test":"TestTool","Elapsed":0}
{"Action":"output","Package":"p","Test":"TestShort","Output":"    a_test.go:4: slow\n"}
{"Action":"skip","Package":"p","Test":"TestShort","Elapsed":0}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}
{"Action":"fail","Package":"p","Elapsed":0.01}
`

func TestReportPrintsFailuresAndKeepsNotRun(t *testing.T) {
	var out strings.Builder
	r := newReport(&out)
	for _, l := range strings.Split(strings.TrimSpace(stream), "\n") {
		r.line([]byte(l))
	}
	want := "    a_test.go:2: broke\n--- FAIL: TestBad (0.00s)\nFAIL\tp\t0.01s\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	if !r.failed || r.results != 1 {
		t.Errorf("failed %v, results %d; want true, 1", r.failed, r.results)
	}
	if len(r.notRun) != 1 || r.notRun[0] != "p TestTool: chromium is not installed" {
		t.Errorf("not run: %q", r.notRun)
	}
}

func TestReportPassesAGreenStream(t *testing.T) {
	var out strings.Builder
	r := newReport(&out)
	r.line([]byte(`{"Action":"output","Package":"q","Output":"ok  \tq\t0.01s\n"}`))
	r.line([]byte(`{"Action":"pass","Package":"q","Elapsed":0.01}`))
	if r.failed || r.results != 1 || out.String() != "ok  \tq\t0.01s\n" {
		t.Errorf("failed %v, results %d, printed %q", r.failed, r.results, out.String())
	}
}
