package authz

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// Source says where an authorizer came from.
type Source int

const (
	// SourceDefault: a framework default stood in because nobody chose one.
	// It never satisfies a boot gate, however strict it is.
	SourceDefault Source = iota
	// SourceConfigured: an operator (policy file, --dev) or an embedder chose it.
	SourceConfigured
)

// String returns "default" or "configured".
func (s Source) String() string {
	if s == SourceConfigured {
		return "configured"
	}
	return "default"
}

// Limits are per-principal quotas. Zero means unlimited, except where a
// field says otherwise.
type Limits struct {
	SessionsPerPrincipal int
	CallsPerSecond       float64
	CallBurst            int
	// ClientFactsBytes bounds the JSON of clientInfo plus capabilities an
	// initialize may declare; 0 means the MCP front's default (16 KiB).
	ClientFactsBytes int
	// InitializesPerMinute bounds the initializes of one principal (or
	// unauthenticated client IP); 0 means the front's default (120).
	InitializesPerMinute int
	// SessionStateBytes bounds one session's snapshot (its model, info and
	// tools as JSON); 0 means the session manager's default (256 KiB, session.DefaultMaxStateBytes).
	SessionStateBytes int
	// ConnectionsPerPrincipal bounds the live connections one
	// authenticated principal holds across the swarm: at the limit, a new
	// one revokes the least recently active. 0 means the MCP front's
	// default (64).
	ConnectionsPerPrincipal int
}

// SessionAllowed reports whether a principal holding current sessions may
// start one more.
func (l Limits) SessionAllowed(current int) bool {
	return l.SessionsPerPrincipal <= 0 || current < l.SessionsPerPrincipal
}

// Guard is what a node runs with: both authorizers, where each came from,
// the limits and the authenticator.
type Guard struct {
	Tools       Authorizer
	Reads       ReadAuthorizer
	ToolsSource Source
	ReadsSource Source
	// Name says which policy this is, for logs and boot messages.
	Name   string
	Limits Limits
	// Authenticator verifies bearer tokens; nil when no authentication is
	// configured.
	Authenticator *Authenticator

	// roles are extra roles by subject (the policy's roles section).
	roles map[string][]string
}

// Names of the built-in guards.
const (
	DevGuardName     = "dev (allow-all, loopback only)"
	DefaultGuardName = "framework default (tools: deny all; reads: tools/list, resources/list, prompts/list)"
)

// DefaultReadMethods are the read methods the framework default allows: the
// listing methods, which disclose only names the server advertises anyway.
func DefaultReadMethods() []string {
	return []string{"tools/list", "resources/list", "prompts/list"}
}

// DefaultGuard is the framework default used when nothing is configured:
// every tool denied, reads limited to DefaultReadMethods. Both sources are
// SourceDefault, so it never opens a network transport.
func DefaultGuard() Guard {
	allowed := DefaultReadMethods()
	return Guard{
		Tools: AuthorizerFunc(func(context.Context, string, map[string]any, Context) Decision {
			return Deny("no tool policy is configured", RuleDefault)
		}),
		Reads: ReadAuthorizerFunc(func(_ context.Context, method string, _ any, _ Context) Decision {
			if slices.Contains(allowed, method) {
				return Allow(RuleDefault)
			}
			return Deny(method+" is not allowed without a read policy", RuleDefault)
		}),
		ToolsSource: SourceDefault,
		ReadsSource: SourceDefault,
		Name:        DefaultGuardName,
	}
}

// DevGuard is the built-in development policy: everything allowed. Choosing
// --dev is an operator decision, so both sources are SourceConfigured;
// CheckBoot confines it to loopback addresses.
func DevGuard() Guard {
	return Guard{
		Tools: AuthorizerFunc(func(context.Context, string, map[string]any, Context) Decision {
			return Allow(RuleDev)
		}),
		Reads: ReadAuthorizerFunc(func(context.Context, string, any, Context) Decision {
			return Allow(RuleDev)
		}),
		ToolsSource: SourceConfigured,
		ReadsSource: SourceConfigured,
		Name:        DevGuardName,
	}
}

// EmbedderGuardName is the Name of a guard made by NewGuard.
const EmbedderGuardName = "embedder"

// NewGuard is the guard of a Go embedder that brings its own authorizers.
// Both count as configured. A nil authorizer, or an interface holding a nil
// pointer, func, map, chan or slice, is an error rather than a silent allow.
func NewGuard(tools Authorizer, reads ReadAuthorizer) (Guard, error) {
	if err := usable("tool authorizer", tools); err != nil {
		return Guard{}, err
	}
	if err := usable("read authorizer", reads); err != nil {
		return Guard{}, err
	}
	return Guard{
		Tools:       tools,
		Reads:       reads,
		ToolsSource: SourceConfigured,
		ReadsSource: SourceConfigured,
		Name:        EmbedderGuardName,
	}, nil
}

func usable(what string, v any) error {
	if v == nil {
		return fmt.Errorf("authz: the %s is nil", what)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Chan, reflect.Slice, reflect.Interface:
		if rv.IsNil() {
			return fmt.Errorf("authz: the %s is a nil %T", what, v)
		}
	}
	return nil
}

// Configured reports whether both authorizers were chosen by an operator or
// embedder, which is what a network transport needs.
func (g Guard) Configured() bool {
	return g.Tools != nil && g.Reads != nil && g.ToolsSource == SourceConfigured && g.ReadsSource == SourceConfigured
}

// Principal returns p with the guard's policy roles for p.Subject merged in.
// The Authenticator already does this for token principals; use it for the
// unauthenticated ones (the stdio client, a connection).
func (g Guard) Principal(p Principal) Principal {
	if extra := g.roles[p.Subject]; len(extra) > 0 {
		p.Roles = mergeRoles(p.Roles, extra)
	}
	return p
}

// ErrSensitiveUnguarded is returned by CheckSensitive when a sensitive or
// destructive tool is called and no authorizer exists.
var ErrSensitiveUnguarded = errors.New("sensitive_tool_unguarded")

// CheckSensitive is the call-time check for a tool annotated destructiveHint
// or sensitive: without a tool authorizer it returns ErrSensitiveUnguarded.
// It holds for tools registered after boot, including derived tools.
func CheckSensitive(g *Guard, sensitive bool) error {
	if sensitive && (g == nil || g.Tools == nil) {
		return ErrSensitiveUnguarded
	}
	return nil
}
