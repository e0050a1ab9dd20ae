package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpswarm/mcpswarm/authz"
	"github.com/mcpswarm/mcpswarm/session"
)

// The shortcuts of the static call path (issue 17) each stand in for a
// computation the front used to do; these tests hold them to it, with the
// old code kept here as the specification.

// oldModernRequest is modernRequest before it skipped decoding params
// without a _meta key.
func oldModernRequest(r *http.Request, params json.RawMessage) bool {
	if mcp.IsModernProtocol(r.Header.Get(headerProtocolVersion)) {
		return true
	}
	var p struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	if len(params) > 0 && json.Unmarshal(params, &p) == nil && p.Meta != nil {
		return mcp.IsModernProtocol(p.Meta.ProtocolVersion())
	}
	return false
}

// metaParams are params the _meta shortcut must read like the decoder.
var metaParams = []string{
	``, `{}`, `null`, `[]`, `{"name":"swarm_list"}`, `{"name":"swarm_list","arguments":{}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	`{"_META":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	`{"_Meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"x"}`,
	`{"\u005fmeta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	`{"\u005f\u006d\u0065\u0074\u0061":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`,
	`{"_meta":null}`, `{"_meta":{}}`, `{"_meta":"x"}`,
	`{"name":"_meta"}`, `{"arguments":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"_meta":{}}`,
	`{"_met":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	`{"_metaa":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`,
	`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`, // not valid json
}

func TestModernRequestAnswersAsTheDecoder(t *testing.T) {
	for _, hdr := range []string{"", "2025-11-25", "2026-07-28"} {
		for _, p := range metaParams {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			if hdr != "" {
				r.Header.Set(headerProtocolVersion, hdr)
			}
			if got, want := modernRequest(r, json.RawMessage(p)), oldModernRequest(r, json.RawMessage(p)); got != want {
				t.Errorf("header %q, params %s: modernRequest %v, the decoder says %v", hdr, p, got, want)
			}
		}
	}
}

// FuzzMayHaveKey: whenever encoding/json finds a _meta field in b,
// mayHaveKey said it might.
func FuzzMayHaveKey(f *testing.F) {
	for _, p := range metaParams {
		f.Add([]byte(p))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p struct {
			Meta json.RawMessage `json:"_meta"`
		}
		if json.Unmarshal(b, &p) == nil && p.Meta != nil && !mayHaveKey(b, "_meta") {
			t.Fatalf("%q has a _meta field (%s) that mayHaveKey missed", b, p.Meta)
		}
	})
}

// hookHead is how beforeRequest decodes a message the transport did not
// check.
type hookHead struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func TestCheckedEnvelopeAnswersAsTheHookDecode(t *testing.T) {
	bodies := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"swarm_list","arguments":{}}}`,
		` {"jsonrpc":"2.0","id":"a","method":"tools/list"}` + "\n",
		`{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","Params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/call","params":{"name":"\u0078"}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}`,
		`{"jsonrpc":"2.0","id":1,"result":{}}`,
	}
	for _, b := range bodies {
		env, rerr := checkMessage([]byte(b), DefaultMaxBatch, DefaultMaxDepth)
		if rerr != nil {
			t.Fatalf("%s: %v", b, rerr)
		}
		ctx := context.WithValue(context.Background(), identityKey{}, &request{body: []byte(b), env: env})
		got, ok := checkedEnvelope(ctx, []byte(b))
		if !ok {
			t.Fatalf("%s: the checked envelope was not used", b)
		}
		var want hookHead
		if err := json.Unmarshal([]byte(b), &want); err != nil {
			t.Fatal(err)
		}
		if got.Method != want.Method || string(got.Params) != string(want.Params) {
			t.Errorf("%s: checked envelope (%q, %s), the hook decodes (%q, %s)", b, got.Method, got.Params, want.Method, want.Params)
		}
		// Other bytes (a body rewritten after the check) are decoded anew.
		if _, ok := checkedEnvelope(ctx, []byte(strings.Replace(b, "tools", "Tools", 1))); ok && strings.Contains(b, "tools") {
			t.Errorf("%s: the envelope was used for other bytes", b)
		}
	}
	if _, ok := checkedEnvelope(context.Background(), []byte(bodies[0])); ok {
		t.Error("an envelope was found where no transport checked one")
	}
}

// oldCallView is callView's answer for a static name or a name that is
// neither static nor derived, before the views were shared.
func oldCallView(s *Server, name string) map[string]server.ServerTool {
	if st, ok := s.static[name]; ok {
		return map[string]server.ServerTool{name: st}
	}
	return map[string]server.ServerTool{}
}

