package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// marshalled is json.Marshal(v), failing the test when it fails.
func marshalled(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%#v): %v", v, err)
	}
	return b
}

func textResult(text string, isError bool, structured any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: isError, StructuredContent: structured}
}

func priority(p float64) *float64 { return &p }

// Every message the front writes is the bytes json.Marshal writes for
// mcp-go's value of it, whatever shape the value has.
func TestMessagesAreWrittenAsEncodingJSONWritesThem(t *testing.T) {
	results := map[string]any{
		"a click":       textResult("count: 3", false, nil),
		"an error":      textResult(`session "s1" has no tool <x> & "y"`, true, nil),
		"structured":    textResult("ok", false, map[string]any{"b": []any{1.0, "é"}, "a": "<>"}),
		"a scalar":      textResult("\u2028 tab\t \x01 \xff é \u2029", false, 7.0),
		"no content":    &mcp.CallToolResult{},
		"two texts":     &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("a"), mcp.NewTextContent("b")}},
		"by value":      *textResult("v", true, nil),
		"a nil result":  (*mcp.CallToolResult)(nil),
		"image":         &mcp.CallToolResult{Content: []mcp.Content{mcp.NewImageContent("AAAA", "image/png"), mcp.NewTextContent("x")}},
		"annotated":     &mcp.CallToolResult{Content: []mcp.Content{mcp.TextContent{Type: "text", Text: "x", Annotated: mcp.Annotated{Annotations: &mcp.Annotations{Priority: priority(1)}}}}},
		"a pointer":     &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Type: "text", Text: "x"}}},
		"a nil content": &mcp.CallToolResult{Content: []mcp.Content{nil}},
		"meta": &mcp.CallToolResult{Result: mcp.Result{Meta: mcp.NewMetaFromMap(map[string]any{"progressToken": "p", "k": "<1>"}), ResultType: mcp.ResultTypeComplete},
			Content: []mcp.Content{mcp.NewTextContent("x")}},
		"raw structured": &mcp.CallToolResult{RawStructuredContent: json.RawMessage(` {"a" : "<b>"} `), StructuredContent: "ignored"},
		"input requests": &mcp.CallToolResult{MultiRoundTripResult: mcp.MultiRoundTripResult{
			InputRequests: mcp.InputRequests{"q": {Method: mcp.MethodListRoots, Roots: &mcp.ListRootsParams{}}}, RequestState: "st&te"}},
		"not a tool's": map[string]any{"tools": []any{}, "nextCursor": "<c>"},
		"raw":          json.RawMessage(`{"x": 1}`),
		"null":         nil,
	}
	ids := map[string]any{
		"a number": float64(42), "a fraction": -1.5, "large": 1e21, "small": 1e-7, "negative zero": math.Copysign(0, -1),
		"an int": 7, "an int64": int64(-9), "a string": "req-<7>", "null": nil,
		"raw": json.RawMessage(`"a\u0041"`), "raw spaced": json.RawMessage(` 12 `), "raw html": json.RawMessage(`"<"`),
		"a RequestId": mcp.NewRequestId("r"),
	}
	for rname, result := range results {
		for iname, id := range ids {
			want := marshalled(t, mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: result})
			got, err := AppendResult([]byte("kept"), id, result)
			if err != nil || !bytes.Equal(got, append([]byte("kept"), want...)) {
				t.Errorf("AppendResult(%s, %s): %v\n got  %s\n want kept%s", iname, rname, err, got, want)
			}
		}
	}
	for name, data := range map[string]any{"none": nil, "a map": map[string]any{"error": "<denied>", "method": "tools/call"}, "raw": json.RawMessage(`[1, 2]`), "typed nil": (*int)(nil)} {
		want := marshalled(t, mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(float64(3)), Error: mcp.NewJSONRPCErrorDetails(-32090, "denied & <logged>", data)})
		if got, err := AppendError(nil, float64(3), -32090, "denied & <logged>", data); err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendError with %s data: %v\n got  %s\n want %s", name, err, got, want)
		}
	}
	for name, params := range map[string]mcp.NotificationParams{
		"none":   {},
		"fields": {AdditionalFields: map[string]any{"uri": "swarm://session/s1", "level": "info"}},
		"meta":   {Meta: map[string]any{"k": 1.0}, AdditionalFields: map[string]any{"_meta": "dropped", "a": "<"}},
		"empty":  {AdditionalFields: map[string]any{}},
	} {
		want := marshalled(t, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/message", Params: params}})
		if got, err := AppendNotification(nil, "notifications/message", params); err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendNotification with %s params: %v\n got  %s\n want %s", name, err, got, want)
		}
	}
	for name, params := range map[string]any{"none": nil, "elicitation": mcp.ElicitationParams{Message: "ok?"}, "a map": map[string]any{"b": 1, "a": "&"}} {
		want := marshalled(t, mcp.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("n1.s4"), Params: params, Request: mcp.Request{Method: "elicitation/create"}})
		if got, err := AppendRequest(nil, "n1.s4", "elicitation/create", params); err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendRequest with %s params: %v\n got  %s\n want %s", name, err, got, want)
		}
	}
}

