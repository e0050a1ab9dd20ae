package authz

import (
	"context"
	"testing"
)

const taskPolicy = `
roles:
  bob: [admin]
tools:
  - match: {roles: [admin]}
    allow: true
  - match: {tools: ["*.report.run"]}
    allow: true
    task: forbidden
  - match: {tools: ["*.run", "*.*.run"], transports: [streamable-http]}
    allow: true
    task: required
  - match: {tools: ["*.run", "*.*.run", swarm_start]}
    ask: "{principal} wants to run {tool}"
    task: optional
  - match: {principals: [alice]}
    allow: true
`

// TestPolicyMarksTasks: the first rule that matches and carries a task
// mark gives it, whichever rule decides the call; no marking rule is "".
func TestPolicyMarksTasks(t *testing.T) {
	p, err := ParsePolicy("p.yaml", []byte(taskPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := p.Guard()
	if err != nil {
		t.Fatal(err)
	}
	stdio := Context{Principal: Principal{Subject: "alice"}, Transport: TransportStdio}
	cases := []struct {
		name string
		c    Context
		tool string
		want TaskSupport
	}{
		{"a rule after the deciding admin rule still marks", httpCtx("bob"), "s1.jobs.run", TaskRequired},
		{"an exception before a broader mark", httpCtx("alice"), "s1.report.run", TaskForbidden},
		{"the transport is part of the match", stdio, "s1.jobs.run", TaskOptional},
		{"a static tool", stdio, "swarm_start", TaskOptional},
		{"no marking rule matches", httpCtx("alice"), "s1.counter.inc", ""},
		{"an unmarked tool of an admin", httpCtx("bob"), "swarm_list", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := g.TaskSupport(tc.c, tc.tool); got != tc.want {
				t.Errorf("TaskSupport(%s, %s) = %q, want %q", tc.c.Principal.Subject, tc.tool, got, tc.want)
			}
		})
	}
	// The mark says how an allowed call runs, never whether it is allowed.
	if d := g.Tools.Decide(context.Background(), "s1.jobs.run", nil, stdio); d.Kind != KindAsk {
		t.Errorf("decision on a marked tool = %v, want the ask rule's", d)
	}
}

// TestGuardsWithoutAPolicyMarkNothing: the default, dev and an embedder's
// guard without a TaskMarker leave every tool's own declaration alone, and
// a marker that panics or answers nonsense marks nothing.
func TestGuardsWithoutAPolicyMarkNothing(t *testing.T) {
	c := httpCtx("alice")
	allow := AuthorizerFunc(func(context.Context, string, map[string]any, Context) Decision { return Allow("x") })
	embedder, err := NewGuard(allow, ReadAuthorizerFunc(func(context.Context, string, any, Context) Decision { return Allow("x") }))
	if err != nil {
		t.Fatal(err)
	}
	noTools, err := ParsePolicy("p.yaml", []byte("reads: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	noToolsGuard, _ := noTools.Guard()
	for name, g := range map[string]Guard{
		"default":            DefaultGuard(),
		"dev":                DevGuard(),
		"embedder":           embedder,
		"no tools section":   noToolsGuard,
		"panicking marker":   {Tools: panickyMarker{}},
		"nonsense marker":    {Tools: fixedMarker("sometimes")},
		"nil policy pointer": {Tools: (*Policy)(nil)},
	} {
		if got := g.TaskSupport(c, "s1.jobs.run"); got != "" {
			t.Errorf("%s guard marks %q, want nothing", name, got)
		}
	}
	if got := (Guard{Tools: fixedMarker(TaskRequired)}).TaskSupport(c, "x"); got != TaskRequired {
		t.Errorf("an embedder's marker answered %q, want required", got)
	}
}

type panickyMarker struct{ Authorizer }

func (panickyMarker) TaskSupport(string, Context) TaskSupport { panic("broken marker") }

type fixedMarker TaskSupport

func (fixedMarker) Decide(context.Context, string, map[string]any, Context) Decision {
	return Allow("x")
}

func (f fixedMarker) TaskSupport(string, Context) TaskSupport { return TaskSupport(f) }