func TestCallViewSharesOneToolViews(t *testing.T) {
	e := newEnv(t, nil)
	c := authz.Context{Principal: authz.ConnPrincipal("x"), Transport: authz.TransportStreamableHTTP}
	for _, name := range append(e.srv.SensitiveStaticTools(), "swarm_list", "swarm_members", "nope", "") {
		got, want := e.srv.callView(c, name), oldCallView(e.srv, name)
		if len(got) != len(want) {
			t.Fatalf("%q: view of %d tools, want %d", name, len(got), len(want))
		}
		for k, w := range want {
			g, ok := got[k]
			if !ok || !reflect.DeepEqual(g.Tool, w.Tool) || reflect.ValueOf(g.Handler).Pointer() != reflect.ValueOf(w.Handler).Pointer() {
				t.Errorf("%q: view entry %q differs from the static tool", name, k)
			}
		}
		if again := e.srv.callView(c, name); reflect.ValueOf(again).UnsafePointer() != reflect.ValueOf(got).UnsafePointer() {
			t.Errorf("%q: a second call built a new view", name)
		}
	}
}

// TestJSONResultWireBytesAsBefore: a static tool's result carries its
// structured content as the bytes it already encoded; on the wire they
// are what encoding the value again gave.
func TestJSONResultWireBytesAsBefore(t *testing.T) {
	values := []any{
		map[string]any{"sessions": []map[string]any{}},
		map[string]any{"sessions": []map[string]any{{"id": "a<b>&c", "app": "counter", "owner": "conn:x", "available": true,
			"status": "running", "created": "2026-12-01T06:00:00Z"}}},
		map[string]any{"members": []map[string]any{{"name": "n1", "state": "alive", "grpc": "", "version": "dev", "self": true}}},
		map[string]any{"x": 1.5e300, "y": "\u2028\u2029", "z": []any{nil, false, json.Number("12")}, "w": map[string]any{"b": 1, "a": 2}},
		map[string]any{"stopped": "s1"},
	}
	for _, v := range values {
		res := jsonResult(v)
		got, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		old := *res
		old.RawStructuredContent = nil
		want, err := json.Marshal(&old)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%v:\n got %s\nwant %s", v, got, want)
		}
	}
}

// BenchmarkStaticCallSteps measures each shortened step of a static
// tools/call against the old code in the same run.
func BenchmarkStaticCallSteps(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"swarm_list","arguments":{}}}`)
	env, rerr := checkMessage(body, DefaultMaxBatch, DefaultMaxDepth)
	if rerr != nil {
		b.Fatal(rerr)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set(headerProtocolVersion, "2025-11-25")
	b.Run("era/old", func(b *testing.B) {
		for b.Loop() {
			oldModernRequest(r, env.Params)
		}
	})
	b.Run("era/new", func(b *testing.B) {
		for b.Loop() {
			modernRequest(r, env.Params)
		}
	})
	ctx := context.WithValue(context.Background(), identityKey{}, &request{body: body, env: env})
	raw := append([]byte(nil), body...) // mcp-go's own copy of the body
	b.Run("hook-decode/old", func(b *testing.B) {
		for b.Loop() {
			var h hookHead
			_ = json.Unmarshal(raw, &h)
		}
	})
	b.Run("hook-decode/new", func(b *testing.B) {
		for b.Loop() {
			if _, ok := checkedEnvelope(ctx, raw); !ok {
				b.Fatal("not checked")
			}
		}
	})
	e := newEnv(b, nil)
	c := authz.Context{Principal: authz.ConnPrincipal("x"), Transport: authz.TransportStreamableHTTP}
	b.Run("call-view/old", func(b *testing.B) {
		for b.Loop() {
			oldCallView(e.srv, "swarm_list")
		}
	})
	b.Run("call-view/new", func(b *testing.B) {
		for b.Loop() {
			e.srv.callView(c, "swarm_list")
		}
	})
	v := map[string]any{"sessions": []map[string]any{{"id": "s1", "app": "counter", "owner": "conn:x", "available": true,
		"status": "running", "created": "2026-12-01T06:00:00Z"}}}
	b.Run("result-wire/old", func(b *testing.B) {
		for b.Loop() {
			res := jsonResult(v)
			res.RawStructuredContent = nil
			_, _ = json.Marshal(res)
		}
	})
	b.Run("result-wire/new", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(jsonResult(v))
		}
	})
}

func TestReadAllSizedReadsAsReadAll(t *testing.T) {
	bodies := []string{"", "x", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"swarm_list"}}`, strings.Repeat("y", 5000)}
	readers := map[string]func(string) io.Reader{
		"plain":    func(s string) io.Reader { return strings.NewReader(s) },
		"one-byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data-err": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
		"limited": func(s string) io.Reader {
			return http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(s)), 100)
		},
	}
	for _, body := range bodies {
		for _, declared := range []int64{-1, 0, 1, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 7, 64 << 10} {
			for name, mk := range readers {
				got, gerr := readAllSized(mk(body), declared)
				want, werr := io.ReadAll(mk(body))
				if string(got) != string(want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
					t.Errorf("%s reader, %d bytes declared %d: got %d bytes, %v; io.ReadAll %d bytes, %v", name, len(body), declared, len(got), gerr, len(want), werr)
				}
			}
		}
	}
}

