package authz

import (
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "demo.results.sort", true},
		{"*", "resources/read", true},
		{"swarm_*", "swarm_list", true},
		{"swarm_*", "swarm_", true},
		{"swarm_*", "xswarm_list", false},
		{"*.form.click", "s1.form.click", true},
		{"*.form.click", "s1.form.clicked", false},
		{"*.form.click", ".form.click", true},
		{"*.form.click", "a.b.form.click", true},
		{"*.get_*", "s1.results.get_rows", true},
		{"*.get_*", "s1.results.set_rows", false},
		{"s?.*", "s1.x", true},
		{"s?.*", "s12.x", false},
		{"resources/*", "resources/read", true},
		{"resources/*", "resources/templates/list", true},
		{"resources/*", "tools/list", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"swarm_list", "swarm_list", true},
		{"swarm_list", "swarm_lis", false},
		{"**", "x", true},
		{"?", "é", true}, // one character, not one byte
		{"alice@*", "alice@example.com", true},
	}
	for _, tc := range cases {
		g, err := subjectGlob(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		if got := g.match(tc.name); got != tc.want {
			t.Errorf("%q ~ %q = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestGlobValidation(t *testing.T) {
	for _, p := range []string{"", "[a]", "a b", "a\x00", "a\\*", strings.Repeat("a", maxGlobLen+1), "é"} {
		if _, err := nameGlob(p); err == nil {
			t.Errorf("nameGlob(%q) accepted", p)
		}
	}
	for _, p := range []string{"", "a\nb", "a\u200bb", "\xff"} {
		if _, err := subjectGlob(p); err == nil {
			t.Errorf("subjectGlob(%q) accepted", p)
		}
	}
	for _, p := range []string{"auth0|42", "alice@example.com", "ci-*"} {
		if _, err := subjectGlob(p); err != nil {
			t.Errorf("subjectGlob(%q): %v", p, err)
		}
	}
}

// TestGlobWorstCase: a pathological pattern stays quadratic at worst.
func TestGlobWorstCase(t *testing.T) {
	g, _ := nameGlob(strings.Repeat("a*", 100) + "b")
	if g.match(strings.Repeat("a", 10000)) {
		t.Error("matched without b")
	}
}

func TestTemplate(t *testing.T) {
	cases := []struct{ text, key, want string }{
		{"plain", "tool", "plain"},
		{"{tool}", "tool", "T"},
		{"{principal} wants {tool}.", "tool", "P wants T."},
		{"{tool}{tool}", "tool", "TT"},
		{"{method} by {principal}", "method", "T by P"},
		{"{tool} in reads stays", "method", "{tool} in reads stays"},
		{"{unknown} {", "tool", "{unknown} {"},
	}
	for _, tc := range cases {
		if got := parseTemplate(tc.text, tc.key).render("T", "P"); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.text, got, tc.want)
		}
	}
}
