package jsonq

import (
	"encoding/json"
	"testing"
)

// AppendString writes every string as encoding/json does, invalid UTF-8,
// control and HTML characters, U+2028 and U+2029 included.
func FuzzAppendStringMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back`, "<a href='x'>&amp;</a>", "\x00\x1f\x7f", "\u2028\u2029", "\xff\xfe", "é😀", `{"count":3}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("%q: got %s, want %s", s, got[1:], want)
		}
	})
}
