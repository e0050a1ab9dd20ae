package wire

import "encoding/json"

// The member scanner under Decode, CallToolName and DecodeCallTool: it
// hands on the members of a JSON object without decoding their values,
// and gives up — leaving the decision to json.Unmarshal — wherever
// json.Unmarshal's reading could differ from a byte comparison.

// foldsTo reports whether name equals one of names, lower-case ASCII
// names, but for the case of its letters. name is ASCII (members hands on
// no other), where this is all the folding json.Unmarshal does.
func foldsTo(name []byte, names ...string) bool {
	for _, n := range names {
		if len(name) != len(n) {
			continue
		}
		same := true
		for i, c := range name {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != n[i] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// members calls fn with the name and raw value of each member of the JSON
// object b, in order, until fn returns false. It reports false — and
// json.Unmarshal must decide — when b is not valid JSON or not an object,
// when a member name has an escape or a non-ASCII byte (it may fold to a
// name fn looks for), or when fn returned false.
func members(b []byte, fn func(name, v []byte) bool) bool {
	return json.Valid(b) && validMembers(b, fn)
}

// validMembers is members for b known to be valid JSON (a value members
// handed on).
func validMembers(b []byte, fn func(name, v []byte) bool) bool {
	// b is valid JSON: every index below stays in range.
	i := skipSpace(b, 0)
	if b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if b[i] == '}' {
		return true
	}
	for {
		j := i + 1
		for b[j] != '"' {
			if b[j] == '\\' || b[j] >= 0x80 {
				return false
			}
			j++
		}
		name := b[i+1 : j]
		i = skipSpace(b, skipSpace(b, j+1)+1) // past the colon
		end := valueEnd(b, i)
		if !fn(name, b[i:end]) {
			return false
		}
		i = skipSpace(b, end)
		if b[i] == '}' {
			return true
		}
		i = skipSpace(b, i+1) // past the comma
	}
}

// plainString sets *dst to v when v is a JSON string without escapes or
// non-ASCII bytes (so its bytes are its value), leaves it when v is null,
// and reports false for anything else.
func plainString(v []byte, dst *string) bool {
	if string(v) == "null" {
		return true
	}
	if v[0] != '"' {
		return false
	}
	s := v[1 : len(v)-1]
	for _, c := range s {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	switch string(s) { // the values of nearly every message, without a copy
	case "2.0":
		*dst = "2.0"
	case "tools/call":
		*dst = "tools/call"
	default:
		*dst = string(s)
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// valueEnd is the index just past the JSON value starting at b[i]; b is
// valid JSON.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	default: // a number, true, false or null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
			i++
		}
		return i
	}
}

// stringEnd is the index just past the JSON string starting at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}
