package session_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/session"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite the current-version golden files under testdata/format")

// goldenValues are the values every golden file of every version encodes.
func goldenValues() map[string]any {
	info := session.Info{ID: "g1", App: "counter", Principal: "alice", Created: time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC), Status: "running"}
	tool := session.Tool{Name: "g1.inc.click", Session: "g1", Widget: "inc", Action: "click", Kind: "button", Description: "Click inc", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`), Sensitive: true}
	rtool := session.Tool{Name: "g1.discover_tools", Session: "g1", Description: "List the tools", InputSchema: json.RawMessage(`{"type":"object"}`), ReadOnly: true}
	return map[string]any{
		"snapshot": session.Snapshot{Info: info, Model: json.RawMessage(`{"count":7}`), Tools: []session.Tool{tool, rtool}},
		"tools":    []session.Tool{tool, rtool},
		"result":   session.Result{Text: "count: 8", Structured: map[string]any{"count": float64(8)}},
		"info":     info,
	}
}

// decodeLike decodes b into a new value of want's type.
func decodeLike(t *testing.T, want any, b []byte) any {
	t.Helper()
	p := reflect.New(reflect.TypeOf(want))
	if err := json.Unmarshal(b, p.Interface()); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	return p.Elem().Interface()
}

// equalJSONish compares decoded values, with raw JSON compacted (a golden
// file is indented).
func normalise(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// Every format version ever written decodes to the same values with
// today's code: renaming a field breaks this test before it breaks an old
// data dir or a mixed cluster.
func TestGoldenFormatsStillRead(t *testing.T) {
	for _, version := range []string{"v0", "v1"} {
		for name, want := range goldenValues() {
			b, err := os.ReadFile(filepath.Join("testdata", "format", name+"."+version+".json"))
			if err != nil {
				t.Fatal(err)
			}
			got := decodeLike(t, want, b)
			if !reflect.DeepEqual(normalise(got), normalise(want)) {
				t.Errorf("%s %s decodes to %+v, want %+v", name, version, got, want)
			}
		}
	}
}

// Today's encoding is exactly the newest golden version: a change to it
// must come with a new version and a new golden file.
func TestCurrentFormatMatchesNewestGolden(t *testing.T) {
	for name, v := range goldenValues() {
		got, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		path := filepath.Join("testdata", "format", name+".v1.json")
		if *updateGolden {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s encodes as\n%s\nbut %s holds\n%s", name, got, path, want)
		}
	}
}

// A document of a newer format is refused with ErrFormat, not half-read.
func TestNewerFormatIsRefused(t *testing.T) {
	var snap session.Snapshot
	if err := json.Unmarshal([]byte(`{"v":2,"info":{"id":"x"}}`), &snap); !errors.Is(err, session.ErrFormat) {
		t.Fatalf("a v2 snapshot decoded with %v, want ErrFormat", err)
	}
	var res session.Result
	if err := json.Unmarshal([]byte(`{"v":9,"text":"?"}`), &res); !errors.Is(err, session.ErrFormat) {
		t.Fatalf("a v9 result decoded with %v, want ErrFormat", err)
	}
}
