package mcp

import (
	"encoding/json"
	"math"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
)

// A direct call's answer was encoded by encoding/json from mcp-go's types:
// CallToolResult.MarshalJSON builds a map, marshals it, and the encoder then
// scans the result again to compact it — 12% of a click's CPU on the front
// (issue #17's profile). Nearly every answer of a session's tool is one text
// content, perhaps an error flag and a structured object; for that shape
// appendToolAnswer writes the same bytes directly
// (FuzzToolAnswerEncodesAsEncodingJSON) and leaves every other shape to
// encoding/json.

// appendToolAnswer appends to dst the bytes json.NewEncoder(w).Encode
// writes for mcp.NewJSONRPCResultResponse(mcp.NewRequestId(id), res),
// trailing newline included, when res holds only plain text contents, the
// error flag and a structured value; ok is false for any other result,
// and dst is then returned unchanged.
func appendToolAnswer(dst []byte, id any, res *mcp.CallToolResult) (out []byte, ok bool) {
	if res == nil || res.Meta != nil || res.ResultType != "" || len(res.RawStructuredContent) > 0 ||
		len(res.InputRequests) > 0 || res.RequestState != "" {
		return dst, false
	}
	for _, c := range res.Content {
		t, isText := c.(mcp.TextContent)
		if !isText || t.Annotations != nil || t.Meta != nil || t.Type != "text" {
			return dst, false
		}
	}
	var structured []byte
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return dst, false // encoding/json would fail the same way
		}
		structured = b
	}
	start := len(dst)
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if dst, ok = appendRequestID(dst, id); !ok {
		return dst[:start], false
	}
	// CallToolResult.MarshalJSON's map: its keys in sorted order.
	dst = append(dst, `,"result":{"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"type":"text","text":`...)
		dst = appendJSONString(dst, c.(mcp.TextContent).Text)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if res.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	if structured != nil {
		dst = append(dst, `,"structuredContent":`...)
		dst = append(dst, structured...)
	}
	return append(dst, "}}\n"...), true
}

// appendRequestID appends a decoded JSON-RPC id as encoding/json encodes it.
func appendRequestID(dst []byte, id any) ([]byte, bool) {
	switch v := id.(type) {
	case string:
		return appendJSONString(dst, v), true
	case float64:
		// encoding/json's float64 form for everything it does not write
		// with an exponent.
		if a := math.Abs(v); a == 0 || (a >= 1e-6 && a < 1e21) {
			return strconv.AppendFloat(dst, v, 'f', -1, 64), true
		}
	}
	b, err := json.Marshal(id)
	if err != nil {
		return dst, false
	}
	return append(dst, b...), true
}

// appendJSONString appends s as encoding/json encodes a string (HTML
// characters escaped): directly when s is printable ASCII without a
// character to escape, through json.Marshal otherwise.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
