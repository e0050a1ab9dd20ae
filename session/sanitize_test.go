package session

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"pgregory.net/rapid"
)

func TestSanitizeExamples(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"a\u202eevil\u202c", "aevil"},               // bidi override
		{"zero\u200bwidth\u200d", "zerowidth"},       // zero-width space and joiner
		{"\ufeffbom", "bom"},                         // BOM
		{"tag\U000E0041\U000E007F", "tag"},           // tag characters
		{"line\u2028para\u2029", "linepara"},         // separators
		{"pua\ue000\U000F0000", "pua"},               // private use
		{"vs\ufe0f\U000E0100", "vs"},                 // variation selectors
		{"cgj\u034f", "cgj"},                         // combining grapheme joiner
		{"h\u115f\u1160\u3164\uffa0", "h"},           // Hangul fillers
		{"braille\u2800", "braille"},                 // braille blank
		{"ctl\x00\x1b[31m\n\t\x7f\u0085", "ctl[31m"}, // C0, DEL, C1
		{"bad\xff\xfeutf8", "badutf8"},
		{"émoji 👍 ok", "émoji 👍 ok"},
	}
	for i, tt := range tests {
		if got := Sanitize(tt.in); got != tt.want {
			t.Errorf("Test %d: Sanitize(%q) = %q, want %q", i, tt.in, got, tt.want)
		}
	}
}

// hostileString mixes ordinary text, forbidden code points and invalid bytes.
func hostileString() *rapid.Generator[string] {
	forbidden := []string{"\u202a", "\u2069", "\u2060", "\u200c", "\U000E01EF", "\u180e", "\u202e", "\u200b", "\ufeff", "\U000E0041", "\u2028", "\ue000", "\ufe0f", "\u034f",
		"\u3164", "\u2800", "\x00", "\x1b", "\u0085", "\xff", "\xe2\x80", "\U000F0001", "\u00ad", "\u2066"}
	return rapid.Custom(func(t *rapid.T) string {
		parts := rapid.SliceOfN(rapid.OneOf(rapid.String(), rapid.SampledFrom(forbidden)), 0, 12).Draw(t, "parts")
		return strings.Join(parts, "")
	})
}

func TestSanitizeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := hostileString().Draw(t, "s")
		once := Sanitize(s)
		if twice := Sanitize(once); twice != once {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, once, twice)
		}
		if !utf8.ValidString(once) {
			t.Fatalf("invalid UTF-8 left: %q", once)
		}
		for _, r := range once {
			if mustGo(r) {
				t.Fatalf("forbidden %U left in %q", r, once)
			}
		}
		// Only forbidden runes and invalid bytes are removed.
		var kept []rune
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			i += n
			if !(r == utf8.RuneError && n == 1) && !Forbidden(r) {
				kept = append(kept, r)
			}
		}
		if string(kept) != once {
			t.Fatalf("Sanitize(%q) = %q, want %q", s, once, string(kept))
		}
	})
}

// mustGo is the list of what Sanitize removes, written out
// independently of Forbidden.
func mustGo(r rune) bool {
	switch r {
	case 0x034f, 0x115f, 0x1160, 0x3164, 0xffa0, 0x2800, 0x2028, 0x2029, 0xfeff, 0x200b, 0x200c, 0x200d, 0x2060:
		return true
	}
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) ||
		unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) || unicode.Is(unicode.Variation_Selector, r) ||
		(r >= 0xe0000 && r <= 0xe007f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

func TestValidIDAndAction(t *testing.T) {
	for _, id := range []string{"a", "A-b_9", strings.Repeat("x", 32)} {
		if !ValidID(id) {
			t.Errorf("ValidID(%q) = false", id)
		}
	}
	for _, id := range []string{"", "t.v2", "a b", "é", "x\n", strings.Repeat("x", 33)} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
	for _, a := range []string{"click", "get_value", "a" + strings.Repeat("b", 31)} {
		if !ValidAction(a) {
			t.Errorf("ValidAction(%q) = false", a)
		}
	}
	for _, a := range []string{"", "Click", "1a", "get-value", "a" + strings.Repeat("b", 32), "a.b"} {
		if ValidAction(a) {
			t.Errorf("ValidAction(%q) = true", a)
		}
	}
}
