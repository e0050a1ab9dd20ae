package session

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeResult reads b in one pass when it is an object of the members v,
// text, isError and structured, each at most once and spelled exactly,
// with strings free of surrogate escapes and invalid UTF-8: it returns the
// result and version json.Unmarshal would decode. ok is false for any other
// document, valid or not, which is left to encoding/json: it matches names
// case-insensitively, lets a repeated member win, ignores unknown ones and
// words the errors.
func decodeResult(b []byte) (res Result, v int, ok bool) {
	d := resultDecoder{b: b}
	d.space()
	if !d.take('{') {
		return Result{}, 0, false
	}
	var seen uint8
	d.space()
	for !d.take('}') {
		if seen != 0 && !(d.take(',') && d.space()) {
			return Result{}, 0, false
		}
		bit := d.name()
		if bit == 0 || !(d.space() && d.take(':') && d.space()) {
			return Result{}, 0, false
		}
		switch bit {
		case memberV:
			v, ok = d.version()
		case memberText:
			if !d.take('n') { // null leaves the text empty
				res.Text, ok = d.str()
			} else {
				ok = d.rest("ull")
			}
		case memberIsError:
			res.IsError, ok = d.boolean()
		case memberStructured:
			res.Structured, ok = d.value(0)
		}
		if !ok || seen&bit != 0 {
			return Result{}, 0, false
		}
		seen |= bit
		d.space()
	}
	d.space()
	if d.i != len(d.b) {
		return Result{}, 0, false
	}
	return res, v, true
}

// resultDecoder reads the JSON in b from i on.
type resultDecoder struct {
	b []byte
	i int
}

// space skips whitespace; it always reports true, to chain in conditions.
func (d *resultDecoder) space() bool {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return true
		}
	}
	return true
}

// take consumes c if it is next.
func (d *resultDecoder) take(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// rest consumes the rest of a literal whose first byte was taken.
func (d *resultDecoder) rest(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// The members of a result, as bits of a set.
const (
	memberV uint8 = 1 << iota
	memberText
	memberIsError
	memberStructured
)

// name reads a member name and returns its member, 0 for any other name.
// A name with an escape never spells a member exactly, so names are not
// unquoted.
func (d *resultDecoder) name() uint8 {
	if !d.take('"') {
		return 0
	}
	start := d.i
	for d.i < len(d.b) {
		if d.b[d.i] == '"' {
			d.i++
			switch string(d.b[start : d.i-1]) { // compared, not allocated
			case "v":
				return memberV
			case "text":
				return memberText
			case "isError":
				return memberIsError
			case "structured":
				return memberStructured
			}
			return 0
		}
		d.i++
	}
	return 0
}

// version reads v: null or an integer of at most 18 digits (no overflow).
func (d *resultDecoder) version() (int, bool) {
	if d.take('n') {
		return 0, d.rest("ull")
	}
	neg := d.take('-')
	start, n := d.i, 0
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		n = n*10 + int(d.b[d.i]-'0')
		d.i++
	}
	if digits := d.i - start; digits == 0 || digits > 18 || digits > 1 && d.b[start] == '0' {
		return 0, false
	}
	if neg {
		n = -n
	}
	// A fraction or exponent is an error for an int: encoding/json's.
	return n, d.i == len(d.b) || d.b[d.i] != '.' && d.b[d.i] != 'e' && d.b[d.i] != 'E'
}

// boolean reads true, false or null (false).
func (d *resultDecoder) boolean() (bool, bool) {
	switch {
	case d.take('t'):
		return true, d.rest("rue")
	case d.take('f'):
		return false, d.rest("alse")
	case d.take('n'):
		return false, d.rest("ull")
	}
	return false, false
}

// str reads a string as encoding/json unquotes it; it refuses surrogate
// escapes and invalid UTF-8, which encoding/json replaces.
func (d *resultDecoder) str() (string, bool) {
	if !d.take('"') {
		return "", false
	}
	var buf []byte // the unquoted string once it has an escape
	lit := d.i     // start of the bytes not yet copied to buf
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[lit:d.i]
			d.i++
			if buf == nil {
				return string(s), true
			}
			return string(append(buf, s...)), true
		case c == '\\':
			buf = append(buf, d.b[lit:d.i]...)
			if d.i+1 >= len(d.b) {
				return "", false
			}
			e := d.b[d.i+1]
			d.i += 2
			if k := strings.IndexByte(`"\/bfnrt`, e); k >= 0 {
				buf = append(buf, "\"\\/\b\f\n\r\t"[k])
			} else {
				if e != 'u' || len(d.b)-d.i < 4 {
					return "", false
				}
				// Base 16 takes neither a sign, a prefix nor underscores.
				r, err := strconv.ParseUint(string(d.b[d.i:d.i+4]), 16, 32)
				if err != nil || utf16.IsSurrogate(rune(r)) {
					return "", false
				}
				buf = utf8.AppendRune(buf, rune(r))
				d.i += 4
			}
			lit = d.i
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			d.i++
		default:
			r, size := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			d.i += size
		}
	}
	return "", false
}

// value reads a structured value as json.Unmarshal decodes it into an any.
func (d *resultDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.b) {
		return nil, false
	}
	switch c := d.b[d.i]; {
	case c == '"':
		return d.str()
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case d.take('t'):
		return true, d.rest("rue")
	case d.take('f'):
		return false, d.rest("alse")
	case d.take('n'):
		return nil, d.rest("ull")
	}
	return nil, false
}

// object reads an object into a map (never nil); a repeated key wins.
func (d *resultDecoder) object(depth int) (any, bool) {
	if depth > maxCodecDepth {
		return nil, false
	}
	d.i++ // {
	m := make(map[string]any)
	d.space()
	for !d.take('}') {
		if len(m) > 0 && !(d.take(',') && d.space()) {
			return nil, false
		}
		k, ok := d.str()
		if !ok || !(d.space() && d.take(':') && d.space()) {
			return nil, false
		}
		if m[k], ok = d.value(depth); !ok {
			return nil, false
		}
		d.space()
	}
	return m, true
}

// array reads an array into a slice (never nil).
func (d *resultDecoder) array(depth int) (any, bool) {
	if depth > maxCodecDepth {
		return nil, false
	}
	d.i++ // [
	a := make([]any, 0)
	d.space()
	for !d.take(']') {
		if len(a) > 0 && !(d.take(',') && d.space()) {
			return nil, false
		}
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.space()
	}
	return a, true
}

// number reads a number of JSON's grammar as a float64.
func (d *resultDecoder) number() (any, bool) {
	start := d.i
	d.take('-')
	if !d.take('0') && d.digits() == 0 {
		return nil, false
	}
	if d.take('.') && d.digits() == 0 {
		return nil, false
	}
	if d.take('e') || d.take('E') {
		if !d.take('+') {
			d.take('-')
		}
		if d.digits() == 0 {
			return nil, false
		}
	}
	// Out of range is encoding/json's error to give.
	f, err := strconv.ParseFloat(string(d.b[start:d.i]), 64)
	return f, err == nil
}

// digits consumes decimal digits and returns how many.
func (d *resultDecoder) digits() int {
	start := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i - start
}
