package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// fuzzID is an id of each kind a caller hands in, chosen by kind: a
// number as DecodeID returns it, a string, null, a raw id as Envelope.ID
// holds it (any bytes: json.Marshal refuses what is not JSON), an integer,
// an mcp.RequestId.
func fuzzID(kind uint8, num float64, str string) any {
	switch kind % 6 {
	case 0:
		return num
	case 1:
		return str
	case 2:
		return nil
	case 3:
		return json.RawMessage(str)
	case 4:
		return int64(num) // implementation-defined past int64's range, but some int64
	default:
		return mcp.NewRequestId(str)
	}
}

// fuzzValue is a value decoded from b, or b itself raw, by kind; nil when
// kind says none or b does not decode.
func fuzzValue(kind uint8, b []byte) any {
	switch kind % 4 {
	case 0:
		return nil
	case 1:
		var v any
		if json.Unmarshal(b, &v) != nil {
			return nil
		}
		return v
	case 2:
		return json.RawMessage(b)
	default:
		return string(b)
	}
}

// checkSame fails t unless got is want appended to prefix, or both
// failed and got is prefix.
func checkSame(t *testing.T, what string, prefix, got []byte, gotErr error, want []byte, wantErr error) {
	t.Helper()
	if wantErr != nil {
		if gotErr == nil || !bytes.Equal(got, prefix) {
			t.Fatalf("%s: json.Marshal fails (%v) but wire wrote %q (%v)", what, wantErr, got, gotErr)
		}
		return
	}
	if gotErr != nil || !bytes.Equal(got, append(prefix, want...)) {
		t.Fatalf("%s: %v\n got  %q\n want %q", what, gotErr, got[min(len(prefix), len(got)):], want)
	}
}

// FuzzAppendResultMatchesEncodingJSON holds AppendResult to json.Marshal
// of mcp-go's response for any tool result: texts of any bytes, the error
// flag, structured content decoded or raw (perhaps not JSON), _meta,
// other contents, the multi-round-trip members, by value or pointer or
// nil, under an id of any kind.
func FuzzAppendResultMatchesEncodingJSON(f *testing.F) {
	f.Add(uint8(0), 42.0, "", "count: 3", false, []byte(`null`), []byte(nil), uint16(0))
	f.Add(uint8(1), 0.0, "id-1", "a <b> & \"c\" \\ \x01 \xff é \u2028\x00second", true, []byte(`{"value":1e300,"s":"<"}`), []byte(`{"k":"<v>"}`), uint16(2))
	f.Add(uint8(0), 1e21, "", "", false, []byte(`[1,2]`), []byte(nil), uint16(0))
	f.Add(uint8(0), math.Copysign(0, -1), "", "x", false, []byte(`{"a":{"b":[true,null,"\u00e9"]}}`), []byte(`{"progressToken":1}`), uint16(3))
	f.Add(uint8(0), 1e-7, "", "x", true, []byte(`"s"`), []byte(nil), uint16(4|8|16))
	f.Add(uint8(3), 0.0, ` "a\u0041" `, "raw id", false, []byte(` { "a" : 1 } `), []byte(nil), uint16(1|32|64))
	f.Add(uint8(3), 0.0, `{`, "bad raw id", false, []byte(`{`), []byte(nil), uint16(1))
	f.Add(uint8(2), math.NaN(), "", "null id", false, []byte(nil), []byte(nil), uint16(128|256))
	f.Add(uint8(4), 9.5, "", "int id", false, []byte(nil), []byte(nil), uint16(512))
	f.Add(uint8(5), 0.0, "<rid>", "RequestId", false, []byte(nil), []byte(nil), uint16(1024))
	f.Fuzz(func(t *testing.T, idKind uint8, num float64, str, text string, isError bool, structured, meta []byte, shape uint16) {
		id := fuzzID(idKind, num, str)
		res := &mcp.CallToolResult{IsError: isError}
		if shape&1024 == 0 { // else no content at all
			for _, s := range strings.Split(text, "\x00") {
				res.Content = append(res.Content, mcp.NewTextContent(s))
			}
		}
		if shape&1 != 0 {
			res.RawStructuredContent = structured
		} else if v := fuzzValue(1, structured); v != nil {
			res.StructuredContent = v
		}
		var m map[string]any
		if shape&2 != 0 && json.Unmarshal(meta, &m) == nil && m != nil {
			res.Meta = mcp.NewMetaFromMap(m)
		}
		if shape&4 != 0 {
			res.Content = append(res.Content, mcp.NewImageContent(text, "image/png"))
		}
		if shape&8 != 0 {
			res.Content = append(res.Content, mcp.TextContent{Type: str, Text: text,
				Annotated: mcp.Annotated{Annotations: &mcp.Annotations{Priority: &num}}})
		}
		if shape&16 != 0 {
			res.ResultType = mcp.ResultType(str)
		}
		if shape&32 != 0 {
			res.RequestState = text
		}
		if shape&64 != 0 {
			res.InputRequests = mcp.InputRequests{str: {Method: mcp.MethodElicitationCreate,
				Elicitation: &mcp.ElicitationParams{Message: text}}}
		}
		if shape&512 != 0 {
			res.Content = append(res.Content, mcp.TextContent{Type: str, Text: text}, nil)
		}
		var result any = res
		switch {
		case shape&128 != 0 && shape&256 != 0:
			result = (*mcp.CallToolResult)(nil)
		case shape&128 != 0:
			result = *res
		case shape&256 != 0:
			result = fuzzValue(uint8(shape>>12), structured) // not a tool's result
		}
		want, wantErr := json.Marshal(mcp.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Result: result})
		got, err := AppendResult([]byte("prefix"), id, result)
		checkSame(t, "AppendResult", []byte("prefix"), got, err, want, wantErr)
	})
}

