package authz

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// PolicyError is a policy validation error at a line of the policy file.
// Error returns one line: "<file>:<line>: <message>".
type PolicyError struct {
	File string
	Line int
	Msg  string
}

// Error returns "<file>:<line>: <message>".
func (e *PolicyError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// nodeReader reads a yaml.Node tree strictly, producing PolicyErrors that
// name the line of the offending node.
type nodeReader struct {
	file string
}

func (r *nodeReader) errf(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &PolicyError{File: r.file, Line: line, Msg: oneLine(fmt.Sprintf(format, args...))}
}

// oneLine escapes line breaks, so an error quoting policy text (a path, a
// tag) stays one line.
func oneLine(s string) string {
	return strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(s)
}

// field is one key of a mapping with its value.
type field struct {
	key   string
	keyN  *yaml.Node
	value *yaml.Node
}

// mapping returns the fields of a mapping node in order. A key outside
// allowed, a duplicate key or a non-scalar key is an error.
func (r *nodeReader) mapping(n *yaml.Node, what string, allowed ...string) ([]field, error) {
	if n.Kind != yaml.MappingNode {
		return nil, r.errf(n, "%s must be a mapping, not %s", what, kindName(n))
	}
	out := make([]field, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			return nil, r.errf(k, "%s: keys must be plain strings", what)
		}
		if !slices.Contains(allowed, k.Value) {
			return nil, r.errf(k, "unknown key %q in %s (allowed: %s)", k.Value, what, strings.Join(allowed, ", "))
		}
		for _, f := range out {
			if f.key == k.Value {
				return nil, r.errf(k, "duplicate key %q in %s (first at line %d)", k.Value, what, f.keyN.Line)
			}
		}
		out = append(out, field{key: k.Value, keyN: k, value: v})
	}
	return out, nil
}

// str reads a non-null scalar as a string.
func (r *nodeReader) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", r.errf(n, "%s must be a string, not %s", what, kindName(n))
	}
	return n.Value, nil
}

// nonEmptyStr reads a scalar string that must not be empty.
func (r *nodeReader) nonEmptyStr(n *yaml.Node, what string) (string, error) {
	s, err := r.str(n, what)
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(s) == "" {
		return "", r.errf(n, "%s must not be empty", what)
	}
	return s, nil
}

// strList reads a sequence of scalar strings. An absent key is the caller's
// business; a present key must be a list.
func (r *nodeReader) strList(n *yaml.Node, what string) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, r.errf(n, "%s must be a list, not %s", what, kindName(n))
	}
	out := make([]string, 0, len(n.Content))
	for _, item := range n.Content {
		s, err := r.nonEmptyStr(item, what+" entry")
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (r *nodeReader) boolean(n *yaml.Node, what string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, r.errf(n, "%s must be true or false, not %s", what, kindName(n))
	}
	b, err := strconv.ParseBool(strings.ToLower(n.Value))
	if err != nil {
		return false, r.errf(n, "%s must be true or false, not %q", what, n.Value)
	}
	return b, nil
}

func (r *nodeReader) nonNegInt(n *yaml.Node, what string) (int, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, r.errf(n, "%s must be a whole number, not %s", what, kindName(n))
	}
	v, err := strconv.ParseInt(n.Value, 0, 32)
	if err != nil || v < 0 {
		return 0, r.errf(n, "%s must be a whole number from 0 to %d, not %s", what, int32(^uint32(0)>>1), n.Value)
	}
	return int(v), nil
}

func (r *nodeReader) nonNegFloat(n *yaml.Node, what string) (float64, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		return 0, r.errf(n, "%s must be a number, not %s", what, kindName(n))
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil || v < 0 || v != v || v > 1e9 {
		return 0, r.errf(n, "%s must be a number from 0 to 1e9, not %s", what, n.Value)
	}
	return v, nil
}

// kindName describes a node for error messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!str":
			return fmt.Sprintf("the string %q", truncate(n.Value, 40))
		}
		switch n.Tag {
		case "!!int", "!!float":
			return fmt.Sprintf("the number %q", truncate(n.Value, 40))
		case "!!bool":
			return fmt.Sprintf("the boolean %q", truncate(n.Value, 40))
		}
		return fmt.Sprintf("a value tagged %q", truncate(n.Tag, 40))
	}
	return "an empty document"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// noAnchors refuses anchors and aliases anywhere in the tree: a policy is
// read by people, and an alias makes a rule's meaning depend on text
// elsewhere (and can expand exponentially).
func (r *nodeReader) noAnchors(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return r.errf(n, "anchors and aliases are not supported in a policy")
	}
	for _, c := range n.Content {
		if err := r.noAnchors(c); err != nil {
			return err
		}
	}
	return nil
}
