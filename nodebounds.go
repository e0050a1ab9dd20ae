package mcpswarm

import (
	"time"

	"github.com/mcpswarm/mcpswarm/session"
	"github.com/mcpswarm/mcpswarm/session/apps"
)

// WidgetLimits bound what a client can make a session hold through widget
// actions (issue #13): every string it types ends up in the session's
// model, held in memory, saved to bbolt and replicated, and the demo apps'
// collections grow one item per call. The policy's
// limits.session_state_bytes bounds every app's whole state on top.
type WidgetLimits struct {
	// TextBytes bounds every string argument of a widget action.
	TextBytes int
	// TodoItems and TodoTitleBytes bound the todo demo's list.
	TodoItems, TodoTitleBytes int
	// Files bounds the files demo's tree.
	Files int
	// Commands bounds the commands (work an app's update starts outside
	// the session) one session runs at once.
	Commands int
	// JobSeconds bounds a job of the jobs demo.
	JobSeconds int
}

// DefaultWidgetLimits returns the defaults documented on each flag.
func DefaultWidgetLimits() WidgetLimits {
	return WidgetLimits{
		TextBytes:      session.DefaultMaxTextBytes,
		TodoItems:      apps.DefaultTodoItems,
		TodoTitleBytes: apps.DefaultTodoTitleBytes,
		Files:          apps.DefaultMaxFiles,
		Commands:       session.DefaultMaxCommands,
		JobSeconds:     apps.DefaultJobSeconds,
	}
}

func (l WidgetLimits) validate() error {
	for _, b := range []struct {
		flag     string
		v        int
		min, max int
	}{
		{"widget-text-bytes", l.TextBytes, 16, 1 << 20},
		{"todo-max-items", l.TodoItems, 1, 10_000},
		{"todo-title-bytes", l.TodoTitleBytes, 1, 1 << 20},
		{"files-max", l.Files, 1, 10_000},
		{"session-commands", l.Commands, 1, 1024},
		{"jobs-max-seconds", l.JobSeconds, 1, 3600},
	} {
		if b.v < b.min || b.v > b.max {
			return fieldErr(b.flag, "must be from %d to %d, got %d", b.min, b.max, b.v)
		}
	}
	return nil
}

// appBounds are the demo apps' bounds from l.
func (l WidgetLimits) appBounds() apps.Bounds {
	return apps.Bounds{TodoItems: l.TodoItems, TodoTitleBytes: l.TodoTitleBytes, Files: l.Files, JobSeconds: l.JobSeconds}
}

// GRPCLimits bound what a connection can hold of the gRPC listener (peer
// and admin APIs, health and reflection). Peers exchange messages up to
// MaxMessageBytes, so every node of a cluster needs the same value.
type GRPCLimits struct {
	// MaxMessageBytes bounds one peer message in either direction.
	MaxMessageBytes int
	// MaxStreams bounds the concurrent streams of one connection; a peer's
	// forwarded calls queue client-side beyond it.
	MaxStreams int
	// OpenStreams bounds the concurrent streams, over the whole server, of
	// the methods anyone may call without a credential (health and
	// reflection); each may buffer one message of up to MaxMessageBytes.
	OpenStreams int
	// OpenDeadline ends such an anonymous stream.
	OpenDeadline time.Duration
	// HandshakeTimeout bounds the TLS handshake and the HTTP/2 preface.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection that carried no stream for this
	// long; peers redial transparently.
	IdleTimeout time.Duration
}

// DefaultGRPCLimits returns the defaults documented on each flag.
func DefaultGRPCLimits() GRPCLimits {
	return GRPCLimits{
		MaxMessageBytes:  4 << 20,
		MaxStreams:       512,
		OpenStreams:      16,
		OpenDeadline:     30 * time.Second,
		HandshakeTimeout: 10 * time.Second,
		IdleTimeout:      5 * time.Minute,
	}
}

func (l GRPCLimits) validate() error {
	for _, b := range []struct {
		flag     string
		v        int
		min, max int
	}{
		// The cluster sends snapshots in 256 KiB chunks, at most half a
		// message: 1 MiB leaves room for them and their framing.
		{"grpc-max-message-bytes", l.MaxMessageBytes, 1 << 20, 256 << 20},
		{"grpc-max-streams", l.MaxStreams, 16, 1 << 16},
		{"grpc-open-streams", l.OpenStreams, 1, 4096},
	} {
		if b.v < b.min || b.v > b.max {
			return fieldErr(b.flag, "must be from %d to %d, got %d", b.min, b.max, b.v)
		}
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
		min  time.Duration
	}{
		{"grpc-open-deadline", l.OpenDeadline, time.Second},
		{"grpc-handshake-timeout", l.HandshakeTimeout, time.Second},
		{"grpc-idle-timeout", l.IdleTimeout, time.Second},
	} {
		if d.v < d.min {
			return fieldErr(d.flag, "must be at least %s, got %s", d.min, d.v)
		}
	}
	return nil
}
