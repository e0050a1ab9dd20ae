package session

import "context"

type runHereKey struct{}

// RunHere returns a context with which a call runs its update on the
// calling goroutine when the session is idle, rather than on one of the
// manager's workers: two goroutine hand-offs fewer a call. The caller then
// waits for the update however long it takes (CallTimeout and ctx no
// longer cut its wait short; the update still sees ctx), so it is for
// callers bounded elsewhere: the owner's side of a forwarded call, whose
// entry node keeps the client's deadline. A session busy with other calls
// queues the call for its worker as without it.
func RunHere(ctx context.Context) context.Context {
	return context.WithValue(ctx, runHereKey{}, true)
}

func runsHere(ctx context.Context) bool {
	here, _ := ctx.Value(runHereKey{}).(bool)
	return here
}
