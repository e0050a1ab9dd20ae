package session

import (
	"fmt"
	"slices"
	"testing"
)

func lensTools() []Tool {
	var view []Node
	for i := range 10 {
		view = append(view, Checkbox{ID: fmt.Sprintf("w%d", i)}) // two tools each
	}
	ts := append([]Tool{discoverTool("s")}, Derive("s", Column{Items: view}).Tools...)
	other := append([]Tool{discoverTool("t")}, Derive("t", Checkbox{ID: "w9"}).Tools...)
	return append(other, ts...)
}

func TestFocusLens(t *testing.T) {
	all := lensTools()
	tests := []struct {
		name string
		opts LensOptions
		want []string
	}{
		{"all capped", LensOptions{Session: "s", MaxTools: 3}, []string{"s.discover_tools", "s.w0.toggle", "s.w0.get_checked"}},
		{"focused first", LensOptions{Session: "s", Mode: LensFocused, FocusedID: "w7", MaxTools: 4},
			[]string{"s.discover_tools", "s.w7.toggle", "s.w7.get_checked", "s.w0.toggle"}},
		{"hover before focus", LensOptions{Session: "s", Mode: LensHover, FocusedID: "w7", HoverID: "w3", MaxTools: 5},
			[]string{"s.discover_tools", "s.w3.toggle", "s.w3.get_checked", "s.w7.toggle", "s.w7.get_checked"}},
		{"hover ignored in focused mode", LensOptions{Session: "s", Mode: LensFocused, HoverID: "w3", MaxTools: 2},
			[]string{"s.discover_tools", "s.w0.toggle"}},
		{"session-scoped", LensOptions{Session: "t", Mode: LensFocused, FocusedID: "w9"},
			[]string{"t.discover_tools", "t.w9.toggle", "t.w9.get_checked"}},
		{"default session is the first tool's", LensOptions{MaxTools: 1}, []string{"t.discover_tools"}},
	}
	for _, tt := range tests {
		if got := names(FocusLens(all, tt.opts)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := len(FocusLens(all, LensOptions{Session: "s"})); got != 15 {
		t.Errorf("default cap: %d tools", got)
	}
	// A session id that prefixes another's never leaks in.
	prefixed := append(Derive("s2", Button{ID: "b", OnClick: 1}).Tools, Derive("s", Button{ID: "b", OnClick: 1}).Tools...)
	if got := names(FocusLens(prefixed, LensOptions{Session: "s"})); !slices.Equal(got, []string{"s.b.click"}) {
		t.Errorf("prefix leak: %v", got)
	}
	if got := FocusLens(nil, LensOptions{}); len(got) != 0 {
		t.Errorf("empty input: %v", got)
	}
}
