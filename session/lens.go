package session

import "strings"

// Lens modes.
const (
	LensAll     = "all"
	LensFocused = "focused"
	LensHover   = "hover"
)

// LensOptions configures FocusLens.
type LensOptions struct {
	// Mode is LensAll, LensFocused or LensHover ("" means LensAll).
	Mode string
	// Session keeps only the tools of that session (the first name segment);
	// "" keeps the session of the first tool given.
	Session string
	// FocusedID is the focused widget's id (LensFocused and LensHover).
	FocusedID string
	// HoverID is the hovered widget's id (LensHover).
	HoverID string
	// MaxTools caps the result (default 15).
	MaxTools int
}

// FocusLens cuts a tool list to what matters now, within one session: the
// session's discover_tools, then the hovered widget's tools (LensHover), the
// focused widget's tools (LensFocused, LensHover), then the session's other
// tools in their given order, up to MaxTools. It is pure.
func FocusLens(tools []Tool, opts LensOptions) []Tool {
	limit := opts.MaxTools
	if limit <= 0 {
		limit = 15
	}
	session := opts.Session
	if session == "" && len(tools) > 0 {
		session = sessionOf(tools[0].Name)
	}
	var own []Tool
	for _, t := range tools {
		if sessionOf(t.Name) == session {
			own = append(own, t)
		}
	}
	var tiers [][]string // widget ids by priority
	switch opts.Mode {
	case LensHover:
		tiers = [][]string{{opts.HoverID}, {opts.FocusedID}}
	case LensFocused:
		tiers = [][]string{{opts.FocusedID}}
	}
	out := make([]Tool, 0, min(limit, len(own)))
	taken := make(map[string]bool, len(own))
	take := func(keep func(Tool) bool) {
		for _, t := range own {
			if len(out) >= limit {
				return
			}
			if !taken[t.Name] && keep(t) {
				taken[t.Name] = true
				out = append(out, t)
			}
		}
	}
	take(func(t Tool) bool { return t.Name == session+".discover_tools" })
	for _, tier := range tiers {
		for _, id := range tier {
			if id != "" {
				take(func(t Tool) bool { return t.Widget == id })
			}
		}
	}
	take(func(Tool) bool { return true })
	return out
}

func sessionOf(name string) string {
	s, _, _ := strings.Cut(name, ".")
	return s
}