// BenchmarkReadBody reads a typical call's body as io.ReadAll did and as
// readAllSized does, in the same run.
func BenchmarkReadBody(b *testing.B) {
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"swarm_list","arguments":{}}}`
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = io.ReadAll(strings.NewReader(body))
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = readAllSized(strings.NewReader(body), int64(len(body)))
		}
	})
}

// TestCheckedManagerTrustsOnlyTheCheckedID: the manager mcp-go gets for a
// request whose id the front checked answers "valid" for that id alone,
// and validates every other id as the plain manager does.
func TestCheckedManagerTrustsOnlyTheCheckedID(t *testing.T) {
	ids, err := NewSessionIDs(testKey, "n1")
	if err != nil {
		t.Fatal(err)
	}
	checked, other, bound := ids.Mint(""), ids.Mint(""), ids.Mint("alice")
	r := checkedResolver{resolver{ids}}
	plain := r.ResolveSessionIdManager(httptest.NewRequest(http.MethodPost, "/mcp", nil))
	if _, ok := plain.(*sidManager); !ok {
		t.Fatalf("a request the front did not check got %T", plain)
	}
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req = req.WithContext(context.WithValue(req.Context(), identityKey{}, &request{checkedSID: checked}))
	m := r.ResolveSessionIdManager(req)
	ids.terminate(other)
	for _, id := range []string{other, bound, "mcps1_forged", ""} {
		gt, gerr := m.Validate(id)
		wt, werr := plain.Validate(id)
		if gt != wt || (gerr == nil) != (werr == nil) {
			t.Errorf("%q: checked manager says (%v, %v), the plain one (%v, %v)", id, gt, gerr, wt, werr)
		}
	}
	if term, err := m.Validate(checked); term || err != nil {
		t.Errorf("the checked id: (%v, %v), want valid", term, err)
	}
	// Terminating through it is the plain manager's.
	if _, err := m.Terminate(checked); err != nil {
		t.Fatal(err)
	}
	if !ids.Terminated(checked) {
		t.Error("Terminate through the checked manager did not terminate the id")
	}
}

// TestCallSeesTheFrontsRequestState: what the transport learnt about a
// POST (its checked body, the session id it accepted, its stream) reaches
// mcp-go's handling of that POST, so the shortcuts above are taken on the
// real path and not only in these unit tests.
func TestCallSeesTheFrontsRequestState(t *testing.T) {
	type seen struct {
		body, sid string
		post      bool
	}
	got := make(chan seen, 1)
	e := newEnv(t, func(c *Config, _ *session.Registry) {
		c.Extend = func(s *server.MCPServer) {
			s.AddTool(mcp.NewTool("probe"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				rq := requestFrom(ctx)
				if rq == nil {
					got <- seen{}
				} else {
					got <- seen{string(rq.body), rq.checkedSID, rq.post != nil}
				}
				return mcp.NewToolResultText("ok"), nil
			})
		}
	})
	post := func(body, sid string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set(headerSessionID, sid)
			req.Header.Set(headerProtocolVersion, "2025-11-25")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "")
	sid := resp.Header.Get(headerSessionID)
	if sid == "" {
		t.Fatalf("initialize answered %d without a session id", resp.StatusCode)
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"probe","arguments":{}}}`
	if resp := post(call, sid); resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/call answered %d", resp.StatusCode)
	}
	if s := <-got; s.body != call || s.sid != sid || !s.post {
		t.Errorf("the handler saw body %q, checked id %q, post stream %v; want the posted body, %q and a stream", s.body, s.sid, s.post, sid)
	}
}

func TestLocalIsLoopbackAnswersAsTheString(t *testing.T) {
	addrs := []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080},
		&net.TCPAddr{IP: net.ParseIP("127.9.8.7"), Port: 1},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 8080},
		&net.TCPAddr{IP: net.ParseIP("::1"), Port: 8080, Zone: "lo"},
		&net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 8080},
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1).To4(), Port: 8080},
		&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 8080},
		&net.TCPAddr{IP: net.ParseIP("0.0.0.0"), Port: 8080},
		&net.TCPAddr{IP: net.ParseIP("::"), Port: 8080},
		&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 8080, Zone: "eth0"},
		&net.TCPAddr{Port: 8080},
		&net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"},
	}
	for _, a := range addrs {
		if got, want := authz.IsLoopbackAddr(a), isLoopback(a.String()); got != want {
			t.Errorf("%s: authz.IsLoopbackAddr %v, the string says %v", a, got, want)
		}
	}
}

func BenchmarkLocalIsLoopback(b *testing.B) {
	a := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080}
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			isLoopback(a.String())
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			authz.IsLoopbackAddr(a)
		}
	})
}
