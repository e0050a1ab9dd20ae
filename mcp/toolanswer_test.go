package mcp

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpswarm/mcpswarm/session"
)

// encodedAnswer is what mcp-go's transport writes for a tool call's result.
func encodedAnswer(t testing.TB, id any, res *mcp.CallToolResult) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), res)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The answers sessions' tools give are written by the front itself, byte
// for byte as encoding/json writes them.
func TestCommonToolAnswersAreWrittenByTheFront(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   any
		res  *mcp.CallToolResult
	}{
		{"a click", float64(42), sessionResult(sessionResultOf("count: 3", false, nil))},
		{"an error", "req-7", sessionResult(sessionResultOf(`session "s1" has no tool <x> & "y"`, true, nil))},
		{"structured", float64(-1.5), sessionResult(sessionResultOf("ok", false, map[string]any{"b": []any{1.0, "é"}, "a": "<>"}))},
		{"a scalar", float64(0), sessionResult(sessionResultOf("\u2028 tab\t", false, 7.0))},
		{"no content", float64(1e20), &mcp.CallToolResult{}},
		{"two texts", float64(3), &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("a"), mcp.NewTextContent("b")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := appendToolAnswer(nil, tc.id, tc.res)
			if !ok {
				t.Fatal("left to encoding/json")
			}
			if want := encodedAnswer(t, tc.id, tc.res); !bytes.Equal(got, want) {
				t.Fatalf("\n got  %s\n want %s", got, want)
			}
		})
	}
}

// Results of any other shape are left to encoding/json.
func TestUncommonToolAnswersAreLeftToEncodingJSON(t *testing.T) {
	for name, res := range map[string]*mcp.CallToolResult{
		"image":       {Content: []mcp.Content{mcp.NewImageContent("AAAA", "image/png")}},
		"annotated":   {Content: []mcp.Content{mcp.TextContent{Type: "text", Text: "x", Annotated: mcp.Annotated{Annotations: &mcp.Annotations{Priority: priority(1)}}}}},
		"meta":        {Result: mcp.Result{Meta: mcp.NewMetaFromMap(map[string]any{"k": 1})}, Content: []mcp.Content{mcp.NewTextContent("x")}},
		"raw":         {RawStructuredContent: json.RawMessage(`{"a":1}`)},
		"a pointer":   {Content: []mcp.Content{&mcp.TextContent{Type: "text", Text: "x"}}},
		"unencodable": {StructuredContent: map[string]any{"f": func() {}}},
	} {
		if out, ok := appendToolAnswer([]byte("keep"), float64(1), res); ok || string(out) != "keep" {
			t.Errorf("%s: written by the front (%q)", name, out)
		}
	}
}

func sessionResultOf(text string, isError bool, structured any) session.Result {
	return session.Result{Text: text, IsError: isError, Structured: structured}
}

func priority(p float64) *float64 { return &p }

// FuzzToolAnswerEncodesAsEncodingJSON holds appendToolAnswer to the bytes
// encoding/json writes, for any text, id and structured value.
func FuzzToolAnswerEncodesAsEncodingJSON(f *testing.F) {
	f.Add(42.0, "", false, "count: 3", false, []byte(`null`))
	f.Add(0.0, "id-1", true, "a <b> & \"c\" \\ \x01 \xff é \u2028", true, []byte(`{"value":1e300,"s":"<"}`))
	f.Add(1e21, "", false, "", false, []byte(`[1,2]`))
	f.Add(math.Copysign(0, -1), "", false, "x", false, []byte(`{"a":{"b":[true,null,"\u00e9"]}}`))
	f.Add(1e-7, "", false, "x", true, []byte(`"s"`))
	f.Fuzz(func(t *testing.T, num float64, str string, useStr bool, text string, isError bool, structured []byte) {
		var id any = num
		if useStr {
			id = str
		}
		res := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: isError}
		var v any
		if json.Unmarshal(structured, &v) == nil {
			res.StructuredContent = v
		}
		var want bytes.Buffer
		wantErr := json.NewEncoder(&want).Encode(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), res))
		got, ok := appendToolAnswer(nil, id, res)
		if wantErr != nil {
			if ok {
				t.Fatalf("encoding/json fails (%v) but the front wrote %s", wantErr, got)
			}
			return
		}
		if !ok || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("ok=%v\n got  %s\n want %s", ok, got, want.Bytes())
		}
	})
}

// BenchmarkToolAnswer is the encoding of a click's answer, against
// encoding/json in the same run.
func BenchmarkToolAnswer(b *testing.B) {
	res := sessionResult(sessionResultOf("count: 3", false, nil))
	b.Run("appendToolAnswer", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, ok := appendToolAnswer(make([]byte, 0, 256), float64(42), res); !ok {
				b.Fatal("left to encoding/json")
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for range b.N {
			buf.Reset()
			if err := json.NewEncoder(&buf).Encode(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(float64(42)), res)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
