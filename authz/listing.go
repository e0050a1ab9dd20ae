package authz

import "context"

type listingKey struct{}

// Listing reports whether ctx is a tools/list filter pass (see VisibleTools).
// Observers use it to keep per-entry listing decisions out of the denial log.
func Listing(ctx context.Context) bool {
	v, _ := ctx.Value(listingKey{}).(bool)
	return v
}

// VisibleTools filters tools through a, the authorizer tools/call consults,
// and returns those it allows, in order. Ask hides an entry as Deny does (an
// entry that needs an approval the caller has not got is not callable). A
// rule that panics hides only its entry. A nil a lists everything (an
// embedder without a guard). Arguments are not known when listing, so a
// rule is asked with nil args.
func VisibleTools[T any](ctx context.Context, a Authorizer, c Context, tools []T, name func(T) string) []T {
	if a == nil {
		return tools
	}
	ctx = context.WithValue(ctx, listingKey{}, true)
	out := make([]T, 0, len(tools))
	for _, t := range tools {
		if allowedForListing(ctx, a, name(t), c) {
			out = append(out, t)
		}
	}
	return out
}

func allowedForListing(ctx context.Context, a Authorizer, tool string, c Context) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return a.Decide(ctx, tool, nil, c).Kind == KindAllow
}
