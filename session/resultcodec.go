package session

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// A forwarded call's result is encoded on the owner and decoded on the
// entry node; through reflection both were a visible part of a forwarded
// click's CPU (the decode alone 15% of forward). Nearly every result is a
// short text, the error flag and perhaps a small structured value, so the
// codec below writes and reads that shape directly: the bytes written are
// those encoding/json writes, and a document read is decoded to the value
// json.Unmarshal gives (FuzzResultMarshal, FuzzResultUnmarshal). Anything
// else goes to encoding/json.

// maxCodecDepth bounds the nesting the direct codec follows; deeper values
// (and cycles, which encoding/json reports) are left to encoding/json.
const maxCodecDepth = 32

const hexDigits = "0123456789abcdef"

// appendJSON appends r's current format; ok is false when a structured
// value fails to encode, for encoding/json to report the error.
func (r Result) appendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, ResultFormat, 10)
	b = append(b, `,"text":`...)
	b = appendJSONQuote(b, r.Text)
	if r.Structured != nil { // omitempty
		b = append(b, `,"structured":`...)
		if b, ok = appendJSONValue(b, r.Structured, 0); !ok {
			return b, false
		}
	}
	if r.IsError {
		return append(b, `,"isError":true}`...), true
	}
	return append(b, `,"isError":false}`...), true
}

// appendJSONValue appends v as json.Marshal encodes it: the types a decoded
// or a widget's value mostly holds directly, any other through json.Marshal.
// ok is false when json.Marshal would fail.
func appendJSONValue(b []byte, v any, depth int) (_ []byte, ok bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendJSONQuote(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case float64:
		return appendJSONFloat(b, v)
	case json.RawMessage:
		if v == nil { // RawMessage.MarshalJSON's null
			return append(b, "null"...), true
		}
		if json.Valid(v) {
			return appendCompactHTML(b, v), true
		}
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth < maxCodecDepth {
			return appendJSONObject(b, v, depth+1)
		}
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth < maxCodecDepth {
			b = append(b, '[')
			for i, e := range v {
				if i > 0 {
					b = append(b, ',')
				}
				if b, ok = appendJSONValue(b, e, depth+1); !ok {
					return b, false
				}
			}
			return append(b, ']'), true
		}
	}
	// Encoding is compositional: a value's bytes are the same alone and
	// inside the result.
	enc, err := json.Marshal(v)
	if err != nil {
		return b, false
	}
	return append(b, enc...), true
}

// appendJSONObject appends m with its keys sorted, as encoding/json does.
func appendJSONObject(b []byte, m map[string]any, depth int) (_ []byte, ok bool) {
	var small [8]string // most objects are small: no allocation for the keys
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONQuote(b, k)
		b = append(b, ':')
		if b, ok = appendJSONValue(b, m[k], depth); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendJSONFloat appends f as encoding/json does (the ES6 form); ok is
// false for the NaN and infinities it refuses.
func appendJSONFloat(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 is written e-9
		if n := len(b); b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendJSONQuote appends s quoted as encoding/json quotes it: HTML
// characters, U+2028 and U+2029 escaped and invalid UTF-8 replaced by
// U+FFFD. Unlike appendJSONString (resources.go) it escapes directly: a
// result's text is often JSON itself, quotes included.
func appendJSONQuote(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendCompactHTML appends valid JSON src as json.Marshal writes a
// json.RawMessage: whitespace between tokens dropped, <, >, &, U+2028 and
// U+2029 escaped (they can only be inside strings).
func appendCompactHTML(b, src []byte) []byte {
	inString, escaped := false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			continue
		case c == 0xe2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xa8:
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xf])
			i += 2
			continue
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		b = append(b, c)
	}
	return b
}
