package task

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestIDsCarry128RandomBits(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		b, err := base64.RawURLEncoding.DecodeString(id)
		if err != nil || len(b) < 16 {
			t.Fatalf("id %q: %d bytes (%v), want at least 16", id, len(b), err)
		}
		if seen[id] {
			t.Fatalf("id %q minted twice", id)
		}
		seen[id] = true
	}
}

func TestTTLIsClampedToTheMaximumAndDefaulted(t *testing.T) {
	l := Limits{DefaultTTL: time.Minute, MaxTTL: time.Hour}.WithDefaults()
	for _, c := range []struct{ asked, want time.Duration }{
		{0, time.Minute}, {-time.Second, time.Minute}, {time.Second, time.Second}, {time.Hour, time.Hour}, {48 * time.Hour, time.Hour},
	} {
		if got := ClampTTL(c.asked, l); got != c.want {
			t.Errorf("ClampTTL(%v) = %v, want %v", c.asked, got, c.want)
		}
	}
}

func TestATerminalStatusNeverMoves(t *testing.T) {
	for _, s := range []Status{Completed, Failed, Cancelled} {
		if Moves(s) {
			t.Errorf("%s moves", s)
		}
		r := Record{ID: "t", Status: s, Result: json.RawMessage(`{"x":1}`)}
		if got := Settle(r, Outcome{Err: &Error{Code: 1}}, 0, time.Now()); got.Status != s || got.Error != nil {
			t.Errorf("Settle changed a %s task: %+v", s, got)
		}
		if got := Cancel(r, time.Now()); got.Status != s {
			t.Errorf("Cancel changed a %s task to %s", s, got.Status)
		}
		if got := Merge(r, []Request{{Task: "t", Cancel: true}}); got.Status != s {
			t.Errorf("a cancel request made a %s task read %s", s, got.Status)
		}
	}
	for _, s := range []Status{Working, InputRequired} {
		if !Moves(s) {
			t.Errorf("%s does not move", s)
		}
	}
}

func TestACancelRequestReadsAsCancelled(t *testing.T) {
	r := Record{ID: "t", Status: InputRequired, InputRequests: json.RawMessage(`{"a":{"method":"roots/list"}}`)}
	got := Merge(r, []Request{{Task: "t", Cancel: true}})
	if got.Status != Cancelled || got.InputRequests != nil {
		t.Fatalf("merged %+v, want cancelled without input requests", got)
	}
	if got := Merge(r, []Request{{Task: "other", Cancel: true}}); got.Status != InputRequired {
		t.Fatalf("another task's cancel changed this one: %s", got.Status)
	}
}

func TestAnsweredInputKeysLeaveAtOnce(t *testing.T) {
	r := Record{ID: "t", Status: InputRequired,
		InputRequests: json.RawMessage(`{"a":{"method":"roots/list"},"b":{"method":"roots/list"}}`)}
	got := Merge(r, []Request{{Task: "t", Responses: json.RawMessage(`{"a":{"roots":[]}}`)}})
	if got.Status != InputRequired || string(got.InputRequests) != `{"b":{"method":"roots/list"}}` {
		t.Fatalf("after a partial answer: %s %s", got.Status, got.InputRequests)
	}
	got = Merge(r, []Request{
		{Task: "t", Responses: json.RawMessage(`{"a":{}}`)},
		{Task: "t", Responses: json.RawMessage(`{"b":{}}`)},
	})
	if got.Status != Working || got.InputRequests != nil {
		t.Fatalf("after every key was answered: %s %s, want working and none pending", got.Status, got.InputRequests)
	}
}

func TestAnOutcomeSettlesPerForm(t *testing.T) {
	now := time.Unix(100, 0)
	res := json.RawMessage(`{"content":[],"isError":true}`)
	ext := Record{ID: "t", Form: Extension, Status: Working}
	if got := Settle(ext, Outcome{Result: res, IsError: true}, 0, now); got.Status != Completed || string(got.Result) != string(res) {
		t.Errorf("2026 tool error: %s, want completed with the result", got.Status)
	}
	leg := Record{ID: "t", Form: Legacy, Status: Working}
	if got := Settle(leg, Outcome{Result: res, IsError: true}, 0, now); got.Status != Failed || string(got.Result) != string(res) {
		t.Errorf("2025 tool error: %s, want failed with the result", got.Status)
	}
	got := Settle(ext, Outcome{Err: &Error{Code: CodeInternal, Message: "boom"}}, 0, now)
	if got.Status != Failed || got.Error.Message != "boom" || got.Result != nil || !got.Updated.Equal(now) {
		t.Errorf("protocol error: %+v", got)
	}
	got = Settle(ext, Outcome{Result: json.RawMessage(`{"content":"0123456789"}`)}, 10, now)
	if got.Status != Failed || !strings.Contains(got.Error.Message, "exceeds the limit of 10 bytes") || got.Result != nil {
		t.Errorf("oversized result: %+v", got)
	}
}
