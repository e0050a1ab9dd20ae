package authz

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ReadMethods are the MCP methods that pass through the read authorizer.
func ReadMethods() []string {
	return []string{
		"tools/list",
		"resources/list",
		"resources/templates/list",
		"resources/read",
		"resources/subscribe",
		"resources/unsubscribe",
		"prompts/list",
		"prompts/get",
		"completion/complete",
		"logging/setLevel",
	}
}

type surface int

const (
	surfaceTools surface = iota
	surfaceReads
)

// rule is one compiled policy rule. Every criterion present must hold (and);
// within a criterion any entry may match (or); an absent criterion matches
// everything.
type rule struct {
	ref        string // "<file>:<line>"
	principals []glob
	roles      []string
	names      []glob // tool names or read methods
	transports []Transport
	kind       Kind
	text       template // the ask prompt or deny reason
	// task marks the matched tools as task-supporting (tools rules only;
	// "" when the rule says nothing).
	task TaskSupport
}

// template is an ask prompt or deny reason split at its placeholders, so
// rendering it is one allocation.
type template []tmplPart

type tmplPart struct {
	lit string
	v   tmplVar
}

type tmplVar int

const (
	varNone      tmplVar = iota
	varName              // {tool} or {method}
	varPrincipal         // {principal}
)

// parseTemplate splits text at {nameKey} and {principal}; other braces are
// literal text.
func parseTemplate(text, nameKey string) template {
	var t template
	vars := []struct {
		s string
		v tmplVar
	}{{"{" + nameKey + "}", varName}, {"{principal}", varPrincipal}}
	for text != "" {
		next, which := len(text), -1
		for i, v := range vars {
			if j := strings.Index(text, v.s); j >= 0 && j < next {
				next, which = j, i
			}
		}
		if next > 0 {
			t = append(t, tmplPart{lit: text[:next]})
		}
		if which < 0 {
			break
		}
		t = append(t, tmplPart{v: vars[which].v})
		text = text[next+len(vars[which].s):]
	}
	return t
}

func (t template) render(name, principal string) string {
	if len(t) == 1 && t[0].v == varNone {
		return t[0].lit
	}
	var b strings.Builder
	n := 0
	for _, p := range t {
		n += len(p.lit)
		switch p.v {
		case varName:
			n += len(name)
		case varPrincipal:
			n += len(principal)
		}
	}
	b.Grow(n)
	for _, p := range t {
		switch p.v {
		case varName:
			b.WriteString(name)
		case varPrincipal:
			b.WriteString(principal)
		default:
			b.WriteString(p.lit)
		}
	}
	return b.String()
}

func (ru *rule) matches(name string, c Context, roles []string) bool {
	if ru.principals != nil && !matchAny(ru.principals, c.Principal.Subject) {
		return false
	}
	if ru.roles != nil && !slices.ContainsFunc(ru.roles, func(r string) bool { return slices.Contains(roles, r) }) {
		return false
	}
	if ru.names != nil && !matchAny(ru.names, name) {
		return false
	}
	if ru.transports != nil && !slices.Contains(ru.transports, c.Transport) {
		return false
	}
	return true
}

// decision renders the rule's outcome for name.
func (ru *rule) decision(name string, c Context) Decision {
	if ru.kind == KindAllow {
		return Allow(ru.ref)
	}
	text := ru.text.render(name, c.Principal.Subject)
	switch ru.kind {
	case KindAsk:
		return Ask(text, ru.ref)
	default:
		return Deny(text, ru.ref)
	}
}

// noMatchRule is the Rule of a policy decision no rule matched.
func (p *Policy) noMatchRule() string { return p.file + ":no-match" }

// Decide applies the tools rules in order; the first that matches decides and
// no match denies. Without a tools section it is the framework default.
func (p *Policy) Decide(_ context.Context, tool string, _ map[string]any, c Context) Decision {
	if !p.hasTools {
		return Deny("no tool policy is configured", RuleDefault)
	}
	roles := mergeRoles(c.Principal.Roles, p.roles[c.Principal.Subject])
	for i := range p.tools {
		if p.tools[i].matches(tool, c, roles) {
			return p.tools[i].decision(tool, c)
		}
	}
	return Deny("no policy rule allows "+tool, p.noMatchRule())
}

// TaskSupport is the task mark of the first tools rule that matches tool
// for c and carries one (whatever that rule's action; a deny rule carries
// none), or "" when no rule marks it. The mark is separate from the
// decision on purpose: a broad allow rule early in the file (admins, stdio)
// must not hide a later rule that marks a slow tool, and whether the call is
// allowed at all is still Decide's answer.
func (p *Policy) TaskSupport(tool string, c Context) TaskSupport {
	if !p.hasTools {
		return ""
	}
	var roles []string
	for i := range p.tools {
		ru := &p.tools[i]
		if ru.task == "" {
			continue
		}
		if roles == nil {
			roles = mergeRoles(c.Principal.Roles, p.roles[c.Principal.Subject])
		}
		if ru.matches(tool, c, roles) {
			return ru.task
		}
	}
	return ""
}

// DecideRead applies the reads rules in order; the first that matches decides
// and no match denies. Without a reads section it is the framework default.
func (p *Policy) DecideRead(_ context.Context, method string, _ any, c Context) Decision {
	if !p.hasReads {
		if slices.Contains(DefaultReadMethods(), method) {
			return Allow(RuleDefault)
		}
		return Deny(method+" is not allowed without a read policy", RuleDefault)
	}
	roles := mergeRoles(c.Principal.Roles, p.roles[c.Principal.Subject])
	for i := range p.reads {
		if p.reads[i].matches(method, c, roles) {
			return p.reads[i].decision(method, c)
		}
	}
	return Deny("no policy rule allows "+method, p.noMatchRule())
}

