package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// flagLine is one flag's heading in Go's flag.PrintDefaults output:
// "  -name" optionally followed by the argument's name.
var flagLine = regexp.MustCompile(`^  -(\S+)(?: (.*))?$`)

// TestEveryFlagHelpNamesItsArgumentByType pins that no usage string carries a
// back-quoted word: Go's flag package takes one as the argument's name, so
// `see `+"`mcpswarm keygen`"+` once rendered as "-cluster-key-file mcpswarm keygen".
func TestEveryFlagHelpNamesItsArgumentByType(t *testing.T) {
	typeNames := map[string]bool{"": true, "string": true, "int": true, "uint": true, "int64": true,
		"uint64": true, "float": true, "duration": true, "value": true}
	for _, c := range commands() {
		if c.name == "version" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			run(context.Background(), []string{c.name, "--help"}, strings.NewReader(""), &out, &out, func(string) string { return "" })
			flags := 0
			for _, line := range strings.Split(out.String(), "\n") {
				m := flagLine.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				flags++
				if !typeNames[m[2]] {
					t.Errorf("mcpswarm %s --help renders -%s with argument name %q: a back-quoted word in its usage string", c.name, m[1], m[2])
				}
			}
			if flags == 0 && c.name != "keygen" {
				t.Fatalf("mcpswarm %s --help listed no flags:\n%s", c.name, out.String())
			}
		})
	}
}
