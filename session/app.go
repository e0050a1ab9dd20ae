// Package session is the headless app runtime: Elm-style apps whose widget
// tree is projected as tools and resources, derivation of those tools, and a
// local session manager that runs each session as an actor.
package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Model is an app's state. It must be JSON-serialisable: it is snapshotted,
// handed off between nodes and returned by swarm_get_model.
type Model = any

// Msg is a message delivered to an app's Update.
type Msg = any

// App is an Elm-style application: Init gives the first model, Update
// applies one message, View renders a model as a widget tree.
type App interface {
	Init() (Model, error)
	Update(m Model, msg Msg) (Model, error)
	View(m Model) Node
}

// ContextUpdater is optionally implemented by an App that wants the calling
// context in Update (for instance to report progress with ProgressFrom). When
// implemented, UpdateContext is called instead of Update.
type ContextUpdater interface {
	UpdateContext(ctx context.Context, m Model, msg Msg) (Model, error)
}

// ContextIniter is optionally implemented by an App whose Init takes long
// (it loads data, say). When a session starts, InitContext is called
// instead of Init with the start's context: it is cancelled when the start
// is, and ProgressFrom(ctx) reports the start's progress (swarm_start run
// as a task). A restored or adopted session decodes its snapshot's model
// instead; such an app should implement ModelDecoder too, since decoding
// otherwise runs Init to learn the model's type.
type ContextIniter interface {
	InitContext(ctx context.Context) (Model, error)
}

// ResourceProvider is optionally implemented by an App to expose named
// projections of its model as resources.
type ResourceProvider interface {
	Resources() []Projection
}

// Projection is a named, read-only view of a model, served as the resource
// model/<Key>. Project must be pure and return a JSON-serialisable value.
type Projection struct {
	Key         string
	Description string
	Project     func(Model) any
}

// AppInfo describes a registered app.
type AppInfo struct {
	Name, Description string
}

// Registry maps app names to factories. It is safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	apps     map[string]registered
	defaults []string
}

type registered struct {
	info    AppInfo
	factory func() App
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{apps: make(map[string]registered)}
}

// Register adds an app under name, which must be a valid id
// ([A-Za-z0-9_-]{1,32}). Registering a name twice is an error.
func (r *Registry) Register(name, description string, factory func() App) error {
	if !ValidID(name) {
		return fmt.Errorf("registering app %q: %w", name, ErrInvalidID)
	}
	if factory == nil {
		return fmt.Errorf("registering app %q: factory is nil", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.apps[name]; ok {
		return fmt.Errorf("registering app %q: %w", name, ErrExists)
	}
	r.apps[name] = registered{info: AppInfo{Name: name, Description: Sanitize(description)}, factory: factory}
	return nil
}

// SetDefaultStartable records the apps a Manager makes startable when its
// config names none (ManagerConfig.Startable == nil). Every name must be
// registered already.
func (r *Registry) SetDefaultStartable(names ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if _, ok := r.apps[n]; !ok {
			return fmt.Errorf("setting default startable apps: app %q is not registered", n)
		}
	}
	r.defaults = slices.Clone(names)
	return nil
}

// DefaultStartable returns the names set by SetDefaultStartable.
func (r *Registry) DefaultStartable() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.defaults)
}

// Lookup returns the factory registered under name.
func (r *Registry) Lookup(name string) (func() App, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.apps[name]
	return a.factory, ok
}

// Info returns the description of a registered app.
func (r *Registry) Info(name string) (AppInfo, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.apps[name]
	return a.info, ok
}

// Names returns the registered app names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.apps))
	for n := range r.apps {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
