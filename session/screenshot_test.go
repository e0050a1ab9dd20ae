package session

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestScreenshotGrid(t *testing.T) {
	shot := Screenshot(Text{Text: "hi"}, 0, 0)
	lines := strings.Split(shot, "\n")
	if len(lines) != ScreenHeight {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		if n := utf8.RuneCountInString(l); n != ScreenWidth {
			t.Fatalf("line %d has %d runes", i, n)
		}
	}
	if small := Screenshot(Text{Text: "abcdefgh\n2\n3\n4"}, 4, 2); small != "abcd\n2   " {
		t.Errorf("clipped: %q", small)
	}
}

func TestScreenshotLayout(t *testing.T) {
	view := Column{Items: []Node{
		Box{Title: "Form", Items: []Node{
			TextInput{ID: "u", Label: "User", Value: "ann"},
			TextInput{ID: "m", Label: "PIN", Value: "1234", Mask: '•'},
			PasswordField{ID: "p", Label: "Pass", Value: "secret"},
		}},
		Row{Items: []Node{Button{ID: "a", Label: "Left"}, Button{ID: "b", Label: "Right"}}},
		Checkbox{ID: "c", Label: "ok", Checked: true},
		Tabs{ID: "t", Tabs: []string{"One", "Two"}, Selected: 1},
		Progress{Label: "Load", Value: 1, Max: 2},
		StatusBar{Items: []string{"a", "b"}},
		Text{Text: "evil\u202etext\x1b[2J"},
	}}
	got := Screenshot(view, 30, 12)
	want := strings.Join([]string{
		"┌ Form ──────────────────────┐",
		"│User: [ann]                 │",
		"│PIN: [••••]                 │",
		"│Pass: [******]              │",
		"└────────────────────────────┘",
		"[ Left ]       [ Right ]      ",
		"[x] ok                        ",
		" One  [Two]                   ",
		"[█████████░░░░░░░░░░] Load 50%",
		"a │ b                         ",
		"eviltext[2J                   ",
		"                              ",
	}, "\n")
	if got != want {
		t.Errorf("screenshot:\n%s\nwant:\n%s", got, want)
	}
}

func TestScreenshotDataWidgets(t *testing.T) {
	view := Column{Items: []Node{
		Table{ID: "t", Columns: []TableColumn{{Key: "n", Title: "Name"}, {Key: "v", Title: "V"}}, SortColumn: "v", SortDirection: "desc",
			Rows: []TableRow{{Key: "a", Cells: []string{"alpha", "2"}}, {Key: "b", Cells: []string{"beta", "1"}}}, Selected: "b"},
		Tree{ID: "tr", Selected: "x", Items: []TreeItem{{ID: "d", Label: "dir", Expanded: true, Children: []TreeItem{{ID: "x", Label: "file"}}}, {ID: "e", Label: "shut", Children: []TreeItem{{ID: "y"}}}}},
		Viewport{ID: "v", Offset: 1, Height: 2, Content: []Node{Text{Text: "l0\nl1\nl2\nl3"}}},
		Scrubber{ID: "s", Position: 30, Duration: 60, Playing: true},
		SelectList{ID: "sl", Label: "Pick", Options: []string{"a", "b"}, Selected: 0},
		Modal{ID: "m", Title: "Sure", Body: "Really?"},
	}}
	got := Screenshot(view, 24, 18)
	for _, want := range []string{
		"  Name  V↓", "  alpha 2", "> beta  1",
		" ▾ dir", "  >  file", " ▸ shut",
		"l1", "l2",
		"[─────●────] ▶ 0:30/1:00", // half way
		"> a", "  b",
		"┌ Sure ────", "│Really?", "│[ OK ] [ Cancel ]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "l0") || strings.Contains(got, "l3") {
		t.Errorf("viewport shows lines outside its range:\n%s", got)
	}
}

func TestWidgetTree(t *testing.T) {
	tree := WidgetTree(Column{Items: []Node{Button{ID: "b", Label: "Go", OnClick: 1, Exclude: true}, nil, Text{Text: "x"}}})
	kids := tree["children"].([]map[string]any)
	if len(kids) != 2 || kids[0]["id"] != "b" || len(kids[0]["actions"].([]string)) != 0 {
		t.Errorf("tree %v", tree)
	}
	if WidgetTree(nil) != nil {
		t.Error("nil view")
	}
}
