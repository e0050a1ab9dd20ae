package swarm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpswarm/mcpswarm/session"
)

// Every version of the replicated session and tools records decodes with
// today's code (v0: before handoff generations and before session.Tool
// had JSON tags), and today's encoding is the newest golden file.
func TestRecordFormatsStillRead(t *testing.T) {
	created := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	base := sessionRecord{App: "counter", Principal: "alice", Created: created, Status: "running", Node: "node1", Rev: map[string]uint64{"widgets": 3}}
	v1 := base
	v1.Handoff, v1.MovedTo = 2, "node2"
	for file, want := range map[string]sessionRecord{"session.v0.json": base, "session.v1.json": v1} {
		b := readGolden(t, file)
		got, err := decodeSession(b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s decodes to %+v (%v), want %+v", file, got, err, want)
		}
	}
	tools := toolsRecord{Principal: "alice", Tools: []session.Tool{{Name: "g1.inc.click", Session: "g1", Widget: "inc", Action: "click", Kind: "button", Description: "Click inc", InputSchema: json.RawMessage(`{"type":"object"}`), Sensitive: true}}}
	for _, file := range []string{"tools.v0.json", "tools.v1.json"} {
		got, err := decodeTools(readGolden(t, file))
		if err != nil || !reflect.DeepEqual(got, tools) {
			t.Errorf("%s decodes to %+v (%v), want %+v", file, got, err, tools)
		}
	}
	for file, v := range map[string]any{"session.v1.json": v1, "tools.v1.json": tools} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.TrimSpace(string(readGolden(t, file))); string(b) != want {
			t.Errorf("today's encoding\n%s\ndiffers from %s\n%s", b, file, want)
		}
	}
}

func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "format", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
