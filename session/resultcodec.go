package session

import (
	"encoding/json"
	"strconv"

	"github.com/mcpswarm/mcpswarm/internal/jsonq"
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

// appendJSON appends r's current format; ok is false when its structured
// value fails to encode, for encoding/json to report the error. The
// structured value, rarer and of any type, is encoded by encoding/json:
// encoding is compositional, so its bytes are the same alone and inside
// the result.
func (r Result) appendJSON(b []byte) (_ []byte, ok bool) {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, ResultFormat, 10)
	b = append(b, `,"text":`...)
	b = jsonq.AppendString(b, r.Text)
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