// FuzzAppendErrorMatchesEncodingJSON holds AppendError to json.Marshal of
// mcp-go's error response for any id, code, message and data.
func FuzzAppendErrorMatchesEncodingJSON(f *testing.F) {
	f.Add(uint8(0), 1.0, "", -32090, "denied", uint8(1), []byte(`{"error":"<forbidden>","method":"tools/call"}`))
	f.Add(uint8(2), 0.0, "", -32700, "request body is not valid json", uint8(0), []byte(nil))
	f.Add(uint8(3), 0.0, `"x"`, 0, "\xff\u2029<&>", uint8(2), []byte(` [1, "<"] `))
	f.Add(uint8(1), 0.0, "s", math.MinInt, "", uint8(2), []byte(`{`))
	f.Add(uint8(4), -3.0, "", 1<<40, "m", uint8(3), []byte("a\x00\xfe"))
	f.Fuzz(func(t *testing.T, idKind uint8, num float64, str string, code int, message string, dataKind uint8, data []byte) {
		id := fuzzID(idKind, num, str)
		d := fuzzValue(dataKind, data)
		want, wantErr := json.Marshal(mcp.JSONRPCError{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id),
			Error: mcp.NewJSONRPCErrorDetails(code, message, d)})
		got, err := AppendError([]byte("prefix"), id, code, message, d)
		checkSame(t, "AppendError", []byte("prefix"), got, err, want, wantErr)
	})
}

// FuzzAppendNotificationAndRequestMatchEncodingJSON holds
// AppendNotification and AppendRequest to json.Marshal of mcp-go's
// notification and request for any method, params and id.
func FuzzAppendNotificationAndRequestMatchEncodingJSON(f *testing.F) {
	f.Add(uint8(0), 1.0, "", "notifications/resources/updated", uint8(1), []byte(`{"uri":"swarm://session/s1/model/<k>"}`), []byte(nil))
	f.Add(uint8(1), 0.0, "n1.s4", "elicitation/create", uint8(1), []byte(`{"message":"ok?","requestedSchema":{}}`), []byte(`{"k":1}`))
	f.Add(uint8(2), 0.0, "", "ping", uint8(0), []byte(nil), []byte(nil))
	f.Add(uint8(3), 0.0, "\xff", "m\u2028", uint8(2), []byte(`{`), []byte(`{"_meta":{}}`))
	f.Add(uint8(1), 0.0, "s", "notifications/message", uint8(3), []byte(`x`), []byte(`null`))
	f.Fuzz(func(t *testing.T, idKind uint8, num float64, str, method string, paramsKind uint8, params, meta []byte) {
		id := fuzzID(idKind, num, str)
		p := fuzzValue(paramsKind, params)

		// mcp-go's notification params: a map of fields and _meta.
		var np mcp.NotificationParams
		if fields, ok := p.(map[string]any); ok {
			np.AdditionalFields = fields
		}
		var m map[string]any
		if json.Unmarshal(meta, &m) == nil {
			np.Meta = m
		}
		want, wantErr := json.Marshal(mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: method, Params: np}})
		got, err := AppendNotification([]byte("prefix"), method, np)
		checkSame(t, "AppendNotification of NotificationParams", []byte("prefix"), got, err, want, wantErr)

		// Params of any other type.
		want, wantErr = json.Marshal(struct {
			JSONRPC string `json:"jsonrpc"`
			Method  string `json:"method"`
			Params  any    `json:"params,omitempty"`
		}{mcp.JSONRPC_VERSION, method, p})
		got, err = AppendNotification([]byte("prefix"), method, p)
		checkSame(t, "AppendNotification", []byte("prefix"), got, err, want, wantErr)

		want, wantErr = json.Marshal(mcp.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(id), Params: p, Request: mcp.Request{Method: method}})
		got, err = AppendRequest([]byte("prefix"), id, method, p)
		checkSame(t, "AppendRequest", []byte("prefix"), got, err, want, wantErr)
	})
}
