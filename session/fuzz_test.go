package session

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func fuzzWidgets() []ToolProvider {
	return []ToolProvider{
		Button{ID: "b", OnClick: "x"}, TextInput{ID: "t"}, PasswordField{ID: "p"}, TextArea{ID: "a"},
		SelectList{ID: "s", Options: []string{"x", "y"}}, Checkbox{ID: "c"}, Tabs{ID: "tb", Tabs: []string{"x"}},
		Menu{ID: "m", Items: []string{"x"}}, Modal{ID: "md"},
		Table{ID: "tl", Columns: []TableColumn{{Key: "k", Sortable: true}}, Rows: []TableRow{{Key: "r", Cells: []string{"v"}}}},
		Tree{ID: "tr", Items: []TreeItem{{ID: "n", Children: []TreeItem{{ID: "l"}}}}},
		Viewport{ID: "v", Height: 2, Total: 10}, Scrubber{ID: "sc", Duration: 10}, Chart{ID: "ch"},
	}
}

// FuzzPerform feeds arbitrary JSON arguments (network input) to every
// action of every built-in widget: none may panic, a write answers a
// message or an error, a read a JSON-encodable value or an error.
func FuzzPerform(f *testing.F) {
	for _, seed := range []string{`{}`, `{"text":"hi"}`, `{"index":1e300}`, `{"option":"x","index":0}`, `{"row":-1,"key":"r"}`,
		`{"column":"k","direction":"desc"}`, `{"node":"n"}`, `{"offset":8}`, `{"position":"NaN"}`, `{"limit":500,"offset":1e9}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var args map[string]any
		if json.Unmarshal([]byte(raw), &args) != nil {
			return
		}
		for _, w := range fuzzWidgets() {
			for _, a := range w.Actions() {
				out, err := w.Perform(a.Name, args)
				if err != nil {
					continue
				}
				if a.Write && out.Msg == nil {
					t.Fatalf("%s.%s answered no message", w.Kind(), a.Name)
				}
				if !a.Write {
					if _, err := json.Marshal(out.Value); err != nil {
						t.Fatalf("%s.%s answered an unencodable value: %v", w.Kind(), a.Name, err)
					}
				}
			}
		}
	})
}

// FuzzSanitize checks the sanitiser on arbitrary bytes.
func FuzzSanitize(f *testing.F) {
	for _, seed := range []string{"", "plain", "a\u202eb", "\xff\xfe", "\U000E0041x", "\u2800\u3164"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		once := Sanitize(s)
		if Sanitize(once) != once || !utf8.ValidString(once) {
			t.Fatalf("Sanitize(%q) = %q is not a fixed point", s, once)
		}
		for _, r := range once {
			if mustGo(r) {
				t.Fatalf("forbidden %U left", r)
			}
		}
	})
}
