package session

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// A forwarded call's result is encoded on the owner and decoded on the
// entry node; through reflection both were a visible part of a forwarded
// click's CPU (the decode alone 15% of forward). Nearly every result is a
// short text, the error flag and perhaps a small structured value, so the
// codec below writes that shape directly (the structured value through
// encoding/json) and reads it in one pass: the bytes written are
// those encoding/json writes, and a document read is decoded to the value
// json.Unmarshal gives (FuzzResultMarshal, FuzzResultUnmarshal). Anything
// else goes to encoding/json.

// maxCodecDepth bounds the nesting the direct decoder follows; deeper
// documents are left to encoding/json.
const maxCodecDepth = 32

const hexDigits = "0123456789abcdef"

// appendJSON appends r's current format; ok is false when its structured
// value fails to encode, for encoding/json to report the error. The
// structured value, rarer and of any type, is encoded by encoding/json:
// encoding is compositional, so its bytes are the same alone and inside
// the result.
func (r Result) appendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, ResultFormat, 10)
	b = append(b, `,"text":`...)
	b = appendJSONQuote(b, r.Text)
	if r.Structured != nil { // omitempty
		enc, err := json.Marshal(r.Structured)
		if err != nil {
			return b, false
		}
		b = append(append(b, `,"structured":`...), enc...)
	}
	if r.IsError {
		return append(b, `,"isError":true}`...), true
	}
	return append(b, `,"isError":false}`...), true
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
