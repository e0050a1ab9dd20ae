package authz

import (
	"context"
	"fmt"
)

// Kind is the outcome of a decision.
type Kind int

// The three outcomes. The zero Kind is not a valid outcome and is treated as
// a denial everywhere.
const (
	KindAllow Kind = iota + 1
	KindAsk
	KindDeny
)

// String returns "allow", "ask" or "deny" ("invalid" for anything else).
func (k Kind) String() string {
	switch k {
	case KindAllow:
		return "allow"
	case KindAsk:
		return "ask"
	case KindDeny:
		return "deny"
	}
	return "invalid"
}

// Decision is what an authorizer answers, with the rule that produced it.
type Decision struct {
	Kind Kind
	// Prompt is what to ask the user (KindAsk).
	Prompt string
	// Reason explains a denial (KindDeny).
	Reason string
	// Rule names what decided, e.g. "policy.yaml:12", "default" or "dev".
	Rule string
}

// Allow is an allowing decision made by rule.
func Allow(rule string) Decision { return Decision{Kind: KindAllow, Rule: rule} }

// Ask is a decision that needs the user's approval, shown prompt.
func Ask(prompt, rule string) Decision { return Decision{Kind: KindAsk, Prompt: prompt, Rule: rule} }

// Deny is a denying decision with its reason.
func Deny(reason, rule string) Decision { return Decision{Kind: KindDeny, Reason: reason, Rule: rule} }

// Allowed reports whether d allows outright.
func (d Decision) Allowed() bool { return d.Kind == KindAllow }

// Detail is the prompt of an Ask, the reason of a Deny, or "".
func (d Decision) Detail() string {
	switch d.Kind {
	case KindAsk:
		return d.Prompt
	case KindDeny:
		return d.Reason
	case KindAllow:
		return ""
	}
	return "invalid decision"
}

// String renders d for logs, e.g. `deny "not in policy" (policy.yaml:14)`.
func (d Decision) String() string {
	if det := d.Detail(); det != "" {
		return fmt.Sprintf("%s %q (%s)", d.Kind, det, d.Rule)
	}
	return fmt.Sprintf("%s (%s)", d.Kind, d.Rule)
}

// Authorizer decides whether a tool call may run.
type Authorizer interface {
	Decide(ctx context.Context, tool string, args map[string]any, c Context) Decision
}

// ReadAuthorizer decides whether a read-surface method (tools/list,
// resources/read, prompts/get, completion/complete, logging/setLevel, …) may
// be served.
type ReadAuthorizer interface {
	DecideRead(ctx context.Context, method string, params any, c Context) Decision
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, tool string, args map[string]any, c Context) Decision

// Decide calls f.
func (f AuthorizerFunc) Decide(ctx context.Context, tool string, args map[string]any, c Context) Decision {
	return f(ctx, tool, args, c)
}

// ReadAuthorizerFunc adapts a function to ReadAuthorizer.
type ReadAuthorizerFunc func(ctx context.Context, method string, params any, c Context) Decision

// DecideRead calls f.
func (f ReadAuthorizerFunc) DecideRead(ctx context.Context, method string, params any, c Context) Decision {
	return f(ctx, method, params, c)
}

// Rules named by the built-in authorizers and helpers.
const (
	RuleDefault      = "default"       // the framework default guard
	RuleDev          = "dev"           // the development guard
	RuleNoAuthorizer = "no-authorizer" // an embedder supplied none
	RulePanic        = "panic"         // the authorizer panicked
	RuleInvalid      = "invalid"       // the authorizer returned no valid Kind
)

// SafeDecide asks a and turns a panic or an invalid Kind into a denial, so a
// broken authorizer fails closed. A nil a allows (rule "no-authorizer"): that
// is an embedder without a guard, which only stdio permits; sensitive tools
// are refused separately by CheckSensitive.
func SafeDecide(ctx context.Context, a Authorizer, tool string, args map[string]any, c Context) (d Decision) {
	if a == nil {
		return Allow(RuleNoAuthorizer)
	}
	defer func() {
		if r := recover(); r != nil {
			d = Deny(fmt.Sprintf("authorizer failed: %v", r), RulePanic)
		}
	}()
	return validDecision(a.Decide(ctx, tool, args, c))
}

// SafeDecideRead is SafeDecide for the read surface.
func SafeDecideRead(ctx context.Context, a ReadAuthorizer, method string, params any, c Context) (d Decision) {
	if a == nil {
		return Allow(RuleNoAuthorizer)
	}
	defer func() {
		if r := recover(); r != nil {
			d = Deny(fmt.Sprintf("read authorizer failed: %v", r), RulePanic)
		}
	}()
	return validDecision(a.DecideRead(ctx, method, params, c))
}

func validDecision(d Decision) Decision {
	switch d.Kind {
	case KindAllow, KindAsk, KindDeny:
		return d
	}
	return Deny(fmt.Sprintf("authorizer returned an invalid decision kind %d", int(d.Kind)), RuleInvalid)
}

// ErrorAuthorizationRequired is the error value of a machine-readable denial
// of an Ask the client cannot be asked about.
const ErrorAuthorizationRequired = "authorization_required"

// ErrorForbidden is the error value of a read-surface denial.
const ErrorForbidden = "forbidden"

// AuthorizationRequired is the machine-readable tool-call denial for a
// decision the client could not be asked about:
// {"error":"authorization_required","tool":…,"decision":"ask","detail":…}.
// For a Deny, "decision" is "deny" and "detail" is the reason. The rule is
// not included: it is for the operator's logs, not the client.
func AuthorizationRequired(tool string, d Decision) map[string]any {
	return map[string]any{
		"error":    ErrorAuthorizationRequired,
		"tool":     tool,
		"decision": d.Kind.String(),
		"detail":   d.Detail(),
	}
}

// ReadDeniedCode is the JSON-RPC error code of a read-surface denial.
const ReadDeniedCode = -32090

// ReadDenied is the data of a read-surface denial (JSON-RPC error
// ReadDeniedCode): {"error":"forbidden","method":…,"detail":…}; an Ask (the
// read surface cannot elicit) reads "authorization_required".
func ReadDenied(method string, d Decision) map[string]any {
	e := ErrorForbidden
	if d.Kind == KindAsk {
		e = ErrorAuthorizationRequired
	}
	return map[string]any{"error": e, "method": method, "detail": d.Detail()}
}
