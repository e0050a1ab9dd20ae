package session

import "context"

type progressKey struct{}

// ProgressFunc reports the progress of a running call.
type ProgressFunc func(progress, total float64, message string)

// WithProgress returns a context carrying fn, for ProgressFrom.
func WithProgress(ctx context.Context, fn func(progress, total float64, message string)) context.Context {
	return context.WithValue(ctx, progressKey{}, ProgressFunc(fn))
}

// ProgressFrom returns the progress reporter in ctx, or one that does
// nothing. Apps implementing ContextUpdater call it from UpdateContext.
func ProgressFrom(ctx context.Context) func(progress, total float64, message string) {
	if fn, ok := ctx.Value(progressKey{}).(ProgressFunc); ok && fn != nil {
		return fn
	}
	return func(float64, float64, string) {}
}
