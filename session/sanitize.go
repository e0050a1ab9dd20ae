package session

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidID reports whether s is a valid session, app or widget id:
// 1-32 characters of [A-Za-z0-9_-].
func ValidID(s string) bool {
	if len(s) < 1 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidAction reports whether s is a valid action name: a lowercase letter
// followed by up to 31 of [a-z0-9_].
func ValidAction(s string) bool {
	if len(s) < 1 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Sanitize removes from s every code point that could hide or reorder text a
// model reads as instructions: control and format characters (bidi controls,
// zero-width characters, BOM, tag characters), line and paragraph
// separators, private-use characters, variation selectors, the combining
// grapheme joiner, Hangul fillers and the braille blank. Invalid UTF-8 bytes
// are dropped. Sanitize is idempotent.
func Sanitize(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || Forbidden(r) {
			clean = false
			break
		}
		i += n
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if (r == utf8.RuneError && n == 1) || Forbidden(r) {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Forbidden reports whether Sanitize removes r.
func Forbidden(r rune) bool {
	switch {
	case r >= 0x20 && r < 0x7f: // printable ASCII, the common case
		return false
	case r < 0x20 || (r >= 0x7f && r < 0xa0):
		return true // C0, DEL, C1
	case r == 0x034f: // combining grapheme joiner
		return true
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0: // Hangul fillers
		return true
	case r == 0x2800: // braille pattern blank
		return true
	case r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef: // variation selectors
		return true
	case r == 0x180b || r == 0x180c || r == 0x180d || r == 0x180e || r == 0x180f: // Mongolian selectors and separator
		return true
	case r == 0x2028 || r == 0x2029:
		return true
	case r >= 0xe0000 && r <= 0xe007f: // tags
		return true
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp)
}
