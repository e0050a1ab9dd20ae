// Package apps holds the demo apps a node ships: small, real Elm-style apps
// that together use every built-in widget kind.
package apps

import (
	"fmt"

	"github.com/mcpswarm/mcpswarm/session"
)

// Bounds bound what a client can make the demo apps hold (issue #13).
// Zero fields take the defaults.
type Bounds struct {
	// TodoItems and TodoTitleBytes bound a todo list.
	TodoItems, TodoTitleBytes int
	// Files bounds a file tree.
	Files int
	// JobSeconds bounds a job of the jobs demo.
	JobSeconds int
}

// DefaultBounds returns the demo apps' default bounds.
func DefaultBounds() Bounds {
	return Bounds{TodoItems: DefaultTodoItems, TodoTitleBytes: DefaultTodoTitleBytes, Files: DefaultMaxFiles, JobSeconds: DefaultJobSeconds}
}

// demos lists the demo apps in registration order.
func demos(b Bounds) []struct {
	name, description string
	factory           func() session.App
} {
	return []struct {
		name, description string
		factory           func() session.App
	}{
		{"counter", "A counter with increment, decrement and reset buttons.", func() session.App { return Counter{} }},
		{"login", "A login form with a username, a password and a status line.", func() session.App { return Login{} }},
		{"todo", "A todo list: add, toggle and delete items, filter by tab.", func() session.App { return Todo{MaxItems: b.TodoItems, MaxTitleBytes: b.TodoTitleBytes} }},
		{"table", "The first 60 chemical elements in a sortable, selectable table.", func() session.App { return Elements{} }},
		{"files", "A file browser over an in-memory tree with a content viewer.", func() session.App { return Files{MaxFiles: b.Files} }},
		{"player", "A media player with a scrubber, play/pause/seek and a level chart.", func() session.App { return Player{} }},
		{"wizard", "A three-step sign-up wizard with tabs, a plan list, terms and a confirm dialog.", func() session.App { return Wizard{} }},
		{"jobs", "Jobs that take seconds: pick a duration and run one; it reports progress and may run as a task.", func() session.App { return Jobs{MaxSeconds: b.JobSeconds} }},
	}
}

// DemoNames returns the names of the demo apps: the default startable list.
func DemoNames() []string {
	var names []string
	for _, d := range demos(Bounds{}) {
		names = append(names, d.name)
	}
	return names
}

// Register adds the demo apps to r, with their default bounds, and makes
// them its default startable list.
func Register(r *session.Registry) error { return RegisterWith(r, DefaultBounds()) }

// RegisterWith is Register with the bounds b.
func RegisterWith(r *session.Registry, b Bounds) error {
	for _, d := range demos(b) {
		if err := r.Register(d.name, d.description, d.factory); err != nil {
			return fmt.Errorf("registering demo apps: %w", err)
		}
	}
	if err := r.SetDefaultStartable(DemoNames()...); err != nil {
		return fmt.Errorf("registering demo apps: %w", err)
	}
	return nil
}

// modelAs converts a model to T, accepting T or *T.
func modelAs[T any](m session.Model) (T, error) {
	switch v := m.(type) {
	case T:
		return v, nil
	case *T:
		if v != nil {
			return *v, nil
		}
	}
	var zero T
	return zero, fmt.Errorf("model is a %T, want %T", m, zero)
}