// What json.Marshal cannot encode fails here too, and leaves dst as it
// was.
func TestUnencodableMessagesFailAndLeaveDstAlone(t *testing.T) {
	unencodable := map[string]struct {
		id, value any
	}{
		"a NaN id":                {math.NaN(), textResult("x", false, nil)},
		"an infinite id":          {math.Inf(1), nil},
		"an id that is not JSON":  {json.RawMessage(`{"a"`), nil},
		"an empty raw id":         {json.RawMessage{}, nil},
		"an id of a func":         {func() {}, nil},
		"a func in structured":    {float64(1), textResult("x", false, map[string]any{"f": func() {}})},
		"raw structured not JSON": {float64(1), &mcp.CallToolResult{RawStructuredContent: json.RawMessage(`{`)}},
		"a channel result":        {float64(1), make(chan int)},
	}
	for name, tc := range unencodable {
		if _, err := json.Marshal(mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(tc.id), Result: tc.value}); err == nil {
			t.Fatalf("%s: json.Marshal encodes it", name)
		}
		if got, err := AppendResult([]byte("kept"), tc.id, tc.value); err == nil || string(got) != "kept" {
			t.Errorf("AppendResult with %s: %q, %v", name, got, err)
		}
		if got, err := AppendError([]byte("kept"), tc.id, 1, "m", tc.value); err == nil || string(got) != "kept" {
			t.Errorf("AppendError with %s: %q, %v", name, got, err)
		}
		if got, err := AppendRequest([]byte("kept"), tc.id, "m", tc.value); err == nil || string(got) != "kept" {
			t.Errorf("AppendRequest with %s: %q, %v", name, got, err)
		}
	}
	if got, err := AppendNotification([]byte("kept"), "m", make(chan int)); err == nil || string(got) != "kept" {
		t.Errorf("AppendNotification with a channel: %q, %v", got, err)
	}
}

// A tool's text answer, the front's hottest message, is written without
// encoding/json: no allocation beyond dst.
func TestToolTextAnswersAreWrittenWithoutEncodingJSON(t *testing.T) {
	res := textResult("count: 3 <ok> é", true, nil)
	dst := make([]byte, 0, 256)
	for name, id := range map[string]any{"a number": float64(42), "a string": "req-7", "raw": json.RawMessage(`42`)} {
		if n := testing.AllocsPerRun(100, func() {
			if _, err := AppendResult(dst, id, res); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("with %s id: %v allocations per answer", name, n)
		}
	}
}

// BenchmarkAppendResult is the encoding of a click's answer by the hand
// path against json.Marshal of mcp-go's value in the same run; compare
// their ns/op.
func BenchmarkAppendResult(b *testing.B) {
	for name, res := range map[string]*mcp.CallToolResult{
		"text":       textResult("count: 3", false, nil),
		"structured": textResult("count: 3", false, map[string]any{"count": 3.0, "label": "clicks"}),
	} {
		b.Run(name+"/wire", func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]byte, 0, 256)
			for range b.N {
				if _, err := AppendResult(dst, float64(42), res); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := json.Marshal(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(float64(42)), res)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
