package session

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Screenshot renders the session's current view as text on a width×height
// grid (zero for the default 100×30).
func (m *Manager) Screenshot(id string, width, height int) (shot string, err error) {
	a, err := m.running(id)
	if err != nil {
		return "", fmt.Errorf("taking screenshot: %w", err)
	}
	a.mu.RLock()
	view := a.view
	a.mu.RUnlock()
	defer func() {
		if p := recover(); p != nil { // a custom widget's Render
			shot, err = "", fmt.Errorf("taking screenshot of %s: widget panicked: %v", id, p)
		}
	}()
	return Screenshot(view, width, height), nil
}

// ResourceNames lists the session's resources: "widgets", "context" and
// "model/<key>" for each projection the app declares.
func (m *Manager) ResourceNames(id string) ([]string, error) {
	a, err := m.running(id)
	if err != nil {
		return nil, fmt.Errorf("listing resources: %w", err)
	}
	names := []string{ResourceWidgets, ResourceContext}
	for _, p := range a.projs {
		names = append(names, "model/"+p.Key)
	}
	return names, nil
}

// ReadResource returns the named resource of the session as JSON.
func (m *Manager) ReadResource(id, name string) (json.RawMessage, error) {
	a, err := m.running(id)
	if err != nil {
		return nil, fmt.Errorf("reading resource %s: %w", Sanitize(name), err)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	if name == ResourceContext {
		return a.contextResource(), nil
	}
	b, ok := a.resources[name]
	if !ok {
		return nil, fmt.Errorf("reading resource %s of session %s: %w", Sanitize(name), id, ErrUnknownResource)
	}
	return slices.Clone(b), nil
}

// Focus returns the id of the widget the session's last successful write
// action went to ("" before any): the widget SendKey reports in KeyPress and
// a natural FocusedID for FocusLens.
func (m *Manager) Focus(id string) (string, error) {
	a, err := m.running(id)
	if err != nil {
		return "", fmt.Errorf("reading focus: %w", err)
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.focus, nil
}
