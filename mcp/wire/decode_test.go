package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The envelope decoder is json.Unmarshal's twin: on any input both
// fail (with a syntax error alike) or both give the same envelope. A
// divergence would let the front judge a message other than the one a
// decode of the whole message reads — a method or id it did not see.
func FuzzEnvelopeDecodesAsEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s1.inc.click","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"a\"b","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":7,"result":{}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x"}}`,
		` { "jsonrpc" : "2.0" , "id" : null , "method" : "m" } `,
		`{"METHOD":"tools/call","method":"ping","jsonrpc":"2.0","id":1}`,
		`{"method":"ping","Method":"tools/call","jsonrpc":"2.0","id":1}`,
		`{"\u006dethod":"tools/call","jsonrpc":"2.0","id":1}`,
		`{"jſonrpc":"2.0","id":1,"method":"x"}`,
		`{"jsonrpc":"2.\u0030","id":1,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tóols"}`,
		`{"jsonrpc":2,"id":1,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":null}`,
		`{"jsonrpc":"2.0","method":"a","method":null}`,
		`{"jsonrpc":"2.0","id":1,"id":null,"params":[1,{"a":"}"}],"x":{"y":[]}}`,
		`{"jsonrpc":"2.0","id":-1.5e3,"method":"x","params":"str"}`,
		`{}`, `[]`, `{"a":1`, `{"a":1}}`, `"x"`, `{"id":tru}`, ``, `{"jsonrpc":"2.0","id":1,"method":"x"} x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got Envelope
		wantErr := json.Unmarshal(b, &want)
		gotErr := Decode(b, &got)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: json.Unmarshal says %v, Decode %v", b, wantErr, gotErr)
		}
		if wantErr != nil {
			var ws, gs *json.SyntaxError
			if errors.As(wantErr, &ws) != errors.As(gotErr, &gs) {
				t.Fatalf("%q: json.Unmarshal says %v, Decode %v", b, wantErr, gotErr)
			}
			return
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q:\n json.Unmarshal  %+v\n Decode  %+v", b, want, got)
		}
	})
}

// A tools/call decoded by one scan reads as json.Unmarshal (mcp-go's
// decode) reads it: whenever DecodeCallTool takes a message, the request
// is the one json.Unmarshal gives, so the call runs the tool the client
// named, with the arguments it sent.
func FuzzCallToolDecodesAsEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s1.inc.click","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"s1.t.type","arguments":{"text":"h\u00e9","n":12345678901234567890}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":null}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":[1,2],"name":"a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}},"params":{"name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Arguments":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":3}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","PARAMS":{"name":"a"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null,"arguments":"x"}}`,
		`{"method":"tools/call","params":{"name":"a","arguments":{"a":{"b":[{}]}}},"extra":[1]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got mcp.CallToolRequest
		if !DecodeCallTool(b, &got) {
			return
		}
		var want mcp.CallToolRequest
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("%q: DecodeCallTool took a message json.Unmarshal refuses: %v", b, err)
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q:\n json.Unmarshal  %#v\n DecodeCallTool  %#v", b, want, got)
		}
	})
}

// BenchmarkCallToolDecode is the decode of a click's request, against
// json.Unmarshal in the same run.
func BenchmarkCallToolDecode(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"s2.abcdefgh.inc.click","arguments":{}}}`)
	b.Run("DecodeCallTool", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var req mcp.CallToolRequest
			if !DecodeCallTool(msg, &req) {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var req mcp.CallToolRequest
			if err := json.Unmarshal(msg, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEnvelope is the decode of a click's message, against
// json.Unmarshal in the same run.
func BenchmarkEnvelope(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"s2.abcdefgh.inc.click","arguments":{}}}`)
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var e Envelope
			if err := Decode(msg, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var e Envelope
			if err := json.Unmarshal(msg, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The tool-name decode is json.Unmarshal's twin too: the front picks a
// tool by the name the whole request's decode reads.
func FuzzCallToolNameDecodesAsEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"name":"s1.inc.click","arguments":{}}`,
		`{"arguments":{"name":"x"},"name":"swarm_list"}`,
		`{"NAME":"a","name":"b"}`, `{"name":"b","Name":"a"}`, `{"\u006eame":"a"}`,
		`{"name":"a\u002eb"}`, `{"name":"é"}`, `{"name":null}`, `{"name":1}`,
		`{"name":"a","name":null}`, `{}`, `[]`, `null`, `{"name":"a"`, ``, ` {"name" : "a" } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var p struct {
			Name string `json:"name"`
		}
		wantErr := json.Unmarshal(b, &p)
		got, ok := CallToolName(b)
		if (wantErr == nil) != ok || (ok && got != p.Name) {
			t.Fatalf("%q: json.Unmarshal gives %q, %v; CallToolName %q, %v", b, p.Name, wantErr, got, ok)
		}
	})
}

// A message's id reads as json.Unmarshal into an any reads it: the same
// value of the same type, or an error alike.
func FuzzDecodeIDAsEncodingJSON(f *testing.F) {
	for _, s := range []string{`1`, `0`, `-0`, `-7`, `007`, `123456789012345`, `1234567890123456`, `9007199254740993`,
		`1.5`, `1e3`, `-`, `"a"`, `""`, `"a\"b"`, `"é"`, `"a\u0041"`, `null`, `true`, `{}`, `[1]`, `"`, `"\t"`, ` 1`, `1 `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return // the envelope hands on only valid members
		}
		var want any
		wantErr := json.Unmarshal(b, &want)
		got, gotErr := DecodeID(b)
		if (wantErr == nil) != (gotErr == nil) || !reflect.DeepEqual(want, got) {
			t.Fatalf("%q: json.Unmarshal %#v (%v), DecodeID %#v (%v)", b, want, wantErr, got, gotErr)
		}
		if f, ok := want.(float64); ok && f == 0 && (1/f < 0) != (1/got.(float64) < 0) {
			t.Fatalf("%q: the sign of zero differs", b)
		}
	})
}

// A message's kind follows from its members as JSON-RPC defines them.
func TestEnvelopeKinds(t *testing.T) {
	for _, tc := range []struct {
		msg                                      string
		request, notification, response, pingAns bool
	}{
		{msg: `{"jsonrpc":"2.0","id":1,"method":"ping"}`, request: true},
		{msg: `{"jsonrpc":"2.0","id":null,"method":"ping"}`},
		{msg: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, notification: true},
		{msg: `{"jsonrpc":"2.0","id":1,"result":{"a":1}}`, response: true},
		{msg: `{"jsonrpc":"2.0","id":1,"result":{ }}`, response: true, pingAns: true},
		{msg: `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}`, response: true},
		{msg: `{"jsonrpc":"2.0","id":1}`},
	} {
		var e Envelope
		if err := Decode([]byte(tc.msg), &e); err != nil {
			t.Fatalf("%s: %v", tc.msg, err)
		}
		if e.IsRequest() != tc.request || e.IsNotification() != tc.notification ||
			e.IsResponse() != tc.response || e.IsPingAnswer() != tc.pingAns {
			t.Errorf("%s: request %v, notification %v, response %v, ping answer %v", tc.msg,
				e.IsRequest(), e.IsNotification(), e.IsResponse(), e.IsPingAnswer())
		}
	}
}
