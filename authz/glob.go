package authz

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// glob is a name pattern: '*' matches any run of characters (including none
// and including '.' and '/'), '?' matches exactly one character, everything
// else matches itself. There is no escaping and no character class.
type glob struct {
	pattern string
	literal bool // no wildcard: compare with ==
}

// maxGlobLen bounds a pattern, so a policy cannot make matching expensive.
const maxGlobLen = 256

// nameGlob compiles a tool-name or method-name pattern. Those names are made
// of letters, digits, '_', '-', '.' and '/', so any other character is a
// mistake (a '[' someone expected to open a class, a stray space) and is
// refused.
func nameGlob(p string) (glob, error) {
	if p == "" {
		return glob{}, fmt.Errorf("empty pattern")
	}
	if len(p) > maxGlobLen {
		return glob{}, fmt.Errorf("pattern longer than %d characters", maxGlobLen)
	}
	for i, r := range p {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
		case strings.ContainsRune("_-./*?", r):
		default:
			return glob{}, fmt.Errorf("bad glob %q: character %q at offset %d is not allowed (use letters, digits, _ - . / and the wildcards * ?)", p, r, i)
		}
	}
	return glob{pattern: p, literal: !strings.ContainsAny(p, "*?")}, nil
}

// subjectGlob compiles a principal pattern. Subjects may hold any printable
// character ("auth0|42", "alice@example.com"), so only control and invisible
// characters are refused.
func subjectGlob(p string) (glob, error) {
	if p == "" {
		return glob{}, fmt.Errorf("empty pattern")
	}
	if len(p) > maxGlobLen {
		return glob{}, fmt.Errorf("pattern longer than %d characters", maxGlobLen)
	}
	if err := printable(p); err != nil {
		return glob{}, fmt.Errorf("bad glob %q: %w", p, err)
	}
	return glob{pattern: p, literal: !strings.ContainsAny(p, "*?")}, nil
}

// printable refuses control, format, private-use and unassigned characters
// and invalid UTF-8, so a name can neither forge log lines nor hide itself.
func printable(s string) error {
	for i, r := range s {
		if r == utf8.RuneError {
			return fmt.Errorf("invalid UTF-8 at offset %d", i)
		}
		if !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) || unicode.IsSpace(r) && r != ' ' {
			return fmt.Errorf("character %U at offset %d is not printable", r, i)
		}
	}
	return nil
}

// match reports whether s matches the pattern. It runs in O(len(p)·len(s))
// at worst, with no recursion.
func (g glob) match(s string) bool {
	if g.literal {
		return g.pattern == s
	}
	p := g.pattern
	// Classic two-pointer wildcard match with one backtrack point: the last
	// '*' seen and the position in s it currently absorbs up to.
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			if p[pi] == '?' {
				// '?' is one character, not one byte.
				_, size := utf8.DecodeRuneInString(s[si:])
				si += size
			} else {
				si++
			}
			pi++
		case star >= 0:
			_, size := utf8.DecodeRuneInString(s[mark:])
			mark += size
			si = mark
			pi = star + 1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func matchAny(gs []glob, s string) bool {
	for _, g := range gs {
		if g.match(s) {
			return true
		}
	}
	return false
}
