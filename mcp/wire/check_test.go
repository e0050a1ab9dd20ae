package wire

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 70) + "1" + strings.Repeat("}", 70)
	okDeep := `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat(`[`, 60) + strings.Repeat(`]`, 60) + `}`
	batch := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	cases := []struct {
		body     string
		code     int
		contains string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, ""},
		{okDeep, 0, ""},
		{``, codeParseError, "empty"},
		{`{"jsonrpc":"2.0",`, codeParseError, "valid json"},
		{deep, codeInvalidRequest, "nesting"},
		{`"[]]]]"`, codeInvalidRequest, "object"},
		{batch(33), codeInvalidRequest, "exceeds the limit of 32"},
		{batch(2), codeInvalidRequest, "not supported"},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, codeInvalidRequest, "jsonrpc"},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, codeInvalidRequest, "id must be"},
		{`{"jsonrpc":"2.0","id":true,"method":"ping"}`, codeInvalidRequest, "id must be"},
		{`{"jsonrpc":"2.0","method":"x","params":"\"{{{{"}`, 0, ""},
	}
	for _, c := range cases {
		_, e := Check([]byte(c.body), 32, 64)
		switch {
		case c.code == 0 && e != nil:
			t.Errorf("%.40q: unexpected %v", c.body, e)
		case c.code != 0 && (e == nil || e.Code != c.code || !strings.Contains(e.Message, c.contains)):
			t.Errorf("%.40q: got %v, want %d %q", c.body, e, c.code, c.contains)
		}
	}
}
