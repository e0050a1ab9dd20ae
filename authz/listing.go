package authz

import "context"

type listingKey struct{}

// Listing reports whether ctx is a tools/list filter pass (see VisibleTools).
// Observers use it to keep per-entry listing decisions out of the denial log.
func Listing(ctx context.Context) bool {
	v, _ := ctx.Value(listingKey{}).(bool)
	return v
}

// Listed is one entry of a tools/list view: the tool and whether calling it
// needs the user's approval first (an Ask decision).
type Listed[T any] struct {
	Tool T
	// Ask is true when the authorizer answered Ask: the tool is listed so a
	// client that only calls what it was shown can reach it, and the call
	// itself is gated (it elicits the approval, or is denied as
	// authorization_required where the client cannot be asked).
	Ask bool
	// Prompt is the Ask's question to the user ("" for an Allow).
	Prompt string
}

// VisibleTools filters tools through a, the authorizer tools/call consults,
// and returns those it allows or asks about, in order. Only Deny hides an
// entry: an Ask is listed, marked, because approval is decided per call
// (the caller's client shows the question then). A rule that panics hides
// only its entry. A nil a lists everything (an embedder without a guard).
// Arguments are not known when listing, so a rule is asked with nil args.
func VisibleTools[T any](ctx context.Context, a Authorizer, c Context, tools []T, name func(T) string) []Listed[T] {
	out := make([]Listed[T], 0, len(tools))
	ctx = context.WithValue(ctx, listingKey{}, true)
	for _, t := range tools {
		switch d := SafeDecide(ctx, a, name(t), nil, c); d.Kind {
		case KindAllow:
			out = append(out, Listed[T]{Tool: t})
		case KindAsk:
			out = append(out, Listed[T]{Tool: t, Ask: true, Prompt: d.Prompt})
		}
	}
	return out
}
