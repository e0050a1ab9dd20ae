package mcp

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/authz"
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