func (r *nodeReader) rules(n *yaml.Node, s surface) ([]rule, error) {
	section := "tools"
	if s == surfaceReads {
		section = "reads"
	}
	if n.Kind != yaml.SequenceNode {
		return nil, r.errf(n, "%s must be a list of rules (an empty list [] denies everything), not %s", section, kindName(n))
	}
	out := make([]rule, 0, len(n.Content))
	for _, item := range n.Content {
		ru, err := r.rule(item, s, section)
		if err != nil {
			return nil, err
		}
		out = append(out, ru)
	}
	return out, nil
}

func (r *nodeReader) rule(n *yaml.Node, s surface, section string) (rule, error) {
	actions := []string{"allow", "ask", "deny"}
	if s == surfaceReads {
		actions = []string{"allow", "deny"}
	}
	what := section + " rule"
	if n.Kind != yaml.MappingNode {
		return rule{}, r.errf(n, "%s must be a mapping with match and one of %s, not %s", what, strings.Join(actions, ", "), kindName(n))
	}
	ru := rule{ref: fmt.Sprintf("%s:%d", r.file, n.Line)}
	var action, task *field
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return rule{}, r.errf(k, "%s: keys must be plain strings", what)
		}
		if line, dup := seen[k.Value]; dup {
			return rule{}, r.errf(k, "duplicate key %q in %s (first at line %d)", k.Value, what, line)
		}
		seen[k.Value] = k.Line
		switch key := k.Value; {
		case key == "match":
			if err := r.match(v, s, &ru); err != nil {
				return rule{}, err
			}
		case slices.Contains(actions, key):
			if action != nil {
				return rule{}, r.errf(k, "%s has both %s and %s; a rule takes exactly one of %s", what, action.key, key, strings.Join(actions, ", "))
			}
			action = &field{key: key, keyN: k, value: v}
		case key == "ask" && s == surfaceReads:
			return rule{}, r.errf(k, "ask is not available in reads rules (a read cannot be approved interactively); use allow or deny")
		case key == "task" && s == surfaceTools:
			task = &field{key: key, keyN: k, value: v}
		case key == "task":
			return rule{}, r.errf(k, "task is not available in reads rules (only a tool call can run as a task)")
		default:
			return rule{}, r.errf(k, "unknown action or key %q in %s (want match and one of %s)", key, what, strings.Join(actions, ", "))
		}
	}
	if action == nil {
		return rule{}, r.errf(n, "%s needs exactly one of %s", what, strings.Join(actions, ", "))
	}
	switch action.key {
	case "allow":
		b, err := r.boolean(action.value, "allow")
		if err != nil {
			return rule{}, err
		}
		if !b {
			return rule{}, r.errf(action.value, "allow: false means nothing; write deny: \"<reason>\" to deny")
		}
		ru.kind = KindAllow
	case "ask", "deny":
		text, err := r.nonEmptyStr(action.value, action.key)
		if err != nil {
			return rule{}, r.errf(action.value, "%s takes a non-empty string (the %s)", action.key, map[string]string{"ask": "prompt shown to the user", "deny": "reason given to the client"}[action.key])
		}
		if err := printableAt(r, action.value, action.key, strings.NewReplacer("\n", " ", "\t", " ").Replace(text)); err != nil {
			return rule{}, err
		}
		nameKey := "tool"
		if s == surfaceReads {
			nameKey = "method"
		}
		ru.text = parseTemplate(text, nameKey)
		ru.kind = KindAsk
		if action.key == "deny" {
			ru.kind = KindDeny
		}
	}
	if task != nil {
		if ru.kind == KindDeny {
			return rule{}, r.errf(task.keyN, "task on a deny rule means nothing (a denied call never runs); put it on an allow or ask rule")
		}
		v, err := r.str(task.value, "task")
		if err != nil {
			return rule{}, err
		}
		ts := TaskSupport(v)
		if !ts.Valid() {
			return rule{}, r.errf(task.value, "task must be optional, required or forbidden, not %q", v)
		}
		ru.task = ts
	}
	return ru, nil
}

func (r *nodeReader) match(n *yaml.Node, s surface, ru *rule) error {
	nameKey := "tools"
	if s == surfaceReads {
		nameKey = "methods"
	}
	fields, err := r.mapping(n, "match", "principals", "roles", nameKey, "transports")
	if err != nil {
		return err
	}
	for _, f := range fields {
		list, err := r.strList(f.value, "match."+f.key)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return r.errf(f.value, "match.%s is an empty list, which matches nothing; leave the key out to match any", f.key)
		}
		switch f.key {
		case "principals":
			for i, s := range list {
				g, err := subjectGlob(s)
				if err != nil {
					return r.errf(f.value.Content[i], "match.principals: %v", err)
				}
				ru.principals = append(ru.principals, g)
			}
		case "roles":
			roles, err := r.roleList(f.value)
			if err != nil {
				return err
			}
			ru.roles = roles
		case "tools", "methods":
			for i, s := range list {
				g, err := nameGlob(s)
				if err != nil {
					return r.errf(f.value.Content[i], "match.%s: %v", f.key, err)
				}
				if f.key == "methods" && g.literal && !slices.Contains(ReadMethods(), s) {
					return r.errf(f.value.Content[i], "match.methods: unknown read method %q (known: %s)", s, strings.Join(ReadMethods(), ", "))
				}
				ru.names = append(ru.names, g)
			}
		case "transports":
			for i, s := range list {
				t := Transport(s)
				if !t.Valid() {
					return r.errf(f.value.Content[i], "match.transports: unknown transport %q (known: stdio, sse, streamable-http)", s)
				}
				ru.transports = append(ru.transports, t)
			}
		}
	}
	return nil
}
