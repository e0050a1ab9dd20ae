package session

import (
	"context"
	"encoding/json"
)

type argumentsKey struct{}

type argumentsJSON struct {
	tool string
	raw  json.RawMessage
}

// WithArgumentsJSON returns a context carrying raw, the JSON object the
// arguments of a call to tool were decoded from, so that a node forwarding
// the call passes the client's bytes on rather than encoding the decoded
// map again. raw must be what the arguments map was decoded from.
func WithArgumentsJSON(ctx context.Context, tool string, raw json.RawMessage) context.Context {
	return context.WithValue(ctx, argumentsKey{}, argumentsJSON{tool: tool, raw: raw})
}

// ArgumentsJSON returns the bytes WithArgumentsJSON put in ctx for a call
// to tool, or nil: a context carrying another tool's arguments (a call
// made on behalf of the first) gives nil.
func ArgumentsJSON(ctx context.Context, tool string) json.RawMessage {
	if a, ok := ctx.Value(argumentsKey{}).(argumentsJSON); ok && a.tool == tool {
		return a.raw
	}
	return nil
}
